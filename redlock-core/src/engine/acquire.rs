//! One lock acquisition as a state machine: acquire rounds, the fencing
//! raise round, the release of a failed round, retry pauses, the deadline.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::decide::deadline::later;
use crate::decide::node_set::NodeSet;
use crate::engine::{
    Entropy, Machine, Message, Round, RoundId, RoundKind, RoundRecord, Settings, Timer, Transmit,
};
use crate::{
    fence_step, Claim, Decision, FenceStep, FencingToken, LockError, NodeFailure, Queued,
    Resources, Response, Ttl, Verdict,
};

/// A lock won by an [`Acquire`].
///
/// # Examples
///
/// See the [`engine`](crate::engine) module docs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Acquired {
    /// The lock's keys and token.
    pub claim: Arc<Claim>,
    /// The TTL it was acquired with.
    pub ttl: Ttl,
    /// When its validity ends, on the manager's clock.
    pub valid_until: Instant,
    /// Its fencing token, when fencing is on.
    pub fence: Option<FencingToken>,
    /// The rounds it took (the last one won).
    pub attempts: u32,
    /// The nodes that refused the winning round (one flag per node; `None`:
    /// none did): they never held the lock, so its extends and its release
    /// skip them ([`Lease::skips`](crate::engine::Lease::skips)).
    pub refused: Option<Arc<[bool]>>,
}

/// One acquisition of a lock: a round to every node, decided by the
/// [`Tally`](crate::Tally) and [`judge`](crate::judge); with fencing on more
/// than one node, a raise round; a failed round released on every node but
/// those that refused it (they answered and set nothing), waiting, at most
/// one per-node timeout, for the nodes that granted or had not answered, so
/// that a late grant is undone; then, with a deadline, a
/// random pause and another round, until the deadline.
///
/// # Examples
///
/// See the [`engine`](crate::engine) module docs.
#[derive(Debug)]
pub struct Acquire<E> {
    settings: Settings,
    resources: Resources,
    ttl: Ttl,
    /// `None`: one round (`try_lock`).
    deadline: Option<Instant>,
    /// How this caller's own rounds wait (fairness marks), if it waits.
    queued: Option<Queued>,
    /// The first round is queued too ([`Acquire::queue_first`]).
    queue_first: bool,
    /// See [`Acquire::mark_at_once`].
    mark_at_once: bool,
    attempts: u32,
    /// The pause after the current round if it fails, drawn when it started.
    pause: Duration,
    next_round: RoundId,
    phase: Phase<E>,
    transmits: VecDeque<Transmit>,
    outcome: Option<Result<Acquired, LockError<E>>>,
    /// Decided rounds' records, with `Settings::observe`.
    records: VecDeque<RoundRecord>,
    /// Alternatives, one of which is wanted ([`Acquire::one_of`]).
    choices: Option<Choices>,
    /// Every round's claim is shared ([`Acquire::read`]).
    shared: bool,
    /// The last queued claim sent: its manager may wait in the keys' lines
    /// on the nodes, and leaves them if the call fails.
    marked: Option<Arc<Claim>>,
}

/// The alternatives of an [`Acquire::one_of`] and where the sweep over
/// them stands.
#[derive(Debug)]
struct Choices {
    all: Arc<[Resources]>,
    /// The one the next round tries.
    next: usize,
    /// Rounds refused in a row in this sweep.
    refused: usize,
}

#[derive(Debug)]
enum Phase<E> {
    Idle,
    /// An acquire round under way.
    Acquiring {
        claim: Arc<Claim>,
        round: Round<E>,
        holder: Option<u64>,
    },
    /// A won fenced round raising the counters to `value` on a quorum.
    Raising {
        claim: Arc<Claim>,
        /// Boxed: a raise is rare, and without it every phase would be
        /// two rounds large, copied at each change of phase.
        acquired: Box<Round<E>>,
        raise: Round<E>,
        token: FencingToken,
    },
    /// A failed round's release, waiting for the nodes that may hold.
    Abandoning {
        round: RoundId,
        waiting: NodeSet,
        left: usize,
        error: LockError<E>,
    },
    /// Between rounds.
    Pausing {
        until: Instant,
        error: LockError<E>,
    },
    Done,
}

impl<E> Acquire<E> {
    /// An acquisition of `resources` for `ttl`: one round when `deadline` is
    /// `None`, rounds until `deadline` (manager's clock) otherwise. With
    /// `queued`, its rounds after the first carry that fairness mark (see
    /// [`Queued`]): the first is a plain acquire.
    ///
    /// # Examples
    ///
    /// See the [`engine`](crate::engine) module docs.
    #[must_use]
    pub fn new(
        settings: Settings,
        resources: Resources,
        ttl: Ttl,
        deadline: Option<Instant>,
        queued: Option<Queued>,
    ) -> Self {
        Acquire {
            settings,
            resources,
            ttl,
            deadline,
            queued,
            queue_first: false,
            mark_at_once: false,
            attempts: 0,
            pause: Duration::ZERO,
            next_round: RoundId::FIRST,
            phase: Phase::Idle,
            transmits: VecDeque::new(),
            outcome: None,
            records: VecDeque::new(),
            choices: None,
            shared: false,
            marked: None,
        }
    }

    /// The acquisition of a read of the read-write lock `resources`, as
    /// [`Redlock::read`](crate::Redlock::read) and the simulator make it:
    /// every round's claim is shared ([`Claim::shared`]) and queued from
    /// the first round on ([`Acquire::queue_first`]): a refused round waits
    /// in the keys' lines with a reader's place, and a round gives way to
    /// the live writers of other managers ahead of it in a line (not to
    /// readers). `deadline` as in [`Acquire::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_core::{NodeId, Resources, Ttl, engine::{Acquire, Entropy, Machine, Settings}};
    /// use redlock_core::backend::{Queued, Token};
    /// # struct Zero;
    /// # impl Entropy for Zero {
    /// #     fn token(&mut self) -> Result<Token, redlock_core::EntropyError> { Ok(Token::from_bytes([0; 20])) }
    /// #     fn holder(&mut self) -> Result<u64, redlock_core::EntropyError> { Ok(0) }
    /// #     fn jitter(&mut self) -> u64 { 1 }
    /// # }
    /// let settings = Settings::new(vec![NodeId::new("a")].into());
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let queued = Queued::new(7, ttl, true);
    /// let mut read = Acquire::<std::io::Error>::read(settings, Resources::one("doc")?, ttl, None, queued);
    /// read.start(Instant::now(), &mut Zero);
    /// let round = read.poll_transmit().unwrap();
    /// assert!(round.claim().is_shared());
    /// assert_eq!(round.claim().queue(), Some(queued));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn read(
        settings: Settings,
        resources: Resources,
        ttl: Ttl,
        deadline: Option<Instant>,
        queued: Queued,
    ) -> Self {
        let mut acquire = Acquire::new(settings, resources, ttl, deadline, Some(queued));
        acquire.shared = true;
        acquire.queue_first();
        acquire
    }

    /// Makes this an acquisition of *one* of `choices` (a semaphore's
    /// permits, each a resource set of its own) instead of the resources
    /// given to [`Acquire::new`]. Each round tries one choice, the first a
    /// random one; a round refused by contention moves on to the next
    /// choice at once, and the random pause comes only after every choice
    /// was refused in a row. Without a deadline, one sweep over the choices
    /// is the whole call. The lock won is on the choice its round tried
    /// ([`Acquired::claim`]). Empty `choices` change nothing.
    ///
    /// Safety is the mutex's: each choice is a lock of its own, so at most
    /// `choices.len()` callers hold one at a time.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::{Duration, Instant};
    /// # use redlock_core::{NodeId, Resources, Ttl, engine::{Acquire, Machine, Message, Settings}};
    /// # use redlock_core::backend::{AcquireOutcome, Response, Token};
    /// # struct Zero;
    /// # impl redlock_core::engine::Entropy for Zero {
    /// #     fn token(&mut self) -> Result<Token, redlock_core::EntropyError> { Ok(Token::from_bytes([0; 20])) }
    /// #     fn holder(&mut self) -> Result<u64, redlock_core::EntropyError> { Ok(0) }
    /// #     fn jitter(&mut self) -> u64 { 0 }
    /// # }
    /// let settings = Settings::new(vec![NodeId::new("a")].into());
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let permits: Arc<[Resources]> = vec![Resources::one("s:permit:0")?, Resources::one("s:permit:1")?].into();
    /// let now = Instant::now();
    /// let mut acquire = Acquire::<std::io::Error>::new(settings, permits[0].clone(), ttl, None, None);
    /// acquire.one_of(Arc::clone(&permits));
    /// acquire.start(now, &mut Zero);
    /// // The first permit is taken: refused, and the next is tried at once.
    /// let first = acquire.poll_transmit().unwrap();
    /// assert_eq!(first.claim().resources(), &permits[0]);
    /// acquire.handle_reply(now, first.round(), 0, Ok(Response::Acquire(AcquireOutcome::HeldByOther)));
    /// assert!(matches!(acquire.poll_transmit().unwrap().message(), Message::Release(_)));
    /// acquire.handle_timeout(now, &mut Zero);
    /// let second = acquire.poll_transmit().unwrap();
    /// assert_eq!(second.claim().resources(), &permits[1]);
    /// acquire.handle_reply(now, second.round(), 0, Ok(Response::Acquire(AcquireOutcome::Granted { fence: None })));
    /// let lock = acquire.poll().unwrap()?;
    /// assert_eq!(lock.claim.resources(), &permits[1]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn one_of(&mut self, choices: Arc<[Resources]>) {
        if choices.is_empty() {
            return;
        }
        self.choices = Some(Choices {
            all: choices,
            next: 0,
            refused: 0,
        });
    }

    /// Starts the first round, with a fresh token from `entropy`.
    ///
    /// # Examples
    ///
    /// See the [`engine`](crate::engine) module docs.
    pub fn start(&mut self, now: Instant, entropy: &mut dyn Entropy) {
        self.attempt(now, entropy);
    }

    /// Starts the first round with a claim made by someone else (a local
    /// hand-off, which queues it behind the previous holder's release);
    /// `entropy` gives its fencing holder id and pause.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::{sync::Arc, time::{Duration, Instant}};
    /// # use redlock_core::{NodeId, Resources, Ttl, engine::{Acquire, Machine, Settings}};
    /// # use redlock_core::backend::{Claim, Token};
    /// let settings = Settings::new(vec![NodeId::new("a")].into());
    /// let claim = Arc::new(Claim::new(Resources::one("k")?, Token::from_bytes([1; 20])));
    /// let mut acquire = Acquire::<std::io::Error>::new(
    ///     settings, claim.resources().clone(), Ttl::new(Duration::from_secs(1))?, None, None);
    /// # struct Zero;
    /// # impl redlock_core::engine::Entropy for Zero {
    /// #     fn token(&mut self) -> Result<Token, redlock_core::EntropyError> { Ok(Token::from_bytes([0; 20])) }
    /// #     fn holder(&mut self) -> Result<u64, redlock_core::EntropyError> { Ok(0) }
    /// #     fn jitter(&mut self) -> u64 { 0 }
    /// # }
    /// acquire.start_with(Instant::now(), claim, &mut Zero);
    /// assert!(acquire.poll_transmit().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_with(&mut self, now: Instant, claim: Arc<Claim>, entropy: &mut dyn Entropy) {
        self.round_with(now, claim, entropy);
    }

    /// Makes the first round carry the fairness mark too (see
    /// [`Queued`]), as the later ones do: for a key other managers waited
    /// for lately, where a plain acquire would jump their line. Does
    /// nothing without `queued`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use redlock_core::{NodeId, Resources, Ttl, engine::{Acquire, Machine, Settings}};
    /// # use redlock_core::backend::{Queued, Token};
    /// # struct Zero;
    /// # impl redlock_core::engine::Entropy for Zero {
    /// #     fn token(&mut self) -> Result<Token, redlock_core::EntropyError> { Ok(Token::from_bytes([0; 20])) }
    /// #     fn holder(&mut self) -> Result<u64, redlock_core::EntropyError> { Ok(0) }
    /// #     fn jitter(&mut self) -> u64 { 0 }
    /// # }
    /// let settings = Settings::new(vec![NodeId::new("a")].into());
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let queued = Queued::new(7, ttl, true);
    /// let now = Instant::now();
    /// let mut acquire = Acquire::<std::io::Error>::new(
    ///     settings, Resources::one("k")?, ttl, Some(now + Duration::from_secs(1)), Some(queued));
    /// acquire.queue_first();
    /// acquire.start(now, &mut Zero);
    /// assert_eq!(acquire.poll_transmit().unwrap().claim().queue(), Some(queued));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn queue_first(&mut self) {
        self.queue_first = true;
    }

    /// When its plain first round is refused, the next round (queued, so
    /// that it leaves this caller's waiting mark) follows at once instead
    /// of after a pause: the nodes notify waiters only of keys someone
    /// marked, so a caller woken by notifications marks before it waits.
    /// Does nothing without `queued` or after [`Acquire::queue_first`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use redlock_core::{NodeId, Resources, Ttl, engine::{Acquire, Machine, Message, Settings, Timer}};
    /// # use redlock_core::backend::{AcquireOutcome, Queued, Response, Token};
    /// # struct Zero;
    /// # impl redlock_core::engine::Entropy for Zero {
    /// #     fn token(&mut self) -> Result<Token, redlock_core::EntropyError> { Ok(Token::from_bytes([0; 20])) }
    /// #     fn holder(&mut self) -> Result<u64, redlock_core::EntropyError> { Ok(0) }
    /// #     fn jitter(&mut self) -> u64 { u64::MAX }
    /// # }
    /// let settings = Settings::new(vec![NodeId::new("a")].into());
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let now = Instant::now();
    /// let mut acquire = Acquire::<std::io::Error>::new(settings, Resources::one("k")?, ttl,
    ///     Some(now + Duration::from_secs(5)), Some(Queued::new(7, ttl, true)));
    /// acquire.mark_at_once();
    /// acquire.start(now, &mut Zero);
    /// let first = acquire.poll_transmit().unwrap();
    /// assert_eq!(first.claim().queue(), None, "plain");
    /// acquire.handle_reply(now, first.round(), 0, Ok(Response::Acquire(AcquireOutcome::HeldByOther)));
    /// // The refused round's release (it cleans up grants that come late).
    /// assert!(matches!(acquire.poll_transmit().unwrap().message(), Message::Release(_)));
    /// assert_eq!(acquire.poll_timeout(), Some(Timer::At(now)), "no pause");
    /// acquire.handle_timeout(now, &mut Zero);
    /// assert!(acquire.poll_transmit().unwrap().claim().queue().is_some(), "queued");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn mark_at_once(&mut self) {
        self.mark_at_once = true;
    }

    /// The keys this acquisition waits for between rounds, when it waits
    /// in other managers' line (it has a deadline and `queued`): a
    /// notification that one was released may end its pause
    /// ([`Acquire::handle_released`]).
    ///
    /// # Examples
    ///
    /// See [`Acquire::handle_released`].
    #[must_use]
    pub fn waits_for(&self) -> Option<&Resources> {
        (self.deadline.is_some() && self.queued.is_some()).then_some(&self.resources)
    }

    /// A node reported one of its keys released: ends the pause between
    /// rounds now, so that the next round starts at once (if the deadline
    /// has not passed). Outside a pause it does nothing. Safety does not
    /// depend on it: a round started early is still a full round.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use redlock_core::{NodeId, Resources, Ttl, engine::{Acquire, Machine, Message, Settings, Timer}};
    /// # use redlock_core::backend::{AcquireOutcome, Queued, Response, Token};
    /// # struct Zero;
    /// # impl redlock_core::engine::Entropy for Zero {
    /// #     fn token(&mut self) -> Result<Token, redlock_core::EntropyError> { Ok(Token::from_bytes([0; 20])) }
    /// #     fn holder(&mut self) -> Result<u64, redlock_core::EntropyError> { Ok(0) }
    /// #     fn jitter(&mut self) -> u64 { 0 }
    /// # }
    /// let settings = Settings::new(vec![NodeId::new("a")].into());
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let now = Instant::now();
    /// let mut acquire = Acquire::<std::io::Error>::new(settings, Resources::one("k")?, ttl,
    ///     Some(now + Duration::from_secs(5)), Some(Queued::new(7, ttl, true)));
    /// assert!(acquire.waits_for().is_some());
    /// acquire.start(now, &mut Zero);
    /// let round = acquire.poll_transmit().unwrap().round();
    /// acquire.handle_reply(now, round, 0, Ok(Response::Acquire(AcquireOutcome::HeldByOther)));
    /// assert!(matches!(acquire.poll_transmit().unwrap().message(), Message::Release(_)));
    /// assert!(matches!(acquire.poll_timeout(), Some(Timer::At(at)) if at > now), "pausing");
    /// acquire.handle_released(now, &mut Zero);
    /// let next = acquire.poll_transmit().expect("the next round, at once");
    /// assert!(matches!(next.message(), Message::Acquire { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn handle_released(&mut self, now: Instant, entropy: &mut dyn Entropy) {
        if let Phase::Pausing { until, .. } = &mut self.phase {
            *until = now.min(*until);
            self.handle_timeout(now, entropy);
        }
    }

    /// How many rounds were started.
    ///
    /// # Examples
    ///
    /// See the [`engine`](crate::engine) module docs.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The resources being acquired.
    ///
    /// # Examples
    ///
    /// See the [`engine`](crate::engine) module docs.
    #[must_use]
    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    /// The result, once (then `None`).
    ///
    /// # Examples
    ///
    /// See the [`engine`](crate::engine) module docs.
    pub fn poll(&mut self) -> Option<Result<Acquired, LockError<E>>> {
        self.outcome.take()
    }

    fn round_id(&mut self) -> RoundId {
        let id = self.next_round;
        self.next_round = id.next();
        id
    }

    fn send(
        &mut self,
        round: RoundId,
        message: Message,
        claim: &Arc<Claim>,
        wanted: Option<NodeSet>,
    ) {
        self.transmits.push_back(Transmit {
            round,
            message,
            claim: Arc::clone(claim),
            wanted,
            to: None,
        });
    }

    /// A new round with a fresh token.
    fn attempt(&mut self, now: Instant, entropy: &mut dyn Entropy) {
        let token = match entropy.token() {
            Ok(token) => token,
            Err(e) => return self.finish(Err(LockError::Entropy(e))),
        };
        if let Some(choices) = &mut self.choices {
            let len = choices.all.len();
            if self.attempts == 0 {
                // Start at a random choice, so that callers spread out.
                choices.next = usize::try_from(entropy.jitter() % len as u64).unwrap_or(0);
            }
            self.resources = choices.all[choices.next].clone();
            choices.next = (choices.next + 1) % len;
        }
        let mut claim = self.settings.claim(self.resources.clone(), token);
        if self.shared {
            claim = claim.shared();
        }
        // The first round is a plain acquire (the fast path: on the Redis
        // backend one `SET NX`, where a queued one runs a script); a caller
        // that was refused leaves its waiting marks from the next round on.
        if let Some(queued) = self
            .queued
            .filter(|_| self.attempts > 0 || self.queue_first)
        {
            claim = claim.queued(queued);
        }
        self.round_with(now, Arc::new(claim), entropy);
    }

    fn round_with(&mut self, now: Instant, claim: Arc<Claim>, entropy: &mut dyn Entropy) {
        let holder = if self.settings.fencing {
            match entropy.holder() {
                Ok(holder) => Some(holder),
                Err(e) => return self.finish(Err(LockError::Entropy(e))),
            }
        } else {
            None
        };
        self.pause = self.settings.retry.pick(entropy.jitter());
        self.attempts = self.attempts.saturating_add(1);
        // A queued round may leave its manager's place in the keys' lines
        // (a writer's or a reader's): giving up takes it out again.
        if claim.queue().is_some() {
            self.marked = Some(Arc::clone(&claim));
        }
        let id = self.round_id();
        let message = Message::Acquire {
            ttl: self.ttl,
            fence: self.settings.fencing,
        };
        self.send(id, message, &claim, None);
        let round = Round::new(id, self.settings.nodes.len(), now, self.settings.observe);
        self.phase = Phase::Acquiring {
            claim,
            round,
            holder,
        };
    }

    /// The current round is decided (or timed out) at `now`.
    fn decide(&mut self, now: Instant) {
        if self.settings.observe {
            let record = match &self.phase {
                Phase::Acquiring { round, .. } => Some(round.record_as(
                    RoundKind::Acquire,
                    &self.resources,
                    now,
                    &self.settings.nodes,
                )),
                Phase::Raising { raise, .. } => Some(raise.record_as(
                    RoundKind::RaiseFence,
                    &self.resources,
                    now,
                    &self.settings.nodes,
                )),
                _ => None,
            };
            self.records.extend(record);
        }
        let drift = self.settings.drift(self.ttl);
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Acquiring {
                claim,
                round,
                holder,
            } => match round.verdict(now, self.ttl, drift) {
                Verdict::Held { validity } if !self.settings.fencing => self.finish(Ok(Acquired {
                    claim,
                    ttl: self.ttl,
                    valid_until: later(now, validity),
                    fence: None,
                    attempts: self.attempts,
                    refused: round.refused_nodes(),
                })),
                Verdict::Held { validity } => {
                    let holder = holder.unwrap_or_default();
                    match fence_step(&round.fences, self.settings.nodes.len()) {
                        Some(FenceStep::Done(value)) => self.finish(Ok(Acquired {
                            claim,
                            ttl: self.ttl,
                            valid_until: later(now, validity),
                            fence: Some(FencingToken::new(value, holder)),
                            attempts: self.attempts,
                            refused: round.refused_nodes(),
                        })),
                        Some(FenceStep::Raise(value)) => {
                            let id = self.round_id();
                            self.send(id, Message::RaiseFence(value), &claim, None);
                            // Validity counts from the acquire's start.
                            let raise = Round::new(
                                id,
                                self.settings.nodes.len(),
                                round.started,
                                self.settings.observe,
                            );
                            self.phase = Phase::Raising {
                                claim,
                                acquired: Box::new(round),
                                raise,
                                token: FencingToken::new(value, holder),
                            };
                        }
                        // The backend granted without counters although
                        // asked for them.
                        None => {
                            let error = LockError::NoFencingCounters;
                            self.abandon(now, &claim, &round, error);
                        }
                    }
                }
                verdict => {
                    let may_hold = round.may_hold();
                    let to = round.release_to();
                    let error = round.into_error(
                        verdict,
                        now,
                        self.ttl,
                        &self.settings.nodes,
                        LockError::Contended,
                    );
                    self.abandon_nodes(now, &claim, may_hold, to, error);
                }
            },
            Phase::Raising {
                claim,
                acquired,
                raise,
                token,
            } => match raise.verdict(now, self.ttl, drift) {
                Verdict::Held { validity } => self.finish(Ok(Acquired {
                    claim,
                    ttl: self.ttl,
                    valid_until: later(now, validity),
                    fence: Some(token),
                    attempts: self.attempts,
                    refused: acquired.refused_nodes(),
                })),
                verdict => {
                    let error = raise.into_error(
                        verdict,
                        now,
                        self.ttl,
                        &self.settings.nodes,
                        LockError::Contended,
                    );
                    self.abandon(now, &claim, &acquired, error);
                }
            },
            other => self.phase = other,
        }
    }

    fn abandon(&mut self, now: Instant, claim: &Arc<Claim>, round: &Round<E>, error: LockError<E>) {
        self.abandon_nodes(now, claim, round.may_hold(), round.release_to(), error);
    }

    /// Releases `claim` on the nodes in `to` (`None`: all; the others
    /// refused, and set nothing) and waits for those in `may_hold`.
    fn abandon_nodes(
        &mut self,
        now: Instant,
        claim: &Arc<Claim>,
        may_hold: NodeSet,
        to: Option<NodeSet>,
        error: LockError<E>,
    ) {
        let id = self.round_id();
        let left = may_hold.len();
        // Without its waiting mark: the nodes keep the caller's place in
        // the keys' lines for its next round (see `Queued`).
        let claim = if claim.queue().is_some() {
            Arc::new(claim.unqueued())
        } else {
            Arc::clone(claim)
        };
        self.transmits.push_back(Transmit {
            round: id,
            message: Message::Release(self.ttl),
            claim,
            wanted: Some(may_hold.clone()),
            to,
        });
        self.phase = Phase::Abandoning {
            round: id,
            waiting: may_hold,
            left,
            error,
        };
        if left == 0 {
            self.after_abandon(now);
        }
    }

    /// After a failed round's release: pause and retry, or give up.
    fn after_abandon(&mut self, now: Instant) {
        let Phase::Abandoning { error, .. } = std::mem::replace(&mut self.phase, Phase::Done)
        else {
            return;
        };
        // Refused by contention with choices left in this sweep: the next
        // one at once.
        let contended = matches!(error, LockError::Contended(_));
        let next_choice = self.choices.as_mut().is_some_and(|choices| {
            choices.refused = if contended { choices.refused + 1 } else { 0 };
            if choices.refused < choices.all.len() {
                contended
            } else {
                choices.refused = 0;
                false
            }
        });
        if next_choice && self.deadline.is_none_or(|deadline| now < deadline) {
            self.phase = Phase::Pausing { until: now, error };
            return;
        }
        let Some(deadline) = self.deadline else {
            return self.finish(Err(error));
        };
        if !error.is_retryable() {
            return self.finish(Err(error));
        }
        if now >= deadline {
            return self.give_up(error);
        }
        // Cut at the deadline: a round starts only before it.
        let mut until = later(now, self.pause).min(deadline);
        if self.mark_at_once && self.attempts == 1 && !self.queue_first && self.queued.is_some() {
            until = now;
        }
        self.phase = Phase::Pausing { until, error };
    }

    fn give_up(&mut self, last: LockError<E>) {
        let attempts = self.attempts;
        self.finish(Err(LockError::Timeout {
            attempts,
            last: Box::new(last),
        }));
    }

    fn finish(&mut self, outcome: Result<Acquired, LockError<E>>) {
        self.phase = Phase::Done;
        if outcome.is_err() {
            self.leave_lines();
        }
        self.outcome = Some(outcome);
    }

    /// Stops the acquisition between rounds (its caller cancelled it):
    /// [`poll`](Self::poll) then gives [`LockError::Cancelled`], after the
    /// transmits that take its manager out of the keys' lines.
    ///
    /// # Examples
    ///
    /// See the [`engine`](crate::engine) module docs.
    pub fn cancel(&mut self) {
        self.finish(Err(LockError::Cancelled));
    }

    /// A caller that gives up leaves the keys' lines on the nodes at once,
    /// rather than being waited for (and given way to) until its places
    /// expire: the release of its last queued claim takes its manager's
    /// places out (its token holds nothing by now; no reply is wanted).
    fn leave_lines(&mut self) {
        let Some(claim) = self.marked.take() else {
            return;
        };
        let round = self.round_id();
        self.transmits.push_back(Transmit {
            round,
            message: Message::Release(self.ttl),
            claim,
            wanted: Some(NodeSet::new()),
            to: None,
        });
    }
}

impl<E> Machine<E> for Acquire<E> {
    fn handle_reply(
        &mut self,
        now: Instant,
        round: RoundId,
        node: usize,
        result: Result<Response, NodeFailure<E>>,
    ) {
        let mut decided = false;
        let mut released = false;
        match &mut self.phase {
            Phase::Acquiring { round: r, .. } | Phase::Raising { raise: r, .. }
                if r.id == round =>
            {
                decided = r.record(node, result, Some(now)) != Decision::Pending;
            }
            Phase::Abandoning {
                round: id,
                waiting,
                left,
                ..
            } if *id == round && waiting.contains(node) => {
                waiting.remove(node);
                *left -= 1;
                released = *left == 0;
            }
            _ => {}
        }
        if decided {
            self.decide(now);
        } else if released {
            self.after_abandon(now);
        }
    }

    fn handle_expired(&mut self, now: Instant, round: RoundId) {
        match &mut self.phase {
            Phase::Acquiring { round: r, .. } | Phase::Raising { raise: r, .. }
                if r.id == round =>
            {
                r.expire();
                self.decide(now);
            }
            Phase::Abandoning { round: id, .. } if *id == round => self.after_abandon(now),
            _ => {}
        }
    }

    fn handle_timeout(&mut self, now: Instant, entropy: &mut dyn Entropy) {
        let Phase::Pausing { until, .. } = &self.phase else {
            return;
        };
        if now < *until {
            return;
        }
        let Phase::Pausing { error, .. } = std::mem::replace(&mut self.phase, Phase::Done) else {
            return;
        };
        if self.deadline.is_some_and(|deadline| now >= deadline) {
            self.give_up(error);
        } else {
            self.attempt(now, entropy);
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    fn poll_timeout(&self) -> Option<Timer> {
        match &self.phase {
            Phase::Acquiring { round, .. } => Some(Timer::Round(round.id)),
            Phase::Raising { raise, .. } => Some(Timer::Round(raise.id)),
            Phase::Abandoning { round, .. } => Some(Timer::Round(*round)),
            Phase::Pausing { until, .. } => Some(Timer::At(*until)),
            Phase::Idle | Phase::Done => None,
        }
    }

    fn needs_driver(&self) -> bool {
        !self.transmits.is_empty()
            || self.outcome.is_some()
            || matches!(self.phase, Phase::Pausing { .. })
    }

    fn poll_round(&mut self) -> Option<RoundRecord> {
        self.records.pop_front()
    }
}
