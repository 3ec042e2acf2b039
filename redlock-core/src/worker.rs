//! Long-lived per-node worker threads: a round costs one channel hand-off per
//! node, never a thread spawn.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::{Claim, ConfigError, LockBackend, NodeFailure, NodeId, Request, Response, Ttl};

/// A request to one node.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Acquire {
        ttl: Ttl,
        fence: bool,
    },
    Extend(Ttl),
    Release,
    RaiseFence(u64),
    /// A barrier: answered without touching the backend once every earlier
    /// request to the node has run.
    Flush,
}

pub(crate) type Reply<E> = (usize, Result<Response, NodeFailure<E>>);

pub(crate) struct Job<E> {
    pub(crate) op: Op,
    pub(crate) claim: Arc<Claim>,
    pub(crate) node: usize,
    /// After this (real) instant nobody waits for the answer: an acquire,
    /// or extend still queued then is dropped unexecuted. A
    /// release always runs, since it may clean up a late grant; so does a flush.
    pub(crate) stale_after: Instant,
    pub(crate) reply: Option<Sender<Reply<E>>>,
}

/// The sending side of one node's worker.
#[derive(Debug)]
pub(crate) struct Worker<E> {
    pub(crate) id: NodeId,
    jobs: Sender<Job<E>>,
}

impl<E: Send + 'static> Worker<E> {
    /// Starts the worker thread that owns `backend`.
    pub(crate) fn spawn<B>(index: usize, backend: B, depth: usize) -> Result<Self, ConfigError>
    where
        B: LockBackend<Error = E> + 'static,
    {
        let id = backend.node_id().clone();
        let (jobs, queue) = crossbeam_channel::bounded(depth);
        std::thread::Builder::new()
            .name(format!("redlock-node-{index}"))
            .spawn(move || serve(&backend, &queue))
            .map_err(|e| ConfigError::WorkerSpawn {
                node: id.clone(),
                kind: e.kind(),
            })?;
        Ok(Worker { id, jobs })
    }
}

impl<E> Worker<E> {
    /// Queues `job` without blocking; a full or closed queue is a failure of
    /// this node for this round.
    pub(crate) fn submit(&self, job: Job<E>) -> Result<(), NodeFailure<E>> {
        self.jobs.try_send(job).map_err(|e| match e {
            TrySendError::Full(_) => NodeFailure::Overloaded,
            TrySendError::Disconnected(_) => NodeFailure::Panicked,
        })
    }
}

/// The most requests one node's worker hands its backend at once.
const MAX_BATCH: usize = 128;

impl Op {
    /// Whether a request nobody waits for any more can be dropped unexecuted.
    fn skippable(self) -> bool {
        matches!(self, Op::Acquire { .. } | Op::Extend(_) | Op::RaiseFence(_))
    }

    fn request(self, claim: &Claim) -> Option<Request<'_>> {
        Some(match self {
            Op::Acquire { ttl, fence } => Request::Acquire { claim, ttl, fence },
            Op::Extend(ttl) => Request::Extend { claim, ttl },
            Op::Release => Request::Release { claim },
            Op::RaiseFence(at_least) => Request::RaiseFence { claim, at_least },
            Op::Flush => return None,
        })
    }
}

impl<E> Job<E> {
    fn answer(self, result: Result<Response, NodeFailure<E>>) {
        if let Some(reply) = self.reply {
            // The round may have been decided and its receiver dropped.
            let _ = reply.send((self.node, result));
        }
    }
}

/// The worker loop: takes every job queued (up to [`MAX_BATCH`]), drops the
/// stale ones, and runs the rest in arrival order as one batch, until every
/// sender is gone. A flush splits the batch: it is answered once everything
/// before it ran.
fn serve<B: LockBackend>(backend: &B, queue: &Receiver<Job<B::Error>>) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    let mut segment = Vec::with_capacity(MAX_BATCH);
    let mut results = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = queue.recv() {
        jobs.push(first);
        while jobs.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let now = Instant::now();
        for job in jobs.drain(..) {
            if job.op.skippable() && now > job.stale_after {
                continue;
            }
            if matches!(job.op, Op::Flush) {
                run_segment(backend, &mut segment, &mut results);
                job.answer(Ok(Response::Held(true)));
            } else {
                segment.push(job);
            }
        }
        run_segment(backend, &mut segment, &mut results);
    }
}

/// Runs `segment` on the backend (one request alone, several as a batch) and
/// answers each job; a panic is contained and reported for the whole segment.
fn run_segment<B: LockBackend>(
    backend: &B,
    segment: &mut Vec<Job<B::Error>>,
    results: &mut Vec<Result<Response, B::Error>>,
) {
    if let [job] = segment.as_slice() {
        let outcome = catch_unwind(AssertUnwindSafe(|| match job.op.request(&job.claim) {
            Some(request) => request.run_on(backend).map_err(NodeFailure::Backend),
            None => Ok(Response::Held(true)),
        }));
        let result = outcome.unwrap_or(Err(NodeFailure::Panicked));
        if let Some(job) = segment.pop() {
            job.answer(result);
        }
        return;
    }
    if segment.is_empty() {
        return;
    }
    results.clear();
    let requests: Vec<Request<'_>> = segment
        .iter()
        .filter_map(|job| job.op.request(&job.claim))
        .collect();
    let panicked =
        catch_unwind(AssertUnwindSafe(|| backend.run_batch(&requests, results))).is_err();
    drop(requests);
    let mut answers = results.drain(..);
    for job in segment.drain(..) {
        let result = match answers.next() {
            _ if panicked => Err(NodeFailure::Panicked),
            Some(Ok(response)) => Ok(response),
            Some(Err(e)) => Err(NodeFailure::Backend(e)),
            None => Err(NodeFailure::Unanswered),
        };
        job.answer(result);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{AcquireOutcome, Resources, Token};

    /// Grants everything; its batches answer all but the last `short_by`.
    #[derive(Debug)]
    struct Stub {
        id: NodeId,
        short_by: usize,
    }

    #[derive(Debug)]
    struct Never;
    impl std::fmt::Display for Never {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("never")
        }
    }
    impl std::error::Error for Never {}

    impl LockBackend for Stub {
        type Error = Never;
        fn node_id(&self) -> &NodeId {
            &self.id
        }
        fn acquire(&self, _: &Claim, _: Ttl, _: bool) -> Result<AcquireOutcome, Never> {
            Ok(AcquireOutcome::Granted { fence: None })
        }
        fn extend(&self, _: &Claim, _: Ttl) -> Result<bool, Never> {
            Ok(true)
        }
        fn release(&self, _: &Claim) -> Result<bool, Never> {
            Ok(false)
        }
        fn raise_fence(&self, _: &Claim, _: u64) -> Result<bool, Never> {
            Ok(true)
        }
        fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, Never>>) {
            let answered = requests.len().saturating_sub(self.short_by);
            out.extend(requests[..answered].iter().map(|r| r.run_on(self)));
        }
    }

    fn run(short_by: usize, ops: &[Op]) -> Vec<Reply<Never>> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let claim = Arc::new(Claim::new(
            Resources::one("k").unwrap_or_else(|_| unreachable!()),
            Token::from_bytes([1; crate::TOKEN_LEN]),
        ));
        let mut segment: Vec<Job<Never>> = ops
            .iter()
            .enumerate()
            .map(|(node, &op)| Job {
                op,
                claim: Arc::clone(&claim),
                node,
                stale_after: Instant::now() + Duration::from_secs(3600),
                reply: Some(tx.clone()),
            })
            .collect();
        let stub = Stub {
            id: NodeId::new("stub"),
            short_by,
        };
        run_segment(&stub, &mut segment, &mut Vec::new());
        drop(tx);
        rx.iter().collect()
    }

    fn ttl() -> Ttl {
        Ttl::new(Duration::from_secs(1)).unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn a_batch_answers_each_job_in_order() {
        let replies = run(
            0,
            &[
                Op::Acquire {
                    ttl: ttl(),
                    fence: false,
                },
                Op::Extend(ttl()),
                Op::Release,
            ],
        );
        let answers: Vec<_> = replies
            .iter()
            .map(|(n, r)| (*n, r.as_ref().ok().copied()))
            .collect();
        assert_eq!(
            answers,
            [
                (
                    0,
                    Some(Response::Acquire(AcquireOutcome::Granted { fence: None }))
                ),
                (1, Some(Response::Held(true))),
                (2, Some(Response::Held(false))),
            ]
        );
    }

    #[test]
    fn requests_a_batch_left_unanswered_fail_instead_of_hanging() {
        let replies = run(1, &[Op::Extend(ttl()), Op::Release]);
        assert_eq!(replies.len(), 2, "every job is answered");
        assert!(matches!(replies[0], (0, Ok(Response::Held(true)))));
        assert!(matches!(replies[1], (1, Err(NodeFailure::Unanswered))));
    }
}
