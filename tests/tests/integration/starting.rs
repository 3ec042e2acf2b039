//! A mock node that starts requests (`LockBackend::start`) the way the
//! Redis backend does, for the tests of a lone caller's own rounds
//! (`direct.rs`) and of the poller (`poller.rs`): it counts what its worker
//! thread ran and what was started, and can go silent.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

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

    fn worker(&self) {
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

impl LockBackend for Starting {
    type Error = MockError;
    fn node_id(&self) -> &NodeId {
        self.node.node_id()
    }
    fn acquire(&self, c: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, MockError> {
        self.worker();
        self.node.acquire(c, ttl, fence)
    }
    fn extend(&self, c: &Claim, ttl: Ttl) -> Result<bool, MockError> {
        self.worker();
        self.node.extend(c, ttl)
    }
    fn release(&self, c: &Claim) -> Result<bool, MockError> {
        self.worker();
        self.node.release(c)
    }
    fn raise_fence(&self, c: &Claim, at_least: u64) -> Result<bool, MockError> {
        self.worker();
        self.node.raise_fence(c, at_least)
    }
    fn start<'a>(&'a self, requests: &[Request<'a>]) -> Option<Box<dyn Started<MockError> + 'a>> {
        if requests.len() > 1 && !self.batches || self.refuses.load(Ordering::SeqCst) {
            return None;
        }
        self.started.fetch_add(1, Ordering::SeqCst);
        self.requests.fetch_add(requests.len(), Ordering::SeqCst);
        if self.frozen.load(Ordering::SeqCst) {
            return Some(Box::new(Silent(
                self.node.node_id().clone(),
                requests.len(),
            )));
        }
        Some(Box::new(Ready(
            requests.iter().map(|r| r.run_on(&self.node)).collect(),
        )))
    }
    fn starts_batches(&self) -> bool {
        self.batches
    }
}
