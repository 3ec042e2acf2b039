//! With several callers driving, a manager whose backends start batches
//! (`LockBackend::starts_batches`) hands their rounds to one poller thread,
//! which sends each node every request queued for it in one batch and
//! reads the answers of all nodes; a node whose last request failed goes
//! through its worker, and a frozen one holds no caller beyond the others'
//! decision.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_core::backend::{AcquireOutcome, Claim, LockBackend, Request, Response, Started};
use redlock_core::{NodeId, Redlock, Ttl};
use redlock_mock::{MockCluster, MockError, MockNode};

const TTL: Duration = Duration::from_secs(10);

/// A mock node that starts batches: counts the requests its worker thread
/// ran, the batches started and their requests; `frozen` makes started
/// batches never answer (and the worker's calls block, through the node's
/// freeze).
#[derive(Clone)]
struct Batching {
    node: MockNode,
    on_worker: Arc<AtomicUsize>,
    batches: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    /// The most requests one batch carried.
    largest: Arc<AtomicUsize>,
    frozen: Arc<AtomicBool>,
}

impl Batching {
    fn new(node: MockNode) -> Self {
        Batching {
            node,
            on_worker: Arc::default(),
            batches: Arc::default(),
            requests: Arc::default(),
            largest: Arc::default(),
            frozen: Arc::default(),
        }
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

impl LockBackend for Batching {
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
        self.batches.fetch_add(1, Ordering::SeqCst);
        self.requests.fetch_add(requests.len(), Ordering::SeqCst);
        self.largest.fetch_max(requests.len(), Ordering::SeqCst);
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
        true
    }
}

fn nodes(n: usize) -> (MockCluster, Vec<Batching>) {
    let cluster = MockCluster::new(n);
    let nodes = cluster.backends().into_iter().map(Batching::new).collect();
    (cluster, nodes)
}

fn sum(nodes: &[Batching], of: impl Fn(&Batching) -> &AtomicUsize) -> usize {
    nodes.iter().map(|n| of(n).load(Ordering::SeqCst)).sum()
}

/// `threads` callers of `locks`, each locking and releasing its own key
/// `cycles` times; every lock must be granted.
fn cycle(locks: &Redlock<Batching>, threads: usize, cycles: usize) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in 0..cycles {
                    let lock = locks
                        .try_lock(format!("key-{t}"), TTL)
                        .unwrap_or_else(|e| panic!("caller {t}, cycle {i}: {e}"));
                    lock.release()
                        .unwrap_or_else(|e| panic!("caller {t}, cycle {i}: {e}"));
                }
            });
        }
    });
}

#[test]
fn several_callers_rounds_go_through_the_poller_and_wake_no_node_worker() {
    let (cluster, nodes) = nodes(3);
    // Without own rounds, every round goes to the poller, whether its
    // caller is alone at the time or not.
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .own_rounds(false)
        .build()
        .expect("config");
    cycle(&locks, 8, 50);
    assert!(locks.flush(Duration::from_secs(10)));
    let stats = locks.stats().manager;
    // No node failed, so no worker ran a request; every node ran every
    // request, in the poller's batches.
    assert_eq!(sum(&nodes, |n| &n.on_worker), 0, "a worker ran a request");
    let batches = u64::try_from(sum(&nodes, |n| &n.batches)).expect("small");
    assert_eq!(stats.polled_batches, batches, "{stats:?}");
    assert_eq!(stats.direct_rounds, 0, "{stats:?}");
    let requests = sum(&nodes, |n| &n.requests);
    assert_eq!(requests, 3 * 8 * 50 * 2, "every request, once per node");
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn lone_callers_send_their_own_rounds_and_several_use_the_poller_without_a_worker() {
    let (cluster, nodes) = nodes(3);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .build()
        .expect("config");
    cycle(&locks, 8, 100);
    assert!(locks.flush(Duration::from_secs(10)));
    // Each round went to the nodes either as a lone caller's own batches
    // of one or through the poller: never through a worker.
    assert_eq!(sum(&nodes, |n| &n.on_worker), 0, "a worker ran a request");
    let requests = sum(&nodes, |n| &n.requests);
    assert_eq!(requests, 3 * 8 * 100 * 2, "every request, once per node");
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn with_the_poller_off_several_callers_rounds_go_through_the_workers() {
    let (cluster, nodes) = nodes(3);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .own_rounds(false)
        .poller(false)
        .build()
        .expect("config");
    cycle(&locks, 4, 20);
    // A release returns at a quorum: the last node runs it after.
    assert!(locks.flush(Duration::from_secs(10)));
    assert_eq!(locks.stats().manager.polled_batches, 0);
    assert_eq!(sum(&nodes, |n| &n.batches), 0, "a request was started");
    assert_eq!(sum(&nodes, |n| &n.on_worker), 3 * 4 * 20 * 2);
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn a_node_frozen_under_the_poller_holds_no_caller_beyond_the_others_decision() {
    let (cluster, nodes) = nodes(5);
    // A frozen node answers nothing for the whole node timeout: a round
    // that waited for it would take 10 s.
    let timeout = Duration::from_secs(10);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(timeout)
        .own_rounds(false)
        .build()
        .expect("config");
    cycle(&locks, 4, 10);
    let before = nodes[1].batches.load(Ordering::SeqCst);
    nodes[1].frozen.store(true, Ordering::SeqCst);
    nodes[1].node.freeze();
    let started = Instant::now();
    let slowest = std::thread::scope(|s| {
        let callers: Vec<_> = (0..4)
            .map(|t| {
                let locks = &locks;
                s.spawn(move || {
                    let mut slowest = Duration::ZERO;
                    for i in 0..5 {
                        let began = Instant::now();
                        let lock = locks
                            .try_lock(format!("frozen-{t}"), TTL)
                            .unwrap_or_else(|e| panic!("caller {t}, cycle {i}: {e}"));
                        lock.release()
                            .unwrap_or_else(|e| panic!("caller {t}, cycle {i}: {e}"));
                        slowest = slowest.max(began.elapsed());
                    }
                    slowest
                })
            })
            .collect();
        callers
            .into_iter()
            .map(|c| c.join().expect("no panic"))
            .max()
    });
    // Each lock and release was decided by the four others: a frozen node
    // that held a round would have cost it the node timeout.
    let slowest = slowest.expect("four callers");
    assert!(slowest < timeout / 2, "a lock and release took {slowest:?}");
    assert!(started.elapsed() < timeout, "took {:?}", started.elapsed());
    // The node's first batch went silent; after that its requests went to
    // its worker (blocked by the freeze) and no longer to the poller.
    assert_eq!(nodes[1].batches.load(Ordering::SeqCst) - before, 1);
    nodes[1].frozen.store(false, Ordering::SeqCst);
    nodes[1].node.thaw();
    assert!(locks.flush(Duration::from_secs(20)), "the node caught up");
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn a_round_that_waits_for_a_frozen_node_holds_the_poller_only_a_grace() {
    let (cluster, nodes) = nodes(3);
    let timeout = Duration::from_secs(4);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(timeout)
        .own_rounds(false)
        .build()
        .expect("config");
    // Another manager holds "split" on node 0 only: an acquire of it gets
    // one grant and one refusal from nodes 0 and 1, and needs node 2.
    let theirs = Claim::new(
        redlock_core::Resources::one("split").expect("key"),
        redlock_core::backend::Token::random().expect("entropy"),
    );
    assert!(cluster
        .node(0)
        .acquire(&theirs, Ttl::new(TTL).expect("ttl"), false)
        .expect("up")
        .is_granted());
    cycle(&locks, 2, 5);
    let before = nodes[2].batches.load(Ordering::SeqCst);
    nodes[2].frozen.store(true, Ordering::SeqCst);
    nodes[2].node.freeze();
    std::thread::scope(|s| {
        let split = s.spawn(|| locks.try_lock("split", TTL));
        // The poller sent the split round's batch to the frozen node, and
        // waits for its answers.
        let since = Instant::now();
        while nodes[2].batches.load(Ordering::SeqCst) == before {
            assert!(since.elapsed() < Duration::from_secs(30), "never sent");
            std::thread::yield_now();
        }
        let others: Vec<_> = (0..2)
            .map(|t| {
                let locks = &locks;
                s.spawn(move || {
                    let mut slowest = Duration::ZERO;
                    for i in 0..20 {
                        let began = Instant::now();
                        let lock = locks
                            .try_lock(format!("other-{t}"), TTL)
                            .unwrap_or_else(|e| panic!("caller {t}, cycle {i}: {e}"));
                        lock.release()
                            .unwrap_or_else(|e| panic!("caller {t}, cycle {i}: {e}"));
                        slowest = slowest.max(began.elapsed());
                    }
                    slowest
                })
            })
            .collect();
        for other in others {
            let slowest = other.join().expect("no panic");
            // A poller that waited for the frozen node's answer would have
            // held these rounds for the node timeout.
            assert!(slowest < timeout / 2, "a lock and release took {slowest:?}");
        }
        assert!(split.join().expect("no panic").is_err(), "held on node 0");
    });
    nodes[2].frozen.store(false, Ordering::SeqCst);
    nodes[2].node.thaw();
    assert!(locks.flush(Duration::from_secs(10)));
}

#[test]
fn the_releases_of_dropped_guards_run_through_the_poller_before_the_manager_is_gone() {
    let (cluster, nodes) = nodes(3);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .own_rounds(false)
        .build()
        .expect("config");
    let guards: Vec<_> = (0..8)
        .map(|i| locks.try_lock(format!("dropped-{i}"), TTL).expect("free"))
        .collect();
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 8));
    // The guards' releases are queued for the poller without waiting; the
    // manager's last handle waits for the poller, then the workers.
    drop(guards);
    drop(locks);
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
    assert_eq!(sum(&nodes, |n| &n.on_worker), 0, "a worker ran a request");
}
