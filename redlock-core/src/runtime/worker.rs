//! Long-lived per-node worker threads: a round costs one queue push per
//! node, never a thread spawn.
//!
//! The queue is a plain mutex-guarded list with a condition variable rather
//! than a channel: the worker parks at once when it has nothing to do (no
//! spinning on two shared cores), takes everything queued in one go, and
//! several jobs can be queued together so that they reach the node in one
//! write, in order (a release and the next local waiter's acquire).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_utils::Backoff;
use parking_lot::{Condvar, Mutex};

use crate::backend::{KeyView, Started, Watcher};
use crate::engine::{self, Idle, Message, Retry, RoundId};
use crate::events::{ConnectionSink, Event, FailureKind, NodeCounters, Observer};
use crate::runtime::mailbox::Inbox;
use crate::{Claim, LockBackend, NodeFailure, NodeId, Request, Response, SpawnError, Ttl};

pub(crate) struct Job<E> {
    pub(crate) message: Message,
    pub(crate) claim: Arc<Claim>,
    pub(crate) node: usize,
    /// After this (real) instant nobody waits for the answer: an acquire,
    /// or extend still queued then is dropped unexecuted. A
    /// release always runs, since it may clean up a late grant; so does a flush.
    pub(crate) stale_after: Instant,
    pub(crate) reply: Option<(Arc<dyn Inbox<E>>, RoundId)>,
    /// Set on a failed release tried again.
    pub(crate) retry: Option<Retry>,
}

/// The failed releases one node's worker keeps for another try: the
/// engine's [`engine::Kept`] over what it takes to send one again.
type Kept = engine::Kept<(Arc<Claim>, Ttl)>;

/// Reports the releases `kept` kept and dropped since the last report,
/// each count in one event (on the worker thread, with no lock held).
fn report(kept: &mut Kept, watch: &Watch) {
    let count = kept.take_kept();
    if count > 0 {
        watch.counters.releases_kept(count);
        watch.observer.emit(|| Event::ReleasesKept {
            node: &watch.id,
            count,
        });
    }
    let count = kept.take_dropped();
    if count > 0 {
        watch.counters.releases_dropped(count);
        watch.observer.emit(|| Event::ReleasesDropped {
            node: &watch.id,
            count,
        });
    }
}

/// What the callers and one worker thread share.
struct Queue<E> {
    state: Mutex<State<E>>,
    /// Whether jobs are queued, for the worker to spin on without the lock.
    queued: AtomicBool,
    /// Jobs submitted and not yet run (or dropped), by the worker or the
    /// manager's poller: a caller sends a request itself only when there
    /// are none, so the node runs what was sent before first.
    unfinished: AtomicUsize,
    /// Those of them in the worker's own queue or being run by it: the
    /// poller starts a node's batch itself only when there are none.
    running: AtomicUsize,
    ready: Condvar,
    /// Signalled when the worker thread ends.
    exited: Condvar,
    depth: usize,
}

struct State<E> {
    jobs: Vec<Job<E>>,
    /// The worker is parked waiting for jobs.
    idle: bool,
    /// The manager is gone: the worker drains what is queued, tries its
    /// failed releases again until `shutdown_by`, and exits.
    closed: bool,
    shutdown_by: Option<Instant>,
    /// The worker thread ended (it never should): nothing runs any more.
    dead: bool,
}

/// The sending side of one node's worker.
pub(crate) struct Worker<E> {
    pub(crate) id: NodeId,
    queue: Arc<Queue<E>>,
    /// The node's counters (written by the worker thread, read by stats).
    pub(crate) counters: Arc<NodeCounters>,
    observer: Arc<Observer>,
    /// The backend, for a caller that sends its round itself.
    direct: Arc<dyn Direct<E>>,
    /// Counts what a caller's own round saw, as the worker thread does.
    watch: Watch,
}

/// A backend as callers reach it without its worker: [`LockBackend::start`].
pub(crate) trait Direct<E>: Send + Sync {
    fn start<'a>(&'a self, requests: &[Request<'a>]) -> Option<Box<dyn Started<E> + 'a>>;
    fn inspect(&self, key: &str, watcher: Option<Watcher>) -> Option<Result<KeyView, E>>;
}

impl<B: LockBackend> Direct<B::Error> for B {
    fn start<'a>(&'a self, requests: &[Request<'a>]) -> Option<Box<dyn Started<B::Error> + 'a>> {
        LockBackend::start(self, requests)
    }
    fn inspect(&self, key: &str, watcher: Option<Watcher>) -> Option<Result<KeyView, B::Error>> {
        LockBackend::inspect(self, key, watcher)
    }
}

/// The node's backend, for [`Inspector::inspect`].
pub(crate) struct Inspector<E>(Arc<dyn Direct<E>>);

impl<E> Inspector<E> {
    /// Reads who holds `key` on the node ([`LockBackend::inspect`]), for
    /// `watcher` to watch it from then on; a backend that panics or cannot
    /// answers as a failed node.
    pub(crate) fn inspect(
        &self,
        key: &str,
        watcher: Option<Watcher>,
    ) -> Result<KeyView, NodeFailure<E>> {
        match catch_unwind(AssertUnwindSafe(|| self.0.inspect(key, watcher))) {
            Ok(Some(Ok(view))) => Ok(view),
            Ok(Some(Err(e))) => Err(NodeFailure::Backend(e)),
            Ok(None) => Err(NodeFailure::Unanswered),
            Err(_) => Err(NodeFailure::Panicked),
        }
    }
}

/// What a worker thread counts and reports with.
pub(crate) struct Watch {
    id: NodeId,
    counters: Arc<NodeCounters>,
    observer: Arc<Observer>,
}

impl Watch {
    /// Counts one request's result and reports failures and recoveries.
    fn saw<E: std::error::Error + 'static>(
        &self,
        result: &Result<Response, NodeFailure<E>>,
        late: bool,
    ) {
        let kind = match result {
            Ok(_) if late => Some(FailureKind::TimedOut),
            Ok(_) => None,
            Err(NodeFailure::Backend(_)) => Some(FailureKind::Backend),
            Err(NodeFailure::TimedOut) => Some(FailureKind::TimedOut),
            Err(NodeFailure::Overloaded) => Some(FailureKind::Overloaded),
            Err(NodeFailure::Unanswered) => Some(FailureKind::Unanswered),
            Err(_) => Some(FailureKind::Panicked),
        };
        let count = self.counters.count(kind);
        let error = match result {
            Err(NodeFailure::Backend(e)) => {
                self.counters.last_error(e.to_string());
                Some(e as &(dyn std::error::Error + 'static))
            }
            _ => None,
        };
        match kind {
            None if count > 0 => self.observer.emit(|| Event::NodeRecovered {
                node: &self.id,
                after_failures: count,
            }),
            None => {}
            Some(kind) => self.observer.emit(|| Event::NodeFailed {
                node: &self.id,
                kind,
                error,
                consecutive: count,
            }),
        }
    }

    /// Counts the result of `job`, sent to the node at `began`: late when
    /// it came after the job's deadline, and then queued past the deadline
    /// too when it was sent only after it.
    fn saw_after<E: std::error::Error + 'static>(
        &self,
        result: &Result<Response, NodeFailure<E>>,
        job: &Job<E>,
        began: Instant,
    ) {
        let late = Instant::now() > job.stale_after;
        // Counted as a timeout below: an answer, or a timeout, that came
        // late (not a backend error, which says more).
        let timed_out = matches!(result, Ok(_) | Err(NodeFailure::TimedOut));
        if late && timed_out && began > job.stale_after && job.retry.is_none() {
            self.counters.queued_past_deadline();
        }
        self.saw(result, late);
    }
}

impl<E> std::fmt::Debug for Worker<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("id", &self.id).finish()
    }
}

impl<E: Send + 'static> Worker<E> {
    /// Starts the worker thread that owns `backend`.
    pub(crate) fn spawn<B>(
        index: usize,
        backend: B,
        depth: usize,
        observer: &Arc<Observer>,
    ) -> Result<Self, SpawnError>
    where
        B: LockBackend<Error = E> + 'static,
        E: std::error::Error,
    {
        let backend = Arc::new(backend);
        let id = backend.node_id().clone();
        let counters = Arc::new(NodeCounters::default());
        backend.attach(ConnectionSink::new(
            id.clone(),
            Arc::clone(&counters),
            Arc::clone(observer),
        ));
        let watch = Watch {
            id: id.clone(),
            counters: Arc::clone(&counters),
            observer: Arc::clone(observer),
        };
        let queue = Arc::new(Queue {
            state: Mutex::new(State {
                jobs: Vec::new(),
                idle: false,
                closed: false,
                shutdown_by: None,
                dead: false,
            }),
            queued: AtomicBool::new(false),
            unfinished: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            ready: Condvar::new(),
            exited: Condvar::new(),
            depth,
        });
        let theirs = Arc::clone(&queue);
        let own = Arc::clone(&backend);
        let caller_watch = Watch {
            id: id.clone(),
            counters: Arc::clone(&counters),
            observer: Arc::clone(observer),
        };
        std::thread::Builder::new()
            .name(format!("redlock-node-{index}"))
            .spawn(move || {
                let _dead = Dead(&theirs);
                serve(&*own, &theirs, &watch);
            })
            .map_err(|e| SpawnError::new(format!("redlock-node-{index}"), e.kind()))?;
        Ok(Worker {
            id,
            queue,
            counters,
            observer: Arc::clone(observer),
            direct: backend,
            watch: caller_watch,
        })
    }
}

impl<E: std::error::Error + 'static> Worker<E> {
    /// What reads who holds a key on the node from another thread
    /// ([`LockBackend::inspect`]), without holding on to the manager.
    pub(crate) fn inspector(&self) -> Inspector<E> {
        Inspector(Arc::clone(&self.direct))
    }

    /// Sends `request` to the node from the calling thread
    /// ([`LockBackend::start`]), when the worker has no job left to run (the
    /// node runs what it was sent first, first) and the node's last request
    /// did not fail (a frozen node would hold the caller until the round's
    /// deadline instead of letting it decide at a quorum). `None`: queue
    /// it instead.
    pub(crate) fn try_start<'a>(
        &'a self,
        request: Request<'a>,
    ) -> Option<Box<dyn Started<E> + 'a>> {
        let queued = self.queue.unfinished.load(Ordering::Acquire);
        if !crate::engine::OwnRound::takes(queued, self.counters.failing()) {
            return None;
        }
        catch_unwind(AssertUnwindSafe(|| {
            self.direct.start(std::slice::from_ref(&request))
        }))
        .unwrap_or(None)
    }

    /// Reads the answer to a request [`Worker::try_start`] sent, by
    /// `deadline`, and counts it; a release that failed is queued for the
    /// worker to try again, as one it ran itself would be kept. `out` is a
    /// buffer the backend answers into, kept by the caller between nodes.
    pub(crate) fn finish(
        &self,
        started: Box<dyn Started<E> + '_>,
        deadline: Instant,
        (message, claim): (Message, &Arc<Claim>),
        out: &mut Vec<Result<Response, E>>,
    ) -> Result<Response, NodeFailure<E>> {
        out.clear();
        let read = catch_unwind(AssertUnwindSafe(|| started.finish(deadline, &mut *out)));
        let result = outcome(read.map(|()| out.pop()));
        self.count(result, deadline, message, claim)
    }

    /// Leaves the answer to a request [`Worker::try_start`] sent to be
    /// read later, when the backend can ([`Started::detach`]): `None`.
    /// Otherwise reads it by `deadline` and counts it, as
    /// [`Worker::finish`] does.
    pub(crate) fn detach(
        &self,
        started: Box<dyn Started<E> + '_>,
        deadline: Instant,
        (message, claim): (Message, &Arc<Claim>),
        out: &mut Vec<Result<Response, E>>,
    ) -> Option<Result<Response, NodeFailure<E>>> {
        out.clear();
        let result = match catch_unwind(AssertUnwindSafe(|| started.detach(deadline, &mut *out))) {
            Ok(true) => return None,
            Ok(false) => outcome(Ok(out.pop())),
            Err(panic) => outcome(Err(panic)),
        };
        Some(self.count(result, deadline, message, claim))
    }

    /// The backend, for a caller or the poller that sends requests itself.
    pub(crate) fn direct(&self) -> &dyn Direct<E> {
        &*self.direct
    }

    /// Counts `count` jobs the poller dropped unsent: nobody waited for
    /// them any more (see [`Message::stale`]).
    pub(crate) fn stale(&self, count: usize) {
        for _ in 0..count {
            self.counters.queued_past_deadline();
            self.watch.saw::<E>(&Err(NodeFailure::TimedOut), false);
        }
    }

    /// Counts what a caller's own request (or the poller's) got; a release
    /// that failed is queued for the worker to try again.
    pub(crate) fn count(
        &self,
        result: Result<Response, NodeFailure<E>>,
        deadline: Instant,
        message: Message,
        claim: &Arc<Claim>,
    ) -> Result<Response, NodeFailure<E>> {
        self.count_at(Instant::now(), result, deadline, message, claim)
    }

    /// [`Worker::count`] of an answer read by `now` (one reading of the
    /// clock for a batch's answers).
    pub(crate) fn count_at(
        &self,
        now: Instant,
        result: Result<Response, NodeFailure<E>>,
        deadline: Instant,
        message: Message,
        claim: &Arc<Claim>,
    ) -> Result<Response, NodeFailure<E>> {
        self.watch.saw(&result, now > deadline);
        if result.is_err() && matches!(message, Message::Release(_)) {
            // Nobody waits for the retry's answer; the queue takes releases
            // even when full.
            let _ = self.submit(Job {
                message,
                claim: Arc::clone(claim),
                node: 0,
                stale_after: deadline,
                reply: None,
                retry: None,
            });
        }
        result
    }
}

impl<E> Worker<E> {
    /// Counts `job`, bound for the manager's poller, as unfinished for this
    /// node, unless the node's queue is full (then `false`): as
    /// [`Worker::submit_all`] turns jobs away.
    pub(crate) fn admit(&self, job: &Job<E>) -> bool {
        let queued = self.queue.unfinished.load(Ordering::Acquire);
        if queued >= self.queue.depth
            && !matches!(job.message, Message::Release(_) | Message::Flush)
        {
            self.counters.count(Some(FailureKind::Overloaded));
            return false;
        }
        self.queue.unfinished.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// Whether the poller has jobs for this node it has not handed over nor
    /// finished: a job sent now must go behind them, through the poller.
    /// (Read in this order, a job the poller hands over meanwhile counts
    /// as the worker's: the job sent now goes behind it all the same.)
    pub(crate) fn poller_owes(&self) -> bool {
        let unfinished = self.queue.unfinished.load(Ordering::Acquire);
        unfinished > self.queue.running.load(Ordering::Acquire)
    }

    /// The poller is done with `count` of the jobs it [admitted](Worker::admit).
    pub(crate) fn done(&self, count: usize) {
        self.queue.unfinished.fetch_sub(count, Ordering::AcqRel);
    }

    /// Whether the worker has jobs of its own, queued or running: the
    /// poller starts none of this node's jobs until they ran (they were
    /// sent first).
    pub(crate) fn running(&self) -> bool {
        self.queue.running.load(Ordering::Acquire) > 0
    }

    /// Whether the node's last request failed: the poller hands its jobs
    /// to the worker, which knows how to wait on a node that owes replies
    /// (a frozen node would hold the poller).
    pub(crate) fn failing(&self) -> bool {
        self.counters.failing()
    }

    /// Queues `jobs`, which the poller [admitted](Worker::admit), for the
    /// worker to run in order; a dead worker fails them.
    pub(crate) fn hand_over(&self, jobs: impl IntoIterator<Item = Job<E>>) {
        let mut state = self.queue.state.lock();
        if state.dead {
            drop(state);
            for job in jobs {
                job.answer(Err(NodeFailure::Panicked));
            }
            return;
        }
        let before = state.jobs.len();
        state.jobs.extend(jobs);
        let added = state.jobs.len() - before;
        if added == 0 {
            return;
        }
        self.queue.running.fetch_add(added, Ordering::AcqRel);
        self.queue.queued.store(true, Ordering::Release);
        let wake = std::mem::take(&mut state.idle);
        drop(state);
        if wake {
            self.queue.ready.notify_one();
        }
    }

    /// Queues `job` without blocking; a full queue or a dead worker is a
    /// failure of this node for this round.
    pub(crate) fn submit(&self, job: Job<E>) -> Result<(), NodeFailure<E>> {
        self.submit_all([job])
    }

    /// Queues `jobs` together, in order, so that the worker takes them in
    /// one batch. A full queue turns away every job but releases (a dropped
    /// release would leave a key until its TTL) and flush barriers (which
    /// run nothing); the error then stands for the jobs turned away, and
    /// the caller reports it with [`Worker::report_full`] once it holds no
    /// lock of the manager.
    pub(crate) fn submit_all<const K: usize>(
        &self,
        jobs: [Job<E>; K],
    ) -> Result<(), NodeFailure<E>> {
        let mut state = self.queue.state.lock();
        if state.dead {
            return Err(NodeFailure::Panicked);
        }
        let full = state.jobs.len() + K > self.queue.depth.max(K);
        let mut refused = false;
        for job in jobs {
            if full && !matches!(job.message, Message::Release(_) | Message::Flush) {
                refused = true;
            } else {
                state.jobs.push(job);
                self.queue.unfinished.fetch_add(1, Ordering::AcqRel);
                self.queue.running.fetch_add(1, Ordering::AcqRel);
            }
        }
        self.queue.queued.store(true, Ordering::Release);
        let wake = std::mem::take(&mut state.idle);
        drop(state);
        if wake {
            self.queue.ready.notify_one();
        }
        if refused {
            self.counters.count(Some(FailureKind::Overloaded));
            Err(NodeFailure::Overloaded)
        } else {
            Ok(())
        }
    }

    /// Sends [`Event::QueueFull`] for a job [`Worker::submit_all`] turned
    /// away. Never with a lock of the manager held: the hook may call back
    /// into it (`stats()` takes each queue's lock, `lock` the lines').
    pub(crate) fn report_full(&self) {
        self.observer.emit(|| Event::QueueFull { node: &self.id });
    }

    /// Requests queued for the node right now (for stats: takes the
    /// queue's lock, so the submit path counts nothing).
    pub(crate) fn queued(&self) -> usize {
        self.queue.state.lock().jobs.len()
    }

    /// Tells the worker that the manager is gone: it runs what is queued,
    /// tries its failed releases again until `by`, and exits.
    pub(crate) fn close(&self, by: Instant) {
        let mut state = self.queue.state.lock();
        state.closed = true;
        state.shutdown_by = Some(by);
        drop(state);
        self.queue.ready.notify_one();
    }

    /// Waits until the worker thread has exited or `deadline` passes;
    /// returns whether it exited.
    pub(crate) fn wait_exit(&self, deadline: Instant) -> bool {
        let mut state = self.queue.state.lock();
        while !state.dead {
            if self
                .queue
                .exited
                .wait_until(&mut state, deadline)
                .timed_out()
            {
                return state.dead;
            }
        }
        true
    }
}

impl<E> Drop for Worker<E> {
    fn drop(&mut self) {
        let mut state = self.queue.state.lock();
        state.closed = true;
        drop(state);
        self.queue.ready.notify_one();
    }
}

/// Marks the queue dead when the worker thread ends, however it ends.
struct Dead<'a, E>(&'a Queue<E>);

impl<E> Drop for Dead<'_, E> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.dead = true;
        // Nobody will run these: fail them now rather than at their timeout.
        let jobs = std::mem::take(&mut state.jobs);
        drop(state);
        self.0.exited.notify_all();
        for job in jobs {
            job.answer(Err(NodeFailure::Panicked));
        }
    }
}

/// The most requests one node's worker hands its backend at once.
const MAX_BATCH: usize = 128;

impl<E> Job<E> {
    /// The round the job answers in, as a key unique among the rounds under
    /// way (its machine's inbox and the round's id); `None` when nobody
    /// waits for the answer.
    pub(crate) fn round_key(&self) -> Option<(usize, RoundId)> {
        self.reply
            .as_ref()
            .map(|(inbox, round)| (Arc::as_ptr(inbox).cast::<()>() as usize, *round))
    }

    /// Hands `result` to whoever waits for it; whether their machine now
    /// has something for its driver (a decision, most often).
    pub(crate) fn deliver(&self, result: Result<Response, NodeFailure<E>>) -> bool {
        match &self.reply {
            Some((inbox, round)) => inbox.deliver(*round, self.node, result),
            None => false,
        }
    }

    fn answer(self, result: Result<Response, NodeFailure<E>>) {
        if let Some((inbox, round)) = self.reply {
            // A round already decided ignores the answer.
            let _ = inbox.deliver(round, self.node, result);
        }
    }
}

/// The worker loop: takes every job queued, drops the stale ones, and runs
/// the rest in arrival order in batches of at most [`MAX_BATCH`], until the
/// manager is gone and the queue is empty. A flush splits the batch: it is
/// answered once everything before it ran, as caught up only when no failed
/// release is still kept. Failed releases are kept ([`engine::Kept`], at most
/// [`engine::KEPT_RELEASES`]) and tried again (ahead of the next batch once due, or
/// on their own when the worker is idle) until the node answers them or
/// every key they could delete has expired.
fn serve<B: LockBackend>(backend: &B, queue: &Queue<B::Error>, watch: &Watch) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    let mut segment = Vec::with_capacity(MAX_BATCH);
    let mut results = Vec::with_capacity(MAX_BATCH);
    let mut retained = Kept::new();
    loop {
        {
            // Spin and yield briefly before parking, as a channel would: the
            // next job often comes within microseconds, and a parked worker
            // costs its caller a wake-up.
            let backoff = Backoff::new();
            while !backoff.is_completed() && !queue.queued.load(Ordering::Acquire) {
                backoff.snooze();
            }
            let mut state = queue.state.lock();
            loop {
                if !state.jobs.is_empty() {
                    break;
                }
                // Closed: the exit drain keeps trying the failed releases
                // until the shutdown deadline, then leaves them to their TTL.
                let closing = state.closed.then_some(state.shutdown_by).flatten();
                if state.closed && closing.is_none() {
                    return;
                }
                match retained.idle(Instant::now(), closing) {
                    Idle::Exit => return,
                    Idle::Until(at) if state.closed => {
                        let _ = queue.ready.wait_until(&mut state, at);
                        if Instant::now() >= at {
                            break;
                        }
                        continue;
                    }
                    Idle::Park => {
                        state.idle = true;
                        queue.ready.wait(&mut state);
                    }
                    Idle::Until(at) => {
                        state.idle = true;
                        if queue.ready.wait_until(&mut state, at).timed_out() {
                            break;
                        }
                    }
                }
            }
            state.idle = false;
            std::mem::swap(&mut jobs, &mut state.jobs);
            queue.queued.store(false, Ordering::Release);
        }
        let taken = jobs.len();
        let now = Instant::now();
        // Failed releases that are due go first, ahead of newer requests.
        segment.extend(retained.take_due(now).into_iter().map(into_job));
        for job in jobs.drain(..) {
            if job.message.stale(now, job.stale_after) {
                watch.counters.queued_past_deadline();
                watch.saw::<B::Error>(&Err(NodeFailure::TimedOut), false);
                continue;
            }
            if matches!(job.message, Message::Flush) {
                run_segment(backend, &mut segment, &mut results, &mut retained, watch);
                // Answers left unread by callers' own rounds are read: what
                // they answer has run on the node.
                let read = catch_unwind(AssertUnwindSafe(|| backend.catch_up(job.stale_after)));
                // Whatever is still kept gets one more try now: a flush
                // reports whether the node has caught up.
                let now = Instant::now();
                segment.extend(retained.take_all(now).into_iter().map(into_job));
                run_segment(backend, &mut segment, &mut results, &mut retained, watch);
                let caught_up = retained.is_empty() && matches!(read, Ok(Ok(())));
                job.answer(if caught_up {
                    Ok(Response::Held(true))
                } else {
                    Err(NodeFailure::Unanswered)
                });
            } else {
                segment.push(job);
                if segment.len() == MAX_BATCH {
                    run_segment(backend, &mut segment, &mut results, &mut retained, watch);
                }
            }
        }
        run_segment(backend, &mut segment, &mut results, &mut retained, watch);
        queue.running.fetch_sub(taken, Ordering::AcqRel);
        queue.unfinished.fetch_sub(taken, Ordering::AcqRel);
        // A slow node can fall far behind; do not keep the backlog's
        // buffers for ever once it caught up.
        if jobs.capacity() > MAX_BATCH {
            jobs = Vec::with_capacity(MAX_BATCH);
        }
        retained.shrink(MAX_BATCH);
    }
}

/// What a caller's own request got, a panic of the backend included
/// (and a backend that gave no answer).
fn outcome<E>(
    read: std::thread::Result<Option<Result<Response, E>>>,
) -> Result<Response, NodeFailure<E>> {
    match read {
        Ok(Some(Ok(response))) => Ok(response),
        Ok(Some(Err(e))) => Err(NodeFailure::Backend(e)),
        Ok(None) => Err(NodeFailure::Unanswered),
        Err(_) => Err(NodeFailure::Panicked),
    }
}

/// A kept release's job, to try it again.
fn into_job<E>(((claim, ttl), retry): ((Arc<Claim>, Ttl), Retry)) -> Job<E> {
    Job {
        message: Message::Release(ttl),
        claim,
        node: 0,
        stale_after: retry.give_up(),
        reply: None,
        retry: Some(retry),
    }
}

/// Keeps a release that failed for another try; `job.retry` is set when it
/// was itself a retry.
fn retain<E>(job: &Job<E>, retained: &mut Kept) {
    let Message::Release(ttl) = job.message else {
        return;
    };
    retained.failed(
        Instant::now(),
        (Arc::clone(&job.claim), ttl),
        ttl.as_duration(),
        job.retry,
    );
}

/// Runs `segment` on the backend (one request alone, several as a batch) and
/// answers each job; a panic is contained and reported for the whole segment.
/// Failed releases are kept in `retained`; those it had to drop for them
/// are counted and reported at the end (before a flush behind the segment
/// is answered).
fn run_segment<B: LockBackend>(
    backend: &B,
    segment: &mut Vec<Job<B::Error>>,
    results: &mut Vec<Result<Response, B::Error>>,
    retained: &mut Kept,
    watch: &Watch,
) {
    let began = Instant::now();
    if let [job] = segment.as_slice() {
        let outcome = catch_unwind(AssertUnwindSafe(|| match job.message.request(&job.claim) {
            Some(request) => request.run_on(backend).map_err(NodeFailure::Backend),
            None => Ok(Response::Held(true)),
        }));
        let result = outcome.unwrap_or(Err(NodeFailure::Panicked));
        if let Some(job) = segment.pop() {
            watch.saw_after(&result, &job, began);
            if result.is_err() {
                retain(&job, retained);
            }
            job.answer(result);
        }
        report(retained, watch);
        return;
    }
    if segment.is_empty() {
        return;
    }
    results.clear();
    let requests: Vec<Request<'_>> = segment
        .iter()
        .filter_map(|job| job.message.request(&job.claim))
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
        watch.saw_after(&result, &job, began);
        if result.is_err() {
            retain(&job, retained);
        }
        job.answer(result);
    }
    report(retained, watch);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::Round;
    use crate::{AcquireOutcome, Resources, Token, Vote};

    /// Records every answer into a round.
    struct Collect(parking_lot::Mutex<Round<Never>>);

    impl Inbox<Never> for Collect {
        fn deliver(
            &self,
            _: RoundId,
            node: usize,
            result: Result<Response, NodeFailure<Never>>,
        ) -> bool {
            self.0.lock().record(node, result, None);
            false
        }
    }

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

    /// Runs `ops` (job `i` for node `i`) as one segment and returns the
    /// round the answers made.
    fn run(short_by: usize, ops: &[Message]) -> Round<Never> {
        let collect = Arc::new(Collect(parking_lot::Mutex::new(Round::new(
            RoundId::FIRST,
            ops.len(),
            Instant::now(),
            false,
        ))));
        let inbox: Arc<dyn Inbox<Never>> = Arc::clone(&collect) as Arc<dyn Inbox<Never>>;
        let claim = Arc::new(Claim::new(
            Resources::one("k").unwrap_or_else(|_| unreachable!()),
            Token::from_bytes([1; crate::TOKEN_LEN]),
        ));
        let mut segment: Vec<Job<Never>> = ops
            .iter()
            .enumerate()
            .map(|(node, &message)| Job {
                message,
                claim: Arc::clone(&claim),
                node,
                stale_after: Instant::now() + Duration::from_secs(3600),
                reply: Some((Arc::clone(&inbox), RoundId::FIRST)),
                retry: None,
            })
            .collect();
        let stub = Stub {
            id: NodeId::new("stub"),
            short_by,
        };
        let watch = Watch {
            id: stub.id.clone(),
            counters: Arc::default(),
            observer: Arc::new(Observer::new(None)),
        };
        run_segment(
            &stub,
            &mut segment,
            &mut Vec::new(),
            &mut Kept::new(),
            &watch,
        );
        drop(inbox);
        match Arc::try_unwrap(collect) {
            Ok(collect) => collect.0.into_inner(),
            Err(_) => unreachable!(),
        }
    }

    fn ttl() -> Ttl {
        Ttl::new(Duration::from_secs(1)).unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn a_batch_answers_each_job_in_order() {
        let round = run(
            0,
            &[
                Message::Acquire {
                    ttl: ttl(),
                    fence: false,
                },
                Message::Extend(ttl()),
                Message::Release(ttl()),
            ],
        );
        let votes: Vec<_> = (0..3).map(|node| round.tally.vote(node)).collect();
        assert_eq!(
            votes,
            [
                Some(Vote::Granted),
                Some(Vote::Granted),
                Some(Vote::Refused)
            ]
        );
        assert!(round.failures.is_empty());
    }

    #[test]
    fn requests_a_batch_left_unanswered_fail_instead_of_hanging() {
        let round = run(1, &[Message::Extend(ttl()), Message::Release(ttl())]);
        assert_eq!(round.tally.pending(), 0, "every job is answered");
        assert_eq!(round.tally.vote(0), Some(Vote::Granted));
        assert!(matches!(round.failures[..], [(1, NodeFailure::Unanswered)]));
    }
}
