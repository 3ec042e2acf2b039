//! One round of one message to every node, decided by the tally: the shape
//! of an extend, a release, and (answered by every node) a flush.

use std::sync::Arc;
use std::time::Instant;

use crate::decide::node_set::NodeSet;
use crate::engine::{Machine, Message, Round, RoundId, RoundRecord, Settings, Timer, Transmit};
use crate::{Claim, NodeFailure, Response};

/// When a [`Single`] round is over.
///
/// # Examples
///
/// ```
/// use redlock_core::engine::Until;
/// assert_ne!(Until::Decided, Until::AllAnswered);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// A quorum agreed, or can no longer agree.
    Decided,
    /// Every node answered (or the per-node timeout passed).
    AllAnswered,
}

/// A round over: its replies and when it was decided.
///
/// # Examples
///
/// See [`Single`].
#[derive(Debug)]
pub struct Decided<E> {
    pub(crate) round: Round<E>,
    /// When the round was decided (or timed out), on the manager's clock.
    pub decided_at: Instant,
}

impl<E> Decided<E> {
    /// How many nodes said yes.
    ///
    /// # Examples
    ///
    /// See [`Single`].
    #[must_use]
    pub fn granted(&self) -> usize {
        self.round.tally.granted()
    }

    /// How many nodes failed or timed out.
    ///
    /// # Examples
    ///
    /// See [`Single`].
    #[must_use]
    pub fn failed(&self) -> usize {
        self.round.tally.failed()
    }
}

/// One message to every node and its replies until [`Until`].
///
/// # Examples
///
/// ```
/// use std::{sync::Arc, time::{Duration, Instant}};
/// use redlock_core::{NodeId, Resources, Ttl};
/// use redlock_core::backend::{Claim, Response, Token};
/// use redlock_core::engine::{Machine, Message, Settings, Single, Until};
/// let settings = Settings::new(vec![NodeId::new("a"), NodeId::new("b"), NodeId::new("c")].into());
/// let claim = Arc::new(Claim::new(Resources::one("k")?, Token::from_bytes([1; 20])));
/// let ttl = Ttl::new(Duration::from_secs(1))?;
/// let now = Instant::now();
/// let mut release = Single::<std::io::Error>::new(&settings, Message::Release(ttl), claim, Until::Decided);
/// release.start(now);
/// let sent = release.poll_transmit().expect("sent");
/// release.handle_reply(now, sent.round(), 0, Ok(Response::Held(true)));
/// release.handle_reply(now, sent.round(), 1, Ok(Response::Held(true)));
/// assert_eq!(release.poll().expect("a quorum").granted(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Single<E> {
    message: Message,
    claim: Arc<Claim>,
    until: Until,
    round: Option<Round<E>>,
    nodes: usize,
    answered: usize,
    transmit: Option<Transmit>,
    outcome: Option<Decided<E>>,
    /// The nodes, with `Settings::observe` only.
    observe: Option<Arc<[crate::NodeId]>>,
    record: Option<RoundRecord>,
    /// Nodes not sent to, counted as refused from the start.
    skip: Option<Arc<[bool]>>,
}

impl<E> Single<E> {
    /// A round of `message` about `claim`, over when `until`.
    ///
    /// # Examples
    ///
    /// See [`Single`].
    #[must_use]
    pub fn new(settings: &Settings, message: Message, claim: Arc<Claim>, until: Until) -> Self {
        Single {
            message,
            claim,
            until,
            round: None,
            nodes: settings.nodes.len(),
            answered: 0,
            transmit: None,
            outcome: None,
            observe: settings.observe.then(|| Arc::clone(&settings.nodes)),
            record: None,
            skip: None,
        }
    }

    /// Leaves out the nodes flagged in `skip` (`None`: none): the message
    /// is not sent there, and each counts as refused (they never held the
    /// lock: [`Lease::skips`](crate::engine::Lease::skips)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::{sync::Arc, time::{Duration, Instant}};
    /// # use redlock_core::{NodeId, Resources, Ttl, engine::{Machine, Message, Settings, Single, Until}};
    /// # use redlock_core::backend::{Claim, Token};
    /// let settings = Settings::new(vec![NodeId::new("a"), NodeId::new("b"), NodeId::new("c")].into());
    /// let claim = Arc::new(Claim::new(Resources::one("k")?, Token::from_bytes([1; 20])));
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let mut release = Single::<std::io::Error>::new(&settings, Message::Release(ttl), claim, Until::Decided)
    ///     .skipping(Some(Arc::from([false, true, false])));
    /// release.start(Instant::now());
    /// let sent = release.poll_transmit().unwrap();
    /// assert!(sent.sends_to(0) && !sent.sends_to(1) && sent.sends_to(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn skipping(mut self, skip: Option<Arc<[bool]>>) -> Self {
        self.skip = skip.filter(|s| s.len() == self.nodes);
        self
    }

    /// Sends the message; `now` is the round's start.
    ///
    /// # Examples
    ///
    /// See [`Single`].
    pub fn start(&mut self, now: Instant) {
        let id = RoundId::FIRST;
        self.transmit = Some(Transmit {
            round: id,
            message: self.message,
            claim: Arc::clone(&self.claim),
            wanted: None,
            to: self.skip.as_ref().map(|skip| {
                let mut to = NodeSet::all(self.nodes);
                for (node, _) in skip.iter().enumerate().filter(|(_, s)| **s) {
                    to.remove(node);
                }
                to
            }),
        });
        let mut round = Round::new(id, self.nodes, now, self.observe.is_some());
        self.answered = 0;
        for (node, _) in self
            .skip
            .iter()
            .flat_map(|s| s.iter().enumerate())
            .filter(|(_, s)| **s)
        {
            round.record(node, Ok(Response::Held(false)), None);
            self.answered += 1;
        }
        let over = match self.until {
            Until::Decided => round.is_decided(),
            Until::AllAnswered => self.answered == self.nodes,
        };
        self.round = Some(round);
        if over {
            self.finish(now);
        }
    }

    /// The decided round, once.
    ///
    /// # Examples
    ///
    /// See [`Single`].
    pub fn poll(&mut self) -> Option<Decided<E>> {
        self.outcome.take()
    }

    fn finish(&mut self, now: Instant) {
        if let (Some(nodes), Some(round), Some(kind)) = (
            self.observe.as_ref(),
            self.round.as_ref(),
            super::round_kind(self.message),
        ) {
            self.record = Some(round.record_as(kind, self.claim.resources(), now, nodes));
        }
        if let Some(round) = self.round.take() {
            self.outcome = Some(Decided {
                round,
                decided_at: now,
            });
        }
    }
}

impl<E> Machine<E> for Single<E> {
    fn handle_reply(
        &mut self,
        now: Instant,
        round: RoundId,
        node: usize,
        result: Result<Response, NodeFailure<E>>,
    ) {
        let Some(r) = self.round.as_mut().filter(|r| r.id == round) else {
            return;
        };
        if node >= self.nodes || r.tally.has_voted(node) {
            return;
        }
        r.record(node, result, Some(now));
        self.answered += 1;
        let over = match self.until {
            Until::Decided => r.is_decided(),
            Until::AllAnswered => self.answered == self.nodes,
        };
        if over {
            self.finish(now);
        }
    }

    fn handle_expired(&mut self, now: Instant, round: RoundId) {
        if let Some(r) = self.round.as_mut().filter(|r| r.id == round) {
            r.expire();
            self.finish(now);
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmit.take()
    }

    fn poll_timeout(&self) -> Option<Timer> {
        self.round.as_ref().map(|r| Timer::Round(r.id))
    }

    fn needs_driver(&self) -> bool {
        self.transmit.is_some() || self.outcome.is_some()
    }

    fn poll_round(&mut self) -> Option<RoundRecord> {
        self.record.take()
    }
}
