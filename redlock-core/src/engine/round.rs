//! One round: a request to every node, the replies as they come, and what
//! they decide.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::decide::node_set::NodeSet;
use crate::{
    judge, AcquireOutcome, Decision, LockError, NodeError, NodeFailure, NodeId, Response,
    RoundReport, Tally, Ttl, Verdict, Vote,
};

/// Names one round of one machine, so that late replies of an earlier
/// round are told apart from the current one's.
///
/// # Examples
///
/// ```
/// use redlock_core::engine::RoundId;
/// assert_ne!(RoundId::FIRST, RoundId::FIRST.next());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoundId(u64);

impl RoundId {
    /// The first id a machine uses.
    pub const FIRST: RoundId = RoundId(1);

    /// The id after this one.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::engine::RoundId;
    /// assert!(RoundId::FIRST.next() > RoundId::FIRST);
    /// ```
    #[must_use]
    pub fn next(self) -> RoundId {
        RoundId(self.0.wrapping_add(1))
    }
}

/// The replies of one round as far as they came.
#[derive(Debug)]
pub(crate) struct Round<E> {
    pub(crate) id: RoundId,
    pub(crate) tally: Tally,
    /// The manager's clock when the round started (read before sending).
    pub(crate) started: Instant,
    pub(crate) failures: Vec<(usize, NodeFailure<E>)>,
    /// Fencing counters returned by the granting nodes.
    pub(crate) fences: Vec<u64>,
    /// Each answer's node and time since `started`, when the round's
    /// record is wanted (`Settings::observe`); `None` otherwise, so that
    /// an unobserved round allocates nothing for it.
    pub(crate) answers: Option<Vec<(usize, Duration)>>,
}

impl<E> Round<E> {
    /// A round of `nodes` started at `started`; `timed`: keep each
    /// answer's time for the round's record.
    pub(crate) fn new(id: RoundId, nodes: usize, started: Instant, timed: bool) -> Self {
        Round {
            id,
            tally: Tally::new(nodes),
            started,
            failures: Vec::new(),
            fences: Vec::new(),
            answers: timed.then(Vec::new),
        }
    }

    /// Records `node`'s reply (the first one counts), handled at `at` (none
    /// for an answer the machine knew without asking), and returns the
    /// decision so far.
    pub(crate) fn record(
        &mut self,
        node: usize,
        result: Result<Response, NodeFailure<E>>,
        at: Option<Instant>,
    ) -> Decision {
        if node >= self.tally.nodes() || self.tally.has_voted(node) {
            return self.tally.decision();
        }
        if let (Some(answers), Some(at), Ok(_)) = (self.answers.as_mut(), at, &result) {
            answers.push((node, at.saturating_duration_since(self.started)));
        }
        let vote = match result {
            Ok(Response::Acquire(AcquireOutcome::Granted { fence })) => {
                self.fences.extend(fence);
                Vote::Granted
            }
            Ok(Response::Held(true)) => Vote::Granted,
            Ok(_) => Vote::Refused,
            Err(failure) => {
                self.failures.push((node, failure));
                Vote::Failed
            }
        };
        self.tally.record(node, vote)
    }

    /// The per-node timeout passed: the nodes still silent failed.
    pub(crate) fn expire(&mut self) {
        for node in 0..self.tally.nodes() {
            if !self.tally.has_voted(node) {
                self.record(node, Err(NodeFailure::TimedOut), None);
            }
        }
    }

    /// Whether the replies so far decide the round.
    pub(crate) fn is_decided(&self) -> bool {
        self.tally.decision() != Decision::Pending
    }

    /// What the round means for a lock of `ttl` with `drift`, decided at
    /// `now` (undecided counts as no quorum).
    pub(crate) fn verdict(&self, now: Instant, ttl: Ttl, drift: Duration) -> Verdict {
        let elapsed = now.saturating_duration_since(self.started);
        judge(&self.tally, ttl.as_duration(), elapsed, drift).unwrap_or(Verdict::NoQuorum)
    }

    /// The record of this round, decided at `now` (see
    /// [`Machine::poll_round`](super::Machine::poll_round)).
    pub(crate) fn record_as(
        &self,
        kind: super::RoundKind,
        resources: &crate::Resources,
        now: Instant,
        nodes: &[NodeId],
    ) -> super::RoundRecord {
        let mut failed: Vec<(NodeId, crate::FailureKind)> = self
            .failures
            .iter()
            .map(|(node, failure)| {
                let id = nodes
                    .get(*node)
                    .cloned()
                    .unwrap_or_else(|| NodeId::new(format!("node {node}")));
                (id, crate::FailureKind::of(failure))
            })
            .collect();
        failed.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        let id = |node: usize| {
            nodes
                .get(node)
                .cloned()
                .unwrap_or_else(|| NodeId::new(format!("node {node}")))
        };
        let answers = self
            .answers
            .iter()
            .flatten()
            .map(|&(node, after)| (id(node), after))
            .collect();
        super::RoundRecord {
            kind,
            resources: resources.clone(),
            decision: self.tally.decision(),
            elapsed: now.saturating_duration_since(self.started),
            summary: crate::RoundSummary {
                nodes: self.tally.nodes(),
                quorum: self.tally.quorum(),
                granted: self.tally.granted(),
                refused: self.tally.refused(),
                failed,
            },
            answers,
        }
    }

    /// The nodes that refused so far (`None`: none did, the common case,
    /// with nothing allocated). They answered and set nothing: a won
    /// lock's extends and release skip them, as a failed round's release
    /// does ([`Round::release_to`]). A node that failed or has not
    /// answered may still run the acquire, and its release runs behind it.
    pub(crate) fn refused_nodes(&self) -> Option<Arc<[bool]>> {
        (self.tally.refused() > 0).then(|| {
            (0..self.tally.nodes())
                .map(|node| self.tally.vote(node) == Some(Vote::Refused))
                .collect()
        })
    }

    /// The nodes where a failed acquire may have left its key: those that
    /// granted, and those that had not answered.
    pub(crate) fn may_hold(&self) -> NodeSet {
        self.nodes_where(|vote| matches!(vote, None | Some(Vote::Granted)))
    }

    /// The nodes a failed round's release goes to: all but those that
    /// refused (`None`: none did, it goes to every node).
    pub(crate) fn release_to(&self) -> Option<NodeSet> {
        (self.tally.refused() > 0).then(|| self.nodes_where(|vote| vote != Some(Vote::Refused)))
    }

    /// The nodes whose vote so far passes `test`.
    fn nodes_where(&self, test: impl Fn(Option<Vote>) -> bool) -> NodeSet {
        let mut set = NodeSet::new();
        for node in (0..self.tally.nodes()).filter(|&node| test(self.tally.vote(node))) {
            set.insert(node);
        }
        set
    }

    /// The typed error for a failed round decided at `now`. `refused` builds
    /// the error for a round lost to refusals (contention on acquire, not
    /// held otherwise).
    pub(crate) fn into_error(
        self,
        verdict: Verdict,
        now: Instant,
        ttl: Ttl,
        nodes: &[NodeId],
        refused: fn(RoundReport<E>) -> LockError<E>,
    ) -> LockError<E> {
        let elapsed = now.saturating_duration_since(self.started);
        let mut failures = self.failures;
        failures.sort_by_key(|(node, _)| *node);
        let report = RoundReport {
            nodes: self.tally.nodes(),
            quorum: self.tally.quorum(),
            granted: self.tally.granted(),
            refused: self.tally.refused(),
            failures: failures
                .into_iter()
                .map(|(node, failure)| {
                    let id = nodes
                        .get(node)
                        .cloned()
                        .unwrap_or_else(|| NodeId::new(format!("node {node}")));
                    NodeError::new(id, failure)
                })
                .collect(),
        };
        match verdict {
            Verdict::NoQuorum => LockError::NoQuorum(report),
            Verdict::ValidityExhausted => LockError::ValidityExhausted {
                elapsed,
                ttl: ttl.as_duration(),
            },
            Verdict::Refused | Verdict::Held { .. } => refused(report),
        }
    }
}
