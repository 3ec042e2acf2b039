//! The manager's protocol as deterministic state machines: no threads, no
//! channels, no clock reads, no I/O (the shape of quinn-proto).
//!
//! A machine takes its inputs as events with the time passed in
//! (`handle_reply(now, ..)`, `handle_expired(now, ..)`,
//! `handle_timeout(now, ..)`) and gives its outputs when polled: requests to
//! send to every node ([`Transmit`], from `poll_transmit`), the next timer
//! ([`Timer`], from `poll_timeout`) and, once done, its result (`poll`).
//! Randomness (tokens, jitter) comes from an [`Entropy`] passed in.
//!
//! The blocking [`Redlock`](crate::Redlock) drives these machines from
//! caller threads and node workers with the real clock; the simulator in
//! `redlock-mock` drives the very same machines in virtual time. What is
//! here is therefore what both run.
//!
//! - [`Acquire`]: one lock acquisition: rounds, the fencing raise round,
//!   the release of a failed round (also on the nodes that have not
//!   answered), the retry pauses and the deadline.
//! - [`Single`]: one round of one message (extend, release, flush).
//! - [`Lease`]: what a holder knows of its lock: validity, loss, and how
//!   extend and release rounds change them.
//! - [`Keep`]: the keep-alive schedule and its bounds.
//! - [`Kept`]: the releases a node failed, kept and tried again until
//!   their keys expire.
//! - [`Lines`]: the local lines of callers of one manager waiting for the
//!   same resources, the hand-off and its bound on local passing.
//! - [`HandOff`]: a hand-off's ordered batch, the owner's release then the
//!   next owner's first acquire round.
//! - [`OwnRound`]: a lone caller's own round: whether it sends to the
//!   nodes itself and how it reads their answers.
//! - [`Slots`]: the keys of a semaphore's permits and the [`Acquire`] of
//!   one of them; [`Acquire::read`], a read of a read-write lock.
//! - [`LocalWriters`]: the writers of a read-write lock waiting on one
//!   manager, in arrival order, and whether a reader must wait for them.
//! - [`Watch`]: an election observer's decisions: when a new leader is
//!   reported, that terms never go back, when to read again.
//!
//! # Examples
//!
//! Driving an acquisition by hand, with every node granting at once:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//! use redlock_core::engine::{Acquire, Entropy, Machine, Settings};
//! use redlock_core::{EntropyError, NodeId, Resources, Ttl};
//! use redlock_core::backend::{AcquireOutcome, Response, Token};
//!
//! struct Fixed;
//! impl Entropy for Fixed {
//!     fn token(&mut self) -> Result<Token, EntropyError> { Ok(Token::from_bytes([7; 20])) }
//!     fn holder(&mut self) -> Result<u64, EntropyError> { Ok(1) }
//!     fn jitter(&mut self) -> u64 { 0 }
//! }
//!
//! let nodes: Arc<[NodeId]> = (0..3).map(|i| NodeId::new(format!("n{i}"))).collect();
//! let settings = Settings::new(nodes);
//! let ttl = Ttl::new(Duration::from_secs(10))?;
//! let mut acquire = Acquire::<std::io::Error>::new(settings, Resources::one("job")?, ttl, None, None);
//! let now = Instant::now();
//! acquire.start(now, &mut Fixed);
//! let sent = acquire.poll_transmit().expect("a round");
//! for node in 0..3 {
//!     let granted = Response::Acquire(AcquireOutcome::Granted { fence: None });
//!     acquire.handle_reply(now, sent.round(), node, Ok(granted));
//! }
//! let lock = acquire.poll().expect("decided")?;
//! assert!(lock.valid_until > now);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod acquire;
mod hand;
mod keep;
mod kept;
mod lease;
mod line;
mod own_round;
mod round;
mod single;
mod slots;
mod watch;
mod writers;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::events::{RoundKind, RoundRecord};
pub use acquire::{Acquire, Acquired};
pub use hand::HandOff;
pub use keep::{Keep, KeepStep};
pub use kept::{Idle, Kept, Retry, FIRST_RETRY, KEPT_RELEASES, LAST_RETRY};
pub use lease::Lease;
pub use line::{Handing, Joined, Lines, Look, Waiting};
pub use own_round::{NextRead, OwnRound, DECIDED_GRACE, WAIT_SLICE};
pub(crate) use round::Round;
pub use round::RoundId;
pub use single::{Decided, Single, Until};
#[cfg(test)]
pub(crate) use slots::permit_key;
pub use slots::{Slots, MAX_PERMITS};
pub use watch::{Leader, Observed, Watch, WatchStep, READ_TIMEOUTS};
pub use writers::LocalWriters;

use crate::decide::node_set::NodeSet;
use crate::{
    drift, Claim, EntropyError, Identity, NodeFailure, NodeId, Resources, Response, RetryDelay,
    Token, Ttl,
};

/// The settings every machine of one manager shares.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use redlock_core::NodeId;
/// use redlock_core::engine::Settings;
/// let settings = Settings::new(vec![NodeId::new("a"), NodeId::new("b"), NodeId::new("c")].into())
///     .node_timeout(Duration::from_millis(20))
///     .fencing(true);
/// assert_eq!(settings.nodes().len(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct Settings {
    pub(crate) nodes: Arc<[NodeId]>,
    pub(crate) node_timeout: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) retry: RetryDelay,
    pub(crate) fencing: bool,
    /// Whether machines keep a [`RoundRecord`] of each decided round.
    pub(crate) observe: bool,
    /// The manager's identity, stored with each lock it takes.
    pub(crate) identity: Option<Identity>,
}

impl Settings {
    /// The defaults of [`Builder`](crate::Builder) over `nodes`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{NodeId, engine::Settings};
    /// let settings = Settings::new(vec![NodeId::new("a")].into());
    /// ```
    #[must_use]
    pub fn new(nodes: Arc<[NodeId]>) -> Self {
        Settings {
            nodes,
            node_timeout: Duration::from_millis(50),
            drift_factor: 0.01,
            retry: RetryDelay::DEFAULT,
            fencing: false,
            observe: false,
            identity: None,
        }
    }

    /// The per-node timeout (the machines only report it; the driver
    /// measures it).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use redlock_core::{NodeId, engine::Settings};
    /// let s = Settings::new(vec![NodeId::new("a")].into()).node_timeout(Duration::from_millis(5));
    /// assert_eq!(s.timeout(), Duration::from_millis(5));
    /// ```
    #[must_use]
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// The clock-drift factor (validated by the [`Builder`](crate::Builder)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{NodeId, engine::Settings};
    /// let s = Settings::new(vec![NodeId::new("a")].into()).drift_factor(0.02);
    /// ```
    #[must_use]
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// The random pause between acquire rounds.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use redlock_core::{NodeId, RetryDelay, engine::Settings};
    /// let s = Settings::new(vec![NodeId::new("a")].into())
    ///     .retry(RetryDelay::new(Duration::ZERO, Duration::from_millis(5))?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn retry(mut self, retry: RetryDelay) -> Self {
        self.retry = retry;
        self
    }

    /// Whether locks get fencing tokens.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{NodeId, engine::Settings};
    /// let s = Settings::new(vec![NodeId::new("a")].into()).fencing(true);
    /// ```
    #[must_use]
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// The identity stored with each lock taken (see
    /// [`Claim::with_identity`](crate::backend::Claim::with_identity)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{Identity, NodeId, engine::Settings};
    /// let s = Settings::new(vec![NodeId::new("a")].into()).identity(Some(Identity::new("me")?));
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn identity(mut self, identity: Option<Identity>) -> Self {
        self.identity = identity;
        self
    }

    /// A new claim on `resources` signed by `token`, with this manager's
    /// identity when it has one.
    pub(crate) fn claim(&self, resources: Resources, token: Token) -> Claim {
        let claim = Claim::new(resources, token);
        match &self.identity {
            Some(identity) => claim.with_identity(identity),
            None => claim,
        }
    }

    /// With `on`, machines keep a [`RoundRecord`] of each round they decide,
    /// for [`Machine::poll_round`] (the blocking manager turns them into
    /// events when a hook is set). Off by default: nothing is kept.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{NodeId, engine::Settings};
    /// let s = Settings::new(vec![NodeId::new("a")].into()).observe(true);
    /// ```
    #[must_use]
    pub fn observe(mut self, on: bool) -> Self {
        self.observe = on;
        self
    }

    /// The nodes, in configuration order (node `i` of a reply is `nodes()[i]`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{NodeId, engine::Settings};
    /// let s = Settings::new(vec![NodeId::new("a")].into());
    /// assert_eq!(s.nodes()[0].as_str(), "a");
    /// ```
    #[must_use]
    pub fn nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// The per-node timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{NodeId, engine::Settings};
    /// let s = Settings::new(vec![NodeId::new("a")].into());
    /// assert_eq!(s.timeout().as_millis(), 50);
    /// ```
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.node_timeout
    }

    /// A manager going away at `now` (its last handle dropped, the
    /// process about to exit) keeps its node workers running what is
    /// queued (the releases of dropped guards above all, and retries of
    /// failed ones) until this instant: twice the node timeout from now,
    /// one for a call under way and one for the rest. Whatever has not
    /// left by then is lost, and its keys stay until their TTL.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # use redlock_core::{NodeId, engine::Settings};
    /// let s = Settings::new(vec![NodeId::new("a")].into()).node_timeout(Duration::from_millis(5));
    /// let now = Instant::now();
    /// assert_eq!(s.exit_deadline(now), now + Duration::from_millis(10));
    /// ```
    #[must_use]
    pub fn exit_deadline(&self, now: Instant) -> Instant {
        crate::decide::deadline::later(now, self.node_timeout.saturating_mul(2))
    }

    pub(crate) fn drift(&self, ttl: Ttl) -> Duration {
        drift(ttl.as_duration(), self.drift_factor)
    }
}

/// A request a machine sends to every node.
///
/// # Examples
///
/// ```
/// use redlock_core::engine::Message;
/// assert!(Message::RaiseFence(3) != Message::Flush);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// Acquire the claim's keys for `ttl`, with fencing counters if `fence`.
    Acquire {
        /// The time-to-live.
        ttl: Ttl,
        /// Whether to bump and return fencing counters.
        fence: bool,
    },
    /// Reset the keys' TTL where the claim's token still stands.
    Extend(Ttl),
    /// Delete the keys where the claim's token still stands. Carries the
    /// longest TTL ever sent for the claim: a release that fails is sent
    /// again until a node answers it or that long after the failure.
    Release(Ttl),
    /// Raise the fencing counters to at least this, where the token stands.
    RaiseFence(u64),
    /// A barrier: answered once everything sent before it to the node ran
    /// (and no failed release is kept for it).
    Flush,
}

impl Message {
    /// Whether this request, still queued for a node at `now` past
    /// `stale_after` (its round's deadline), is dropped unexecuted: nobody
    /// waits for an acquire, an extend or a fence raise any more, while a
    /// release or a flush always runs.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// use redlock_core::Ttl;
    /// use redlock_core::engine::Message;
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let (deadline, later) = (Instant::now(), Instant::now() + Duration::from_millis(1));
    /// assert!(Message::Acquire { ttl, fence: false }.stale(later, deadline));
    /// assert!(!Message::Acquire { ttl, fence: false }.stale(deadline, deadline));
    /// assert!(!Message::Release(ttl).stale(later, deadline));
    /// assert!(!Message::Flush.stale(later, deadline));
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn stale(self, now: Instant, stale_after: Instant) -> bool {
        let skippable = matches!(
            self,
            Message::Acquire { .. } | Message::Extend(_) | Message::RaiseFence(_)
        );
        skippable && now > stale_after
    }

    /// The backend request for this message on `claim` (`None` for a flush).
    #[must_use]
    pub(crate) fn request(self, claim: &Claim) -> Option<crate::Request<'_>> {
        use crate::Request;
        Some(match self {
            Message::Acquire { ttl, fence } => Request::Acquire { claim, ttl, fence },
            Message::Extend(ttl) => Request::Extend { claim, ttl },
            Message::Release(_) => Request::Release { claim },
            Message::RaiseFence(at_least) => Request::RaiseFence { claim, at_least },
            Message::Flush => return None,
        })
    }
}

/// What a machine asks its driver to send: one message, to every node
/// ([`Transmit::sends_to`] says which).
///
/// # Examples
///
/// See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Transmit {
    pub(crate) round: RoundId,
    pub(crate) message: Message,
    pub(crate) claim: Arc<Claim>,
    /// `None`: every node's reply is wanted.
    pub(crate) wanted: Option<NodeSet>,
    /// `None`: it goes to every node (every request of this protocol but
    /// a failed round's release, which skips the nodes that refused).
    pub(crate) to: Option<NodeSet>,
}

impl Transmit {
    /// The round the replies belong to.
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    #[must_use]
    pub fn round(&self) -> RoundId {
        self.round
    }

    /// The message.
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    #[must_use]
    pub fn message(&self) -> Message {
        self.message
    }

    /// The lock it is about.
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    #[must_use]
    pub fn claim(&self) -> &Arc<Claim> {
        &self.claim
    }

    /// Whether this goes to `node`. Drivers must send it to every node for
    /// which this is true, whatever they do with the replies.
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    #[must_use]
    pub fn sends_to(&self, node: usize) -> bool {
        self.to.as_ref().is_none_or(|to| to.contains(node))
    }

    /// Whether the machine wants `node`'s reply (it ignores the others, so
    /// a driver need not route them).
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    #[must_use]
    pub fn wants_reply(&self, node: usize) -> bool {
        self.wanted
            .as_ref()
            .is_none_or(|wanted| wanted.contains(node))
    }
}

/// The next thing a machine waits for, besides replies.
///
/// # Examples
///
/// ```
/// use redlock_core::engine::{RoundId, Timer};
/// assert_ne!(Timer::Round(RoundId::FIRST), Timer::Round(RoundId::FIRST.next()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The per-node timeout of this round, counted by the driver from when
    /// it sent the round: then call `handle_expired`.
    Round(RoundId),
    /// This instant of the manager's clock: then call `handle_timeout`.
    At(std::time::Instant),
}

/// What every machine of the engine takes and gives, so that one driver
/// loop serves them all (the blocking manager's, the simulator's). Each
/// machine's result comes from its own `poll`.
///
/// # Examples
///
/// See the [module docs](self).
pub trait Machine<E> {
    /// A reply from `node` to round `round`; replies of other rounds are
    /// ignored.
    fn handle_reply(
        &mut self,
        now: Instant,
        round: RoundId,
        node: usize,
        result: Result<Response, NodeFailure<E>>,
    );

    /// Round `round`'s per-node timeout passed (see [`Timer::Round`]): the
    /// nodes still silent count as failed.
    fn handle_expired(&mut self, now: Instant, round: RoundId);

    /// The clock reached a [`Timer::At`] (the end of a pause). Machines
    /// without pauses ignore it.
    fn handle_timeout(&mut self, now: Instant, entropy: &mut dyn Entropy) {
        let _ = (now, entropy);
    }

    /// The next request to send.
    fn poll_transmit(&mut self) -> Option<Transmit>;

    /// What the machine waits for next, besides replies.
    fn poll_timeout(&self) -> Option<Timer>;

    /// Whether the driver has something to do: a request to send, a result
    /// to take, or a pause to start.
    fn needs_driver(&self) -> bool;

    /// The next decided round's record, in order (with
    /// [`Settings::observe`]; never otherwise).
    fn poll_round(&mut self) -> Option<RoundRecord> {
        None
    }
}

/// The round kind a message's round is (none for a flush barrier).
pub(crate) fn round_kind(message: Message) -> Option<RoundKind> {
    match message {
        Message::Acquire { .. } => Some(RoundKind::Acquire),
        Message::RaiseFence(_) => Some(RoundKind::RaiseFence),
        Message::Extend(_) => Some(RoundKind::Extend),
        Message::Release(_) => Some(RoundKind::Release),
        Message::Flush => None,
    }
}

/// Where a machine's randomness comes from: the OS for the blocking manager,
/// a seeded generator in simulations.
///
/// # Examples
///
/// See the [module docs](self).
pub trait Entropy {
    /// A fresh lock token.
    ///
    /// # Errors
    ///
    /// When no randomness can be had.
    fn token(&mut self) -> Result<Token, EntropyError>;

    /// A fresh fencing-token holder id.
    ///
    /// # Errors
    ///
    /// When no randomness can be had.
    fn holder(&mut self) -> Result<u64, EntropyError>;

    /// A random number for the retry jitter.
    fn jitter(&mut self) -> u64;
}
