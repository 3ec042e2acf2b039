//! The fan-out of one round: one request to every node's worker at once,
//! replies collected until the sans-IO [`Tally`] decides.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::config::Config;
use crate::keeper::Keeper;
use crate::worker::{Job, Op, Worker};
use crate::{
    fence_step, judge, AcquireOutcome, Claim, ConfigError, FenceStep, FencingToken, LockError,
    NodeError, NodeFailure, Response, RoundReport, Tally, Token, Ttl, Verdict, Vote,
};

/// What the manager and its guards share: the workers and the settings.
pub(crate) struct Shared<E> {
    pub(crate) workers: Vec<Worker<E>>,
    /// The (never executed) claim carried by flush barriers.
    pub(crate) flush_claim: Arc<Claim>,
    pub(crate) config: Config,
    pub(crate) rng: Mutex<fastrand::Rng>,
    pub(crate) keeper: Keeper<E>,
}

/// The state of one round, as far as it got.
pub(crate) struct Round<E> {
    pub(crate) tally: Tally,
    pub(crate) started: Instant,
    /// Clock reading when the round was decided (or gave up waiting).
    pub(crate) decided_at: Instant,
    pub(crate) failures: Vec<(usize, NodeFailure<E>)>,
    /// Fencing counters returned by the granting nodes.
    pub(crate) fences: Vec<u64>,
}

impl<E> Shared<E> {
    pub(crate) fn node_error(&self, (node, failure): (usize, NodeFailure<E>)) -> NodeError<E> {
        NodeError::new(self.workers[node].id.clone(), failure)
    }

    /// Sends `op` to every node at once and collects replies until the tally
    /// decides or the per-node timeout passes; nodes silent by then are
    /// counted as timed out.
    pub(crate) fn run(&self, op: Op, claim: &Arc<Claim>) -> Round<E> {
        let n = self.workers.len();
        let clock = &self.config.clock;
        let started = clock.now();
        let wait_until = Instant::now() + self.config.node_timeout;
        let mut round = Round {
            tally: Tally::new(n),
            started,
            decided_at: started,
            failures: Vec::new(),
            fences: Vec::new(),
        };
        let (reply, replies) = crossbeam_channel::bounded(n);
        for (node, worker) in self.workers.iter().enumerate() {
            let job = Job {
                op,
                claim: Arc::clone(claim),
                node,
                stale_after: wait_until,
                reply: Some(reply.clone()),
            };
            if let Err(failure) = worker.submit(job) {
                round.record(node, Err(failure));
            }
        }
        drop(reply);
        while round.tally.decision() == crate::Decision::Pending {
            match replies.recv_deadline(wait_until) {
                Ok((node, result)) => round.record(node, result),
                Err(_) => {
                    for node in 0..n {
                        round.record(node, Err(NodeFailure::TimedOut));
                    }
                }
            }
        }
        round.decided_at = clock.now();
        round
    }

    /// Sends `op` to every node without waiting for any answer.
    pub(crate) fn send_detached(&self, op: Op, claim: &Arc<Claim>) {
        let stale_after = Instant::now() + self.config.node_timeout;
        for (node, worker) in self.workers.iter().enumerate() {
            let job = Job {
                op,
                claim: Arc::clone(claim),
                node,
                stale_after,
                reply: None,
            };
            // A full queue means the node is stuck; the key then expires by TTL.
            let _ = worker.submit(job);
        }
    }

    /// Releases a failed acquire round on every node, and waits (bounded by
    /// one per-node timeout) for the nodes that granted or had not answered
    /// when the round was decided, so that a failed round leaves no key on a
    /// responsive node. A node that stays silent gets its release queued
    /// behind the acquire, so a grant that arrives late is undone too.
    pub(crate) fn abandon(&self, claim: &Arc<Claim>, round: &Round<E>) {
        let wait_until = Instant::now() + self.config.node_timeout;
        let (reply, replies) = crossbeam_channel::bounded(self.workers.len());
        let mut waiting = 0usize;
        for (node, worker) in self.workers.iter().enumerate() {
            let may_hold = matches!(round.tally.vote(node), None | Some(Vote::Granted));
            let job = Job {
                op: Op::Release,
                claim: Arc::clone(claim),
                node,
                stale_after: wait_until,
                reply: may_hold.then(|| reply.clone()),
            };
            if worker.submit(job).is_ok() && may_hold {
                waiting += 1;
            }
        }
        drop(reply);
        for _ in 0..waiting {
            if replies.recv_deadline(wait_until).is_err() {
                break;
            }
        }
    }

    /// Turns a won, fenced acquire round into a fencing token: the counter
    /// itself on one node; otherwise raises the counters to `max + 1` on a
    /// quorum, within the validity measured from the acquire's start.
    /// Returns the token and, after a raise, the lock's new validity deadline.
    pub(crate) fn fence(
        &self,
        claim: &Arc<Claim>,
        acquired: &Round<E>,
        ttl: Ttl,
    ) -> Result<(FencingToken, Option<Instant>), LockError<E>> {
        let holder = Token::random_u64()?;
        match fence_step(&acquired.fences, self.workers.len()) {
            Some(FenceStep::Done(value)) => Ok((FencingToken::new(value, holder), None)),
            Some(FenceStep::Raise(value)) => {
                let mut raise = self.run(Op::RaiseFence(value), claim);
                raise.started = acquired.started;
                match self.judge(&raise, ttl) {
                    Verdict::Held { validity } => Ok((
                        FencingToken::new(value, holder),
                        Some(raise.decided_at + validity),
                    )),
                    verdict => Err(self.failure(verdict, raise, ttl, LockError::Contended)),
                }
            }
            // The backend granted without counters although asked for them.
            None => Err(LockError::Config(ConfigError::FencingUnsupported)),
        }
    }

    pub(crate) fn judge(&self, round: &Round<E>, ttl: Ttl) -> Verdict {
        let elapsed = round.decided_at.saturating_duration_since(round.started);
        judge(
            &round.tally,
            ttl.as_duration(),
            elapsed,
            self.config.drift(ttl),
        )
        .unwrap_or(Verdict::NoQuorum)
    }

    /// The typed error for a failed round. `refused` builds the error for a
    /// round lost to refusals (contention on acquire, not-held otherwise).
    pub(crate) fn failure(
        &self,
        verdict: Verdict,
        round: Round<E>,
        ttl: Ttl,
        refused: fn(RoundReport<E>) -> LockError<E>,
    ) -> LockError<E> {
        let elapsed = round.decided_at.saturating_duration_since(round.started);
        let report = RoundReport {
            nodes: round.tally.nodes(),
            quorum: round.tally.quorum(),
            granted: round.tally.granted(),
            refused: round.tally.refused(),
            failures: {
                let mut failures = round.failures;
                failures.sort_by_key(|(node, _)| *node);
                failures.into_iter().map(|f| self.node_error(f)).collect()
            },
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

impl<E> Round<E> {
    pub(crate) fn record(&mut self, node: usize, result: Result<Response, NodeFailure<E>>) {
        if self.tally.has_voted(node) {
            return;
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
        self.tally.record(node, vote);
    }
}
