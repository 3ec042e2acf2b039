//! One thread that sends every node the requests of many callers and reads
//! the answers of all nodes: with several callers, their rounds are handed
//! to it instead of to one worker thread per node, so that a round costs
//! one queue push and at most one wake-up of one thread, and the poller's
//! batches reach every node before it waits for any answer.
//!
//! The poller takes everything queued at once (a *generation*), starts each
//! node's requests as one batch ([`LockBackend::start`](crate::LockBackend::start),
//! for Redis one write on an idle connection), then reads the nodes'
//! answers as a lone caller reads its own round's ([`OwnRound`]): in node
//! order, a short slice at a time while others are out, delivering each
//! answer to its caller's machine. Once every round of the generation is
//! decided, or a quorum of the nodes was read, the answers still out get a
//! grace, and are then left on their connections
//! ([`Started::detach`](crate::backend::Started::detach)) and the next
//! generation starts (see `read`).
//!
//! A node whose last request failed, or whose backend cannot start the
//! batch without waiting (for Redis: it owes the answers of two batches
//! left unread), gets the batch through its worker, in order behind what
//! the worker has: the paths for frozen nodes, replies owed and releases
//! kept are the workers'. While a node's worker runs jobs of its own, the
//! poller holds that node's new jobs (they go behind) and starts them
//! itself once the worker is done: the node is the poller's again as soon
//! as its worker caught up, not once the load stops.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::backend::Started;
use crate::decide::deadline::later;
use crate::engine::{Message, OwnRound, RoundId, WAIT_SLICE};
use crate::events::{ManagerCounters, Observer};
use crate::runtime::worker::{Job, Worker};
use crate::{Claim, NodeFailure, Request, Response, SpawnError};

/// The sending side of a manager's poller.
pub(crate) struct Poller<E> {
    queue: Arc<Queue<E>>,
}

struct Queue<E> {
    state: Mutex<State<E>>,
    /// Whether jobs are queued, for the poller to look at without the lock.
    queued: AtomicBool,
    ready: Condvar,
    /// Signalled when the poller thread ends.
    exited: Condvar,
}

struct State<E> {
    jobs: Vec<Job<E>>,
    /// The poller is parked waiting for jobs.
    idle: bool,
    /// The manager is gone: the poller runs what is queued and exits.
    closed: bool,
    /// The poller thread ended: jobs go to the workers.
    dead: bool,
}

impl<E: std::error::Error + Send + Sync + 'static> Poller<E> {
    /// Starts the poller thread over the nodes' `workers`, reading each
    /// node at most `node_timeout` per batch.
    pub(crate) fn spawn(
        workers: &[Arc<Worker<E>>],
        node_timeout: Duration,
        observer: &Arc<Observer>,
    ) -> Result<Self, SpawnError> {
        let queue = Arc::new(Queue {
            state: Mutex::new(State {
                jobs: Vec::new(),
                idle: false,
                closed: false,
                dead: false,
            }),
            queued: AtomicBool::new(false),
            ready: Condvar::new(),
            exited: Condvar::new(),
        });
        let theirs = Arc::clone(&queue);
        let workers = workers.to_vec();
        let observer = Arc::clone(observer);
        std::thread::Builder::new()
            .name("redlock-poller".to_owned())
            .spawn(move || {
                let _dead = Dead(&theirs, &workers);
                serve(&theirs, &workers, node_timeout, &observer);
            })
            .map_err(|e| SpawnError::new("redlock-poller", e.kind()))?;
        Ok(Poller { queue })
    }
}

impl<E> Poller<E> {
    /// Queues `jobs`, each [admitted](Worker::admit) by its node's worker,
    /// in order; when the poller thread is gone, hands them to the workers.
    pub(crate) fn submit(&self, workers: &[Arc<Worker<E>>], jobs: Vec<Job<E>>) {
        if jobs.is_empty() {
            return;
        }
        let mut state = self.queue.state.lock();
        if state.dead {
            drop(state);
            for job in jobs {
                workers[job.node].hand_over([job]);
            }
            return;
        }
        state.jobs.extend(jobs);
        self.queue.queued.store(true, Ordering::Release);
        let wake = std::mem::take(&mut state.idle);
        drop(state);
        if wake {
            self.queue.ready.notify_one();
        }
    }

    /// Tells the poller that the manager is gone: it runs what is queued
    /// and exits.
    pub(crate) fn close(&self) {
        self.queue.state.lock().closed = true;
        self.queue.ready.notify_one();
    }

    /// Waits until the poller thread has exited or `deadline` passes.
    pub(crate) fn wait_exit(&self, deadline: Instant) {
        let mut state = self.queue.state.lock();
        while !state.dead {
            if self
                .queue
                .exited
                .wait_until(&mut state, deadline)
                .timed_out()
            {
                return;
            }
        }
    }
}

/// A manager's poller, started the first time a round goes through it:
/// a manager whose callers never drive enough rounds at once
/// ([`Builder::poller_from`](crate::Builder::poller_from)) never starts
/// its thread.
pub(crate) struct LazyPoller<E> {
    cell: OnceLock<Option<Poller<E>>>,
    /// Starts the thread (`None`: the manager has no poller).
    start: Option<Start<E>>,
}

type Start<E> = Box<dyn Fn() -> Result<Poller<E>, SpawnError> + Send + Sync>;

impl<E: std::error::Error + Send + Sync + 'static> LazyPoller<E> {
    /// A poller over the nodes' `workers`, reading each node at most
    /// `node_timeout` per batch, to be started when first needed.
    pub(crate) fn new(
        workers: &[Arc<Worker<E>>],
        node_timeout: Duration,
        observer: &Arc<Observer>,
    ) -> Self {
        let (workers, observer) = (workers.to_vec(), Arc::clone(observer));
        LazyPoller {
            cell: OnceLock::new(),
            start: Some(Box::new(move || {
                Poller::spawn(&workers, node_timeout, &observer)
            })),
        }
    }
}

impl<E> LazyPoller<E> {
    /// No poller: every round goes through the workers.
    pub(crate) fn none() -> Self {
        LazyPoller {
            cell: OnceLock::new(),
            start: None,
        }
    }

    /// Whether the manager has a poller, started or not.
    pub(crate) fn exists(&self) -> bool {
        self.start.is_some()
    }

    /// The poller, when its thread was started.
    pub(crate) fn started(&self) -> Option<&Poller<E>> {
        self.cell.get().and_then(Option::as_ref)
    }

    /// The poller, its thread started now if it was not. `None` without a
    /// poller, or when the thread could not be started (then the rounds
    /// keep going through the workers, and the start is not tried again).
    pub(crate) fn start(&self) -> Option<&Poller<E>> {
        let start = self.start.as_ref()?;
        self.cell.get_or_init(|| start().ok()).as_ref()
    }
}

impl<E> Drop for Poller<E> {
    fn drop(&mut self) {
        self.close();
    }
}

/// Marks the poller dead when its thread ends, however it ends, and hands
/// what is still queued to the workers.
struct Dead<'a, E>(&'a Queue<E>, &'a [Arc<Worker<E>>]);

impl<E> Drop for Dead<'_, E> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.dead = true;
        let jobs = std::mem::take(&mut state.jobs);
        drop(state);
        self.0.exited.notify_all();
        for job in jobs {
            self.1[job.node].hand_over([job]);
        }
    }
}

/// The most jobs the poller's buffer keeps room for between generations.
const KEPT_CAPACITY: usize = 1024;

/// The rounds of a generation not decided yet, each as its inbox's address
/// and the round's id. Hashed with foldhash: the keys are the poller's own
/// (addresses and counters, no user's names), and SipHash cost the client
/// much at many callers (measured in docs/benchmarks.md, history).
type Undecided = HashSet<(usize, RoundId), foldhash::fast::RandomState>;

/// The poller loop: takes every job queued and runs them as one generation,
/// until the manager is gone and the queue is empty.
fn serve<E: std::error::Error + Send + Sync + 'static>(
    queue: &Queue<E>,
    workers: &[Arc<Worker<E>>],
    node_timeout: Duration,
    observer: &Observer,
) {
    let mut jobs = Vec::new();
    let mut held = Held {
        by_node: workers.iter().map(|_| Vec::new()).collect(),
        workers,
    };
    // Kept between generations, as `jobs` is.
    let mut undecided = Undecided::default();
    loop {
        {
            let mut state = queue.state.lock();
            while state.jobs.is_empty() {
                if state.closed {
                    // (What is held goes to the workers.)
                    return;
                }
                state.idle = true;
                if held.any() {
                    // Held behind a worker's own jobs: looked at again each
                    // slice, as the worker catches up.
                    if queue.ready.wait_for(&mut state, WAIT_SLICE).timed_out() {
                        break;
                    }
                } else {
                    queue.ready.wait(&mut state);
                }
            }
            state.idle = false;
            std::mem::swap(&mut jobs, &mut state.jobs);
            queue.queued.store(false, Ordering::Release);
        }
        for job in jobs.drain(..) {
            held.by_node[job.node].push(job);
        }
        // A burst of callers can queue many jobs at once: do not keep its
        // buffer for ever.
        if jobs.capacity() > KEPT_CAPACITY {
            jobs = Vec::new();
        }
        if undecided.capacity() > KEPT_CAPACITY {
            undecided = Undecided::default();
        }
        generation(
            &mut held.by_node,
            &mut undecided,
            workers,
            node_timeout,
            observer,
            &queue.queued,
        );
    }
}

/// Each node's jobs taken from the queue and neither started nor handed
/// over yet, in order: between generations, those held back while the
/// node's worker runs jobs of its own. Whatever is held when the poller
/// thread ends, however it ends, goes to the workers.
struct Held<'a, E> {
    by_node: Vec<Vec<Job<E>>>,
    workers: &'a [Arc<Worker<E>>],
}

impl<E> Held<'_, E> {
    /// Whether any node's jobs are held.
    fn any(&self) -> bool {
        self.by_node.iter().any(|jobs| !jobs.is_empty())
    }
}

impl<E> Drop for Held<'_, E> {
    fn drop(&mut self) {
        for (worker, jobs) in self.workers.iter().zip(&mut self.by_node) {
            worker.hand_over(std::mem::take(jobs));
        }
    }
}

/// Runs one generation: `by_node` holds each node's jobs, in order, and is
/// left holding only the jobs of nodes whose workers run jobs of their own
/// (sent before these, they run first; the worker catches up on a node
/// that owes replies, and the poller takes the node back after that).
fn generation<E: std::error::Error + Send + Sync + 'static>(
    by_node: &mut [Vec<Job<E>>],
    undecided: &mut Undecided,
    workers: &[Arc<Worker<E>>],
    node_timeout: Duration,
    observer: &Observer,
    queued: &AtomicBool,
) {
    let now = Instant::now();
    let mut batches: Vec<(usize, Vec<Job<E>>)> = Vec::with_capacity(by_node.len());
    for (node, jobs) in by_node.iter_mut().enumerate() {
        if jobs.is_empty() {
            continue;
        }
        let worker = &workers[node];
        let before = jobs.len();
        jobs.retain(|job| !job.message.stale(now, job.stale_after));
        let stale = before - jobs.len();
        if stale > 0 {
            worker.stale(stale);
            worker.done(stale);
        }
        if jobs.is_empty() {
            continue;
        }
        let runs_all = jobs
            .iter()
            .all(|job| job.message.request(&job.claim).is_some());
        if worker.failing() || !runs_all {
            worker.hand_over(std::mem::take(jobs));
        } else if !worker.running() {
            batches.push((node, std::mem::take(jobs)));
        }
    }
    if batches.is_empty() {
        return;
    }
    // What the started requests borrow, apart from the jobs, which a batch
    // that cannot start is handed over with.
    let sent: Vec<Vec<(Message, Arc<Claim>)>> = batches
        .iter()
        .map(|(_, batch)| {
            batch
                .iter()
                .map(|job| (job.message, Arc::clone(&job.claim)))
                .collect()
        })
        .collect();
    let sent_at = Instant::now();
    let deadline = later(sent_at, node_timeout);
    let mut started: Vec<(usize, Box<dyn Started<E> + '_>)> = Vec::with_capacity(batches.len());
    undecided.clear();
    for (i, ((node, batch), sent)) in batches.iter_mut().zip(&sent).enumerate() {
        let mut requests: Vec<Request<'_>> = Vec::with_capacity(sent.len());
        requests.extend(
            sent.iter()
                .filter_map(|(message, claim)| message.request(claim)),
        );
        let direct = workers[*node].direct();
        match catch_unwind(AssertUnwindSafe(|| direct.start(&requests))).unwrap_or(None) {
            Some(s) => {
                ManagerCounters::bump(&observer.manager.polled_batches);
                undecided.extend(batch.iter().filter_map(Job::round_key));
                started.push((i, s));
            }
            None => workers[*node].hand_over(std::mem::take(batch)),
        }
    }
    read(
        started,
        &mut batches,
        workers,
        (sent_at, deadline),
        undecided,
        queued,
    );
    for (node, mut batch) in batches {
        workers[node].done(batch.len());
        // The batch's jobs end here; its buffer goes back to the node
        // (emptied by `take` above), so that the node's next jobs do not
        // grow one anew each generation.
        batch.clear();
        debug_assert!(by_node[node].is_empty());
        if batch.capacity() <= KEPT_CAPACITY {
            by_node[node] = batch;
        }
    }
}

/// Reads the answers of the `started` batches (by index into `batches`),
/// delivering each, until every batch was read or a grace passed
/// ([`OwnRound::decided`]) since every round in `undecided` was decided or
/// a quorum of the manager's nodes was read; those still out then are
/// left on their connections, and their callers' rounds count them as
/// timed out at their deadline, as a worker's answer would have been.
/// Once every round is decided, they are left at once when more jobs are
/// `queued`: the node's next batch goes behind them, and reads them first
/// (behind two batches left unread, a node's next goes through its
/// worker). Otherwise the answers still out are read as usual within the
/// grace: they were sent with the others' and are normally in already. So
/// a node that stopped answering holds the poller a grace at most, not
/// every caller a node timeout.
fn read<E: std::error::Error + Send + Sync + 'static>(
    started: Vec<(usize, Box<dyn Started<E> + '_>)>,
    batches: &mut [(usize, Vec<Job<E>>)],
    workers: &[Arc<Worker<E>>],
    (sent_at, deadline): (Instant, Instant),
    undecided: &mut Undecided,
    queued: &AtomicBool,
) {
    let quorum = crate::decide::quorum::quorum(workers.len());
    let mut own = OwnRound::new(sent_at, deadline, started);
    let mut out = Vec::new();
    let mut decided = false;
    let mut read_batches = 0;
    let mut now = Instant::now();
    while let Some(next) = own.next(now) {
        let more = undecided.is_empty() && queued.load(Ordering::Acquire);
        if decided && (now >= own.by() || more) {
            // Nobody waits for the rest: left to be read later where the
            // backend can, read by the end of the grace where not.
            for (i, s) in own.rest() {
                out.clear();
                let left = catch_unwind(AssertUnwindSafe(|| s.detach(own.by(), &mut out)));
                if matches!(left, Ok(true)) {
                    continue;
                }
                let (node, batch) = &batches[i];
                answer(&workers[*node], batch, left.is_ok(), &mut out, undecided);
            }
            break;
        }
        // Once the rounds are decided, jobs queued meanwhile end the
        // grace: the wait looks at the queue every slice.
        let limit = if decided {
            later(now, WAIT_SLICE).min(own.by())
        } else {
            own.by()
        };
        if next.until > now && !crate::runtime::ready::wait(&mut own, next.until, limit) {
            own.not_yet();
            now = Instant::now();
            continue;
        }
        let Some((i, s)) = own.take() else {
            break;
        };
        let by = own.by();
        out.clear();
        let read = catch_unwind(AssertUnwindSafe(|| s.finish(by, &mut out)));
        let (node, batch) = &batches[i];
        answer(&workers[*node], batch, read.is_ok(), &mut out, undecided);
        read_batches += 1;
        now = Instant::now();
        if !decided && (undecided.is_empty() || read_batches >= quorum) {
            decided = true;
            own.decided(now);
        }
    }
}

/// Delivers `out`, the answers a batch got (`read`: the backend did not
/// panic), to the batch's jobs, counting each; the rounds they decided
/// leave `undecided`.
fn answer<E: std::error::Error + Send + Sync + 'static>(
    worker: &Worker<E>,
    batch: &[Job<E>],
    read: bool,
    out: &mut Vec<Result<Response, E>>,
    undecided: &mut Undecided,
) {
    // One reading of the clock for the batch: whether each answer came
    // after its job's deadline.
    let now = Instant::now();
    let mut answers = out.drain(..);
    for job in batch {
        let result = match answers.next() {
            _ if !read => Err(NodeFailure::Panicked),
            Some(Ok(response)) => Ok(response),
            Some(Err(e)) => Err(NodeFailure::Backend(e)),
            None => Err(NodeFailure::Unanswered),
        };
        let result = worker.count_at(now, result, job.stale_after, job.message, &job.claim);
        if job.deliver(result) {
            if let Some(key) = job.round_key() {
                undecided.remove(&key);
            }
        }
    }
}
