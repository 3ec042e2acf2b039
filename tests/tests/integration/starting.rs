//! A mock node that starts requests (`LockBackend::start`) the way the
//! Redis backend does, for the tests of a lone caller's own rounds
//! (`direct.rs`) and of the poller (`poller.rs`): it counts what its worker
//! thread ran and what was started, logs what it ran in order, can go
//! silent, and can hold the requests on one key at a gate the test opens.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use redlock_core::backend::{AcquireOutcome, Claim, LockBackend, Request, Response, Started};
use redlock_core::{NodeId, Ttl};
use redlock_mock::{MockCluster, MockError, MockNode};

/// A mock node that can start requests: one at a time, or, with
/// `batches`, several at once (`LockBackend::starts_batches`). Counts the
/// requests its worker thread ran, the starts and the requests started,
/// and the most one start carried; `frozen` makes started requests never
/// answer (with the node's own freeze, the worker's calls block too);
/// `refuses` makes it start nothing, so that its requests go through its
/// worker.
#[derive(Clone)]
pub(crate) struct Starting {
    pub(crate) node: MockNode,
    batches: bool,
    pub(crate) on_worker: Arc<AtomicUsize>,
    pub(crate) started: Arc<AtomicUsize>,
    pub(crate) requests: Arc<AtomicUsize>,
    pub(crate) frozen: Arc<AtomicBool>,
    pub(crate) refuses: Arc<AtomicBool>,
    /// Every request the node ran, in order: its lock's first key and
    /// what it was.
    pub(crate) log: Arc<Mutex<Vec<(String, &'static str)>>>,
    /// A start that carries a request on this key waits at the gate
    /// before it runs anything: whoever started it is held there.
    pub(crate) hold: Option<(String, Arc<Gate>)>,
    /// Requests on this key, started, are answered (run) only once the
    /// gate opens.
    pub(crate) late: Option<(String, Arc<Gate>)>,
    /// A blocking call (on the node's worker) on this key waits at the
    /// gate before it runs.
    pub(crate) stalls: Option<(String, Arc<Gate>)>,
}

/// The longest anything waits at a [`Gate`] the test never opens (the
/// test failed): it then goes on, so that nothing hangs.
const GATE_CAP: Duration = Duration::from_secs(60);

/// A gate a test opens: what reaches it waits until then, and the test
/// can wait until something has reached it.
#[derive(Default)]
pub(crate) struct Gate {
    /// Whether it is open, and how many times it was reached.
    state: Mutex<(bool, usize)>,
    changed: Condvar,
}

impl Gate {
    pub(crate) fn open(&self) {
        self.state.lock().0 = true;
        self.changed.notify_all();
    }

    /// How many times it was reached.
    pub(crate) fn reached(&self) -> usize {
        self.state.lock().1
    }

    fn reach(&self) {
        self.state.lock().1 += 1;
        self.changed.notify_all();
    }

    /// Waits until it opens or `until` passes; whether it is open.
    fn wait_open(&self, until: Instant) -> bool {
        let mut state = self.state.lock();
        while !state.0 {
            if self.changed.wait_until(&mut state, until).timed_out() {
                break;
            }
        }
        state.0
    }
}

/// What `r` is and its lock (`None`: a request this mock does not know).
fn what<'a>(r: &Request<'a>) -> Option<(&'static str, &'a Claim)> {
    Some(match *r {
        Request::Acquire { claim, .. } => ("acquire", claim),
        Request::Extend { claim, .. } => ("extend", claim),
        Request::Release { claim } => ("release", claim),
        Request::RaiseFence { claim, .. } => ("raise", claim),
        _ => return None,
    })
}

/// Whether one of `requests` is on `key`.
fn on_key(requests: &[Request<'_>], key: &str) -> bool {
    requests
        .iter()
        .filter_map(what)
        .any(|(_, claim)| claim.keys().first().is_some_and(|k| k == key))
}

impl Starting {
    pub(crate) fn new(node: MockNode, batches: bool) -> Self {
        Starting {
            node,
            batches,
            on_worker: Arc::default(),
            started: Arc::default(),
            requests: Arc::default(),
            frozen: Arc::default(),
            refuses: Arc::default(),
            log: Arc::default(),
            hold: None,
            late: None,
            stalls: None,
        }
    }

    /// Whether the node ran a request `kind` on `key`.
    pub(crate) fn ran(&self, key: &str, kind: &str) -> bool {
        self.log.lock().iter().any(|(k, w)| k == key && *w == kind)
    }

    /// Runs `run` on the node as request `kind` of `claim`, logged.
    fn logged<T>(&self, kind: &'static str, claim: &Claim, run: impl FnOnce() -> T) -> T {
        let mut log = self.log.lock();
        let key = claim.keys().first().cloned().unwrap_or_default();
        let done = run();
        log.push((key, kind));
        done
    }

    /// Runs a started request on the node, logged.
    fn run(&self, r: Request<'_>) -> Result<Response, MockError> {
        match what(&r) {
            Some((kind, claim)) => self.logged(kind, claim, || r.run_on(&self.node)),
            None => r.run_on(&self.node),
        }
    }

    /// Stops answering what is started, and freezes the node.
    pub(crate) fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
        self.node.freeze();
    }

    /// Answers again.
    pub(crate) fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
        self.node.thaw();
    }

    /// A blocking call on `claim`: counted as the worker's, held at the
    /// `stalls` gate when it is on that key.
    fn worker(&self, claim: &Claim) {
        if let Some((key, gate)) = &self.stalls {
            if claim.keys().first().is_some_and(|k| k == key) {
                gate.reach();
                gate.wait_open(Instant::now() + GATE_CAP);
            }
        }
        let name = std::thread::current().name().map(str::to_owned);
        assert!(
            name.as_deref()
                .is_some_and(|n| n.starts_with("redlock-node-")),
            "a blocking call came from {name:?}, not from a node worker"
        );
        self.on_worker.fetch_add(1, Ordering::SeqCst);
    }
}

/// `n` mock nodes, each wrapped to start requests (several at once with
/// `batches`).
pub(crate) fn nodes(n: usize, batches: bool) -> (MockCluster, Vec<Starting>) {
    let cluster = MockCluster::new(n);
    let nodes = cluster
        .backends()
        .into_iter()
        .map(|node| Starting::new(node, batches))
        .collect();
    (cluster, nodes)
}

/// The sum of one counter over `nodes`.
pub(crate) fn sum(nodes: &[Starting], of: impl Fn(&Starting) -> &AtomicUsize) -> usize {
    nodes.iter().map(|n| of(n).load(Ordering::SeqCst)).sum()
}

/// Answers already in.
struct Ready(Vec<Result<Response, MockError>>);

impl Started<MockError> for Ready {
    fn finish(self: Box<Self>, _: Instant, out: &mut Vec<Result<Response, MockError>>) {
        out.extend(self.0);
    }
}

/// Requests sent to a node that stopped answering.
struct Silent(NodeId, usize);

impl Started<MockError> for Silent {
    fn wait(&mut self, until: Instant) -> bool {
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
        false
    }
    fn finish(self: Box<Self>, deadline: Instant, out: &mut Vec<Result<Response, MockError>>) {
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        out.extend((0..self.1).map(|_| {
            Err(MockError::Down {
                node: self.0.clone(),
            })
        }));
    }
}

/// Requests that run, and answer, once a gate opens (whatever the
/// deadline: the test holds the caller there).
struct Late<'a> {
    node: &'a Starting,
    requests: Vec<Request<'a>>,
    gate: Arc<Gate>,
}

impl Started<MockError> for Late<'_> {
    fn wait(&mut self, until: Instant) -> bool {
        self.gate.wait_open(until)
    }
    fn finish(self: Box<Self>, _: Instant, out: &mut Vec<Result<Response, MockError>>) {
        self.gate.wait_open(Instant::now() + GATE_CAP);
        out.extend(self.requests.iter().map(|r| self.node.run(*r)));
    }
}

impl LockBackend for Starting {
    type Error = MockError;
    fn node_id(&self) -> &NodeId {
        self.node.node_id()
    }
    fn acquire(&self, c: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, MockError> {
        self.worker(c);
        self.logged("acquire", c, || self.node.acquire(c, ttl, fence))
    }
    fn extend(&self, c: &Claim, ttl: Ttl) -> Result<bool, MockError> {
        self.worker(c);
        self.logged("extend", c, || self.node.extend(c, ttl))
    }
    fn release(&self, c: &Claim) -> Result<bool, MockError> {
        self.worker(c);
        self.logged("release", c, || self.node.release(c))
    }
    fn raise_fence(&self, c: &Claim, at_least: u64) -> Result<bool, MockError> {
        self.worker(c);
        self.logged("raise", c, || self.node.raise_fence(c, at_least))
    }
    fn start<'a>(&'a self, requests: &[Request<'a>]) -> Option<Box<dyn Started<MockError> + 'a>> {
        if requests.len() > 1 && !self.batches || self.refuses.load(Ordering::SeqCst) {
            return None;
        }
        if let Some((key, gate)) = &self.hold {
            if on_key(requests, key) {
                gate.reach();
                gate.wait_open(Instant::now() + GATE_CAP);
            }
        }
        self.started.fetch_add(1, Ordering::SeqCst);
        self.requests.fetch_add(requests.len(), Ordering::SeqCst);
        if self.frozen.load(Ordering::SeqCst) {
            return Some(Box::new(Silent(
                self.node.node_id().clone(),
                requests.len(),
            )));
        }
        if let Some((key, gate)) = &self.late {
            if on_key(requests, key) {
                gate.reach();
                return Some(Box::new(Late {
                    node: self,
                    requests: requests.to_vec(),
                    gate: Arc::clone(gate),
                }));
            }
        }
        Some(Box::new(Ready(
            requests.iter().map(|r| self.run(*r)).collect(),
        )))
    }
    fn starts_batches(&self) -> bool {
        self.batches
    }
}
