//! The fan-out of one round: one request to every node's worker at once,
//! replies collected until the sans-IO [`Tally`] decides.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::Instant;

use parking_lot::Mutex;

use crate::collect::{Pending, Until};
use crate::config::{later, Config};
use crate::keeper::Keeper;
use crate::line::Lines;
use crate::worker::{Job, Op, Worker};
use crate::{
    fence_step, judge, AcquireOutcome, Claim, ConfigError, FenceStep, FencingToken, LockError,
    NodeError, NodeFailure, Queued, Response, RoundReport, Tally, Token, Ttl, Verdict, Vote,
};

/// What the manager and its guards share: the workers and the settings.
pub(crate) struct Shared<E> {
    /// A random id for this manager's waiting marks.
    pub(crate) id: u64,
    /// How long this manager's waiting marks live: twice its longest pause
    /// between rounds plus a round, so that they last from one refused
    /// round to the next.
    pub(crate) mark_ttl: Ttl,
    pub(crate) workers: Vec<Worker<E>>,
    /// The (never executed) claim carried by flush barriers.
    pub(crate) flush_claim: Arc<Claim>,
    pub(crate) config: Config,
    pub(crate) rng: Mutex<fastrand::Rng>,
    pub(crate) keeper: Keeper<E>,
    pub(crate) lines: Lines<E>,
    /// Callers waiting for a round right now.
    pub(crate) waiting: AtomicUsize,
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
    /// How an acquire of a caller in this manager's line waits; `yields`
    /// gives way to other managers' waiting marks.
    pub(crate) fn queued(&self, yields: bool) -> Queued {
        Queued::new(self.id, self.mark_ttl, yields)
    }

    pub(crate) fn node_error(&self, (node, failure): (usize, NodeFailure<E>)) -> NodeError<E> {
        NodeError::new(self.workers[node].id.clone(), failure)
    }

    /// Sends `op` to every node at once and collects replies until the tally
    /// decides or the per-node timeout passes; nodes silent by then are
    /// counted as timed out.
    pub(crate) fn run(&self, op: Op, claim: &Arc<Claim>) -> Round<E> {
        let launched = self.launch(op, claim, Until::Decided, thread::current(), None);
        self.finish(&launched)
    }

    /// Starts a round of `op` on every node, to be waited for by `waiter`.
    /// With `before`, each node gets that request first, in the same batch:
    /// a release that the round's acquire follows right behind.
    pub(crate) fn launch(
        &self,
        op: Op,
        claim: &Arc<Claim>,
        until: Until,
        waiter: Thread,
        before: Option<Ahead<'_, E>>,
    ) -> Launched<E> {
        let n = self.workers.len();
        let wait_until = later(Instant::now(), self.config.node_timeout);
        let round = Round::new(n, self.config.clock.now());
        let pending = Arc::new(Pending::new(round, until, waiter));
        let job = |node, op, claim: &Arc<Claim>, reply: Option<&Arc<Pending<E>>>| Job {
            op,
            claim: Arc::clone(claim),
            node,
            stale_after: wait_until,
            reply: reply.cloned(),
            retry: None,
        };
        for (node, worker) in self.workers.iter().enumerate() {
            let ours = job(node, op, claim, Some(&pending));
            let queued = match before {
                None => worker.submit(ours),
                Some(Ahead {
                    op: first,
                    claim: first_claim,
                    reply: first_reply,
                }) => {
                    let first = job(node, first, first_claim, first_reply);
                    worker.submit_all([first, ours]).inspect_err(|_| {
                        if let Some(reply) = first_reply {
                            reply.deliver(node, Err(NodeFailure::Overloaded));
                        }
                    })
                }
            };
            if let Err(failure) = queued {
                pending.deliver(node, Err(failure));
            }
        }
        Launched {
            pending,
            wait_until,
        }
    }

    /// Waits for a launched round (on the thread it was launched for).
    pub(crate) fn finish(&self, launched: &Launched<E>) -> Round<E> {
        let clock = &self.config.clock;
        let alone = self.waiting.fetch_add(1, Ordering::Relaxed) == 0;
        let round = launched.pending.wait(launched.wait_until, alone);
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        let mut round = round.unwrap_or_else(|| Round::new(self.workers.len(), clock.now()));
        round.decided_at = clock.now();
        round
    }

    /// Sends `op` to every node without waiting for any answer.
    pub(crate) fn send_detached(&self, op: Op, claim: &Arc<Claim>) {
        let stale_after = later(Instant::now(), self.config.node_timeout);
        for (node, worker) in self.workers.iter().enumerate() {
            let job = Job {
                op,
                claim: Arc::clone(claim),
                node,
                stale_after,
                reply: None,
                retry: None,
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
    pub(crate) fn abandon(&self, claim: &Arc<Claim>, round: &Round<E>, ttl: Ttl) {
        let n = self.workers.len();
        let wait_until = later(Instant::now(), self.config.node_timeout);
        let may_hold: Vec<bool> = (0..n)
            .map(|node| matches!(round.tally.vote(node), None | Some(Vote::Granted)))
            .collect();
        let waiting = may_hold.iter().filter(|&&m| m).count();
        let pending = Arc::new(Pending::new(
            Round::new(n, round.started),
            Until::Answers(waiting),
            thread::current(),
        ));
        for (node, worker) in self.workers.iter().enumerate() {
            let job = Job {
                op: Op::Release(ttl),
                claim: Arc::clone(claim),
                node,
                stale_after: wait_until,
                reply: may_hold[node].then(|| Arc::clone(&pending)),
                retry: None,
            };
            if let Err(failure) = worker.submit(job) {
                if may_hold[node] {
                    pending.deliver(node, Err(failure));
                }
            }
        }
        let _ = pending.wait(wait_until, false);
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
                        Some(later(raise.decided_at, validity)),
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

impl<E> Drop for Shared<E> {
    /// The last handle of the manager is gone (guards hold one too): the
    /// workers run what is queued (the releases of dropped guards above
    /// all), try failed releases again, and stop. Waits for them at most
    /// twice the node timeout: one for a call under way, one for the rest.
    fn drop(&mut self) {
        let by = later(Instant::now(), self.config.node_timeout.saturating_mul(2));
        for worker in &self.workers {
            worker.close(by);
        }
        for worker in &self.workers {
            worker.wait_exit(by);
        }
    }
}

/// A request queued on every node right ahead of a round's own, in the same
/// batch (and so, for Redis, the same write).
#[derive(Clone, Copy)]
pub(crate) struct Ahead<'a, E> {
    pub(crate) op: Op,
    pub(crate) claim: &'a Arc<Claim>,
    pub(crate) reply: Option<&'a Arc<Pending<E>>>,
}

/// A round under way: its replies and how long to wait for them.
pub(crate) struct Launched<E> {
    pub(crate) pending: Arc<Pending<E>>,
    pub(crate) wait_until: Instant,
}

impl<E> Round<E> {
    /// A round over `nodes` nodes started at `started` (the manager's clock).
    pub(crate) fn new(nodes: usize, started: Instant) -> Self {
        Round {
            tally: Tally::new(nodes),
            started,
            decided_at: started,
            failures: Vec::new(),
            fences: Vec::new(),
        }
    }

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
