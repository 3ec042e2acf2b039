//! Long-lived per-node worker threads: a round costs one channel hand-off per
//! node, never a thread spawn.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::{AcquireOutcome, Claim, ConfigError, LockBackend, NodeFailure, NodeId, Ttl};

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

/// A node's answer to an [`Op`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answer {
    Acquire(AcquireOutcome),
    /// Extend, release, raise-fence: whether our token was there.
    Held(bool),
}

pub(crate) type Reply<E> = (usize, Result<Answer, NodeFailure<E>>);

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

/// The worker loop: runs jobs in arrival order until every sender is gone.
fn serve<B: LockBackend>(backend: &B, queue: &Receiver<Job<B::Error>>) {
    for job in queue {
        let skippable = matches!(
            job.op,
            Op::Acquire { .. } | Op::Extend(_) | Op::RaiseFence(_)
        );
        if skippable && Instant::now() > job.stale_after {
            continue;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| execute(backend, job.op, &job.claim)));
        let result = match outcome {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(NodeFailure::Backend(e)),
            Err(_) => Err(NodeFailure::Panicked),
        };
        if let Some(reply) = job.reply {
            // The round may have been decided and its receiver dropped.
            let _ = reply.send((job.node, result));
        }
    }
}

fn execute<B: LockBackend>(backend: &B, op: Op, claim: &Claim) -> Result<Answer, B::Error> {
    Ok(match op {
        Op::Acquire { ttl, fence } => Answer::Acquire(backend.acquire(claim, ttl, fence)?),
        Op::Extend(ttl) => Answer::Held(backend.extend(claim, ttl)?),
        Op::Release => Answer::Held(backend.release(claim)?),
        Op::RaiseFence(value) => Answer::Held(backend.raise_fence(claim, value)?),
        Op::Flush => Answer::Held(true),
    })
}
