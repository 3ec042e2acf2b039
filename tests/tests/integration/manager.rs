//! Behaviour of the blocking manager on in-memory nodes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use redlock_core::backend::{AcquireOutcome, Claim, LockBackend, Token};
use redlock_core::{LockError, NodeFailure, NodeId, Redlock, Resources, Ttl};
use redlock_mock::{ManualClock, MockCluster, MockError, MockNode};

const TTL: Duration = Duration::from_secs(10);

fn manager(cluster: &MockCluster, node_timeout: Duration) -> Redlock<MockNode> {
    Redlock::builder(cluster.backends())
        .node_timeout(node_timeout)
        .retry_delay(Duration::ZERO, Duration::from_millis(2))
        .build()
        .expect("valid config")
}

/// Stores another holder's token under `key` on the given nodes.
fn hold_elsewhere(cluster: &MockCluster, key: &str, nodes: &[usize]) -> Claim {
    let claim = Claim::new(
        Resources::one(key).expect("key"),
        Token::random().expect("entropy"),
    );
    for &i in nodes {
        let outcome = cluster
            .node(i)
            .acquire(&claim, Ttl::new(TTL).expect("ttl"), false);
        assert!(matches!(outcome, Ok(AcquireOutcome::Granted { .. })));
    }
    claim
}

/// Waits until every node ran every queued request: a round returns once a
/// quorum answered, and the rest must not run after a test moves the clock.
fn settle(locks: &Redlock<MockNode>) {
    assert!(
        locks.flush(Duration::from_secs(10)),
        "a node never caught up"
    );
}

#[test]
fn sixteen_threads_on_one_key_never_overlap() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster, Duration::from_secs(1));
    let inside = Arc::new(AtomicUsize::new(0));
    let overlap = Arc::new(AtomicBool::new(false));
    let acquired = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(16));
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let (locks, inside, overlap, acquired, start) = (
                locks.clone(),
                inside.clone(),
                overlap.clone(),
                acquired.clone(),
                start.clone(),
            );
            std::thread::spawn(move || {
                start.wait();
                for _ in 0..25 {
                    let lock = locks
                        .lock_timeout("hot", TTL, Duration::from_secs(60))
                        .expect("acquire within a minute");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlap.store(true, Ordering::SeqCst);
                    }
                    std::hint::spin_loop();
                    std::thread::yield_now();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    acquired.fetch_add(1, Ordering::SeqCst);
                    lock.release().expect("still held");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic");
    }
    settle(&locks);
    assert!(
        !overlap.load(Ordering::SeqCst),
        "two holders were inside at once"
    );
    assert_eq!(acquired.load(Ordering::SeqCst), 16 * 25);
    assert!(cluster.nodes().iter().all(|n| !n.is_locked("hot")));
}

#[test]
fn two_nodes_down_still_acquire() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster, Duration::from_secs(1));
    cluster.node(0).go_down();
    cluster.node(3).go_down();
    let lock = locks.try_lock("two-down", TTL).expect("3 of 5 grant");
    assert!(lock.is_valid());
    let live: Vec<bool> = cluster
        .nodes()
        .iter()
        .map(|n| n.is_locked("two-down"))
        .collect();
    assert_eq!(live, [false, true, true, false, true]);
    lock.release().expect("released on a quorum");
}

#[test]
fn three_nodes_down_is_no_quorum_naming_exactly_them() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster, Duration::from_secs(1));
    for i in [1, 3, 4] {
        cluster.node(i).go_down();
    }
    let err = locks.try_lock("three-down", TTL).expect_err("no quorum");
    let LockError::NoQuorum(report) = &err else {
        panic!("expected NoQuorum, got {err:?}")
    };
    let named: Vec<&str> = report.failed_nodes().map(NodeId::as_str).collect();
    assert_eq!(named, ["mock-1", "mock-3", "mock-4"]);
    for failure in report.failures() {
        assert!(
            matches!(failure.failure(), NodeFailure::Backend(MockError::Down { node }) if node == failure.node())
        );
    }
    assert!(err.to_string().contains("mock-3"), "{err}");
    // The two healthy nodes granted and were released again.
    assert!(cluster.nodes().iter().all(|n| !n.is_locked("three-down")));
}

#[test]
fn frozen_node_does_not_delay_try_lock_when_a_quorum_is_healthy() {
    let cluster = MockCluster::new(5);
    // A long per-node timeout: waiting for the frozen node would show.
    let node_timeout = Duration::from_secs(10);
    let locks = manager(&cluster, node_timeout);
    cluster.node(2).freeze();
    let start = Instant::now();
    let lock = locks
        .try_lock("frozen-one", TTL)
        .expect("4 healthy nodes grant");
    assert!(
        start.elapsed() < node_timeout,
        "try_lock waited {:?}",
        start.elapsed()
    );
    drop(lock);
    cluster.node(2).thaw();
}

/// The README's bound: a frozen node costs a round at most the node
/// timeout, and the failed round's release up to one more.
#[test]
fn frozen_quorum_costs_at_most_two_node_timeouts() {
    let cluster = MockCluster::new(5);
    let node_timeout = Duration::from_millis(100);
    let locks = manager(&cluster, node_timeout);
    for i in 0..3 {
        cluster.node(i).freeze();
    }
    let start = Instant::now();
    let err = locks.try_lock("frozen-three", TTL).expect_err("no quorum");
    let elapsed = start.elapsed();
    // Ten times the stated bound (two node timeouts): fails on a hang,
    // not on noise.
    assert!(elapsed < node_timeout * 20, "took {elapsed:?}");
    assert!(
        elapsed >= node_timeout,
        "cannot know before the timeout: {elapsed:?}"
    );
    let LockError::NoQuorum(report) = &err else {
        panic!("expected NoQuorum, got {err:?}")
    };
    let named: Vec<&str> = report.failed_nodes().map(NodeId::as_str).collect();
    assert_eq!(named, ["mock-0", "mock-1", "mock-2"]);
    assert!(report
        .failures()
        .iter()
        .all(|f| matches!(f.failure(), NodeFailure::TimedOut)));
    for i in 0..3 {
        cluster.node(i).thaw();
    }
}

#[test]
fn failed_round_leaves_no_key_on_any_node() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster, Duration::from_secs(1));
    let other = hold_elsewhere(&cluster, "contended", &[0, 1, 2]);
    for _ in 0..20 {
        let err = locks
            .try_lock("contended", TTL)
            .expect_err("held by another");
        let LockError::Contended(report) = &err else {
            panic!("expected Contended, got {err:?}")
        };
        assert!(report.refused() >= 3);
        assert!(!cluster.node(3).is_locked("contended"));
        assert!(!cluster.node(4).is_locked("contended"));
    }
    for i in 0..3 {
        assert_eq!(
            cluster.node(i).holder("contended").as_ref(),
            Some(other.token())
        );
    }
}

#[test]
fn a_grant_arriving_after_the_round_was_lost_is_released() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster, Duration::from_millis(50));
    hold_elsewhere(&cluster, "late", &[0, 1, 2]);
    let slow = cluster.node(4);
    let ops_before = slow.stats().ops;
    slow.set_latency(Duration::from_millis(300));
    let err = locks.try_lock("late", TTL).expect_err("held by another");
    assert!(matches!(err, LockError::Contended(_)), "{err:?}");
    // The slow node executes our acquire late, then the queued release.
    assert!(
        slow.wait_for_ops(ops_before + 2, Duration::from_secs(10)),
        "slow node never answered"
    );
    assert_eq!(
        slow.stats().granted,
        1,
        "the late acquire was executed and granted"
    );
    assert_eq!(slow.stats().released, 1, "and then released");
    assert!(!slow.is_locked("late"));
}

#[test]
fn release_after_expiry_reports_not_held() {
    let clock = ManualClock::new();
    let cluster = MockCluster::with_clock(5, Arc::new(clock.clone()));
    let locks = Redlock::builder(cluster.backends())
        .clock(Arc::new(clock.clone()))
        .build()
        .expect("config");
    let lock = locks
        .try_lock("expiring", Duration::from_secs(1))
        .expect("free");
    settle(&locks);
    clock.advance(Duration::from_secs(2));
    assert!(!lock.is_valid());
    let err = lock.release().expect_err("expired");
    assert!(
        matches!(err, LockError::NotHeld(ref r) if r.refused() >= 3),
        "{err:?}"
    );
}

#[test]
fn extend_after_expiry_fails_with_not_held_and_does_not_resurrect() {
    let clock = ManualClock::new();
    let cluster = MockCluster::with_clock(5, Arc::new(clock.clone()));
    let locks = Redlock::builder(cluster.backends())
        .clock(Arc::new(clock.clone()))
        .build()
        .expect("config");
    let mut lock = locks
        .try_lock("expiring", Duration::from_secs(1))
        .expect("free");
    settle(&locks);
    clock.advance(Duration::from_millis(1500));
    let err = lock.extend(Duration::from_secs(10)).expect_err("expired");
    assert!(matches!(err, LockError::NotHeld(_)), "{err:?}");
    assert!(!lock.is_valid());
    assert!(cluster.nodes().iter().all(|n| !n.is_locked("expiring")));
}

#[test]
fn extend_recomputes_validity_from_its_own_start() {
    let clock = ManualClock::new();
    let cluster = MockCluster::with_clock(3, Arc::new(clock.clone()));
    let locks = Redlock::builder(cluster.backends())
        .clock(Arc::new(clock.clone()))
        .build()
        .expect("config");
    let mut lock = locks
        .try_lock("extend-me", Duration::from_secs(1))
        .expect("free");
    settle(&locks);
    clock.advance(Duration::from_millis(900));
    assert_eq!(lock.validity(), Duration::from_millis(1000 - 900 - 12));
    let validity = lock.extend(Duration::from_secs(5)).expect("still held");
    // Manual time does not move during the round: ttl - drift exactly.
    assert_eq!(validity, Duration::from_millis(5000 - 52));
    assert_eq!(lock.validity(), validity);
    settle(&locks);
    clock.advance(Duration::from_secs(2));
    assert!(
        cluster.nodes().iter().all(|n| n.is_locked("extend-me")),
        "TTL was reset on the nodes"
    );
}

#[test]
fn slow_quorum_is_validity_exhausted_and_released() {
    let cluster = MockCluster::new(3);
    let locks = manager(&cluster, Duration::from_secs(5));
    for node in cluster.nodes() {
        node.set_latency(Duration::from_millis(60));
    }
    let err = locks
        .try_lock("slow", Duration::from_millis(50))
        .expect_err("too slow");
    assert!(
        matches!(err, LockError::ValidityExhausted { elapsed, .. } if elapsed >= Duration::from_millis(60)),
        "{err:?}"
    );
    assert!(cluster.nodes().iter().all(|n| !n.is_locked("slow")));
}

#[test]
fn lock_waits_for_the_holder_to_release() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster, Duration::from_secs(1));
    let held = locks.try_lock("queue", TTL).expect("free");
    let contender = {
        let locks = locks.clone();
        std::thread::spawn(move || locks.lock_timeout("queue", TTL, Duration::from_secs(30)))
    };
    // Wait until the contender has been refused at least once, then release.
    let node = cluster.node(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.stats().refused == 0 {
        assert!(
            node.wait_for_ops(node.stats().ops + 1, deadline - Instant::now()),
            "contender never tried"
        );
    }
    held.release().expect("held");
    let lock = contender
        .join()
        .expect("no panic")
        .expect("acquired after the release");
    assert!(lock.is_valid());
}

#[test]
fn lock_timeout_gives_up_with_the_last_reason() {
    let clock = ManualClock::new();
    let cluster = MockCluster::with_clock(3, Arc::new(clock.clone()));
    let locks = Redlock::builder(cluster.backends())
        .clock(Arc::new(clock.clone()))
        .retry_delay(Duration::from_millis(100), Duration::from_millis(200))
        .jitter_seed(7)
        .build()
        .expect("config");
    let _held = locks
        .try_lock("busy", Duration::from_secs(600))
        .expect("free");
    let started = redlock_core::Clock::now(&clock);
    let err = locks
        .lock_timeout("busy", TTL, Duration::from_secs(2))
        .expect_err("held");
    let LockError::Timeout { attempts, last } = &err else {
        panic!("expected Timeout, got {err:?}")
    };
    assert!(*attempts >= 10 && *attempts <= 21, "{attempts} attempts");
    assert!(matches!(**last, LockError::Contended(_)));
    assert!(err.is_retryable());
    assert!(redlock_core::Clock::now(&clock) - started >= Duration::from_secs(2));
}

#[test]
fn dropping_the_guard_releases_for_the_next_caller() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster, Duration::from_secs(1));
    for _ in 0..50 {
        let lock = locks
            .try_lock("drop-me", TTL)
            .expect("released by the previous drop");
        drop(lock);
    }
}

#[test]
fn overlapping_multi_resource_locks_exclude_each_other_without_partial_keys() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster, Duration::from_secs(1));
    let ab = locks.try_lock(["a", "b"], TTL).expect("free");
    let err = locks.try_lock(["c", "b"], TTL).expect_err("b is taken");
    assert!(matches!(err, LockError::Contended(_)), "{err:?}");
    assert!(
        cluster.nodes().iter().all(|n| !n.is_locked("c")),
        "no partial keys"
    );
    let c = locks.try_lock(["c", "c"], TTL).expect("c alone is free");
    assert_eq!(c.resources().keys(), ["c"]);
    ab.release().expect("held");
    locks
        .try_lock(["b", "c", "d"], TTL)
        .expect_err("c still held");
    c.release().expect("held");
    let bcd = locks.try_lock(["b", "c", "d"], TTL).expect("all free now");
    assert!(cluster.nodes().iter().filter(|n| n.is_locked("d")).count() >= 3);
    bcd.release().expect("held");
}

#[test]
fn a_panicking_backend_is_contained_and_named() {
    #[derive(Debug)]
    struct Panicky(NodeId);
    impl LockBackend for Panicky {
        type Error = MockError;
        fn node_id(&self) -> &NodeId {
            &self.0
        }
        fn acquire(&self, _: &Claim, _: Ttl, _: bool) -> Result<AcquireOutcome, MockError> {
            panic!("backend bug")
        }
        fn extend(&self, _: &Claim, _: Ttl) -> Result<bool, MockError> {
            panic!("backend bug")
        }
        fn release(&self, _: &Claim) -> Result<bool, MockError> {
            panic!("backend bug")
        }
        fn raise_fence(&self, _: &Claim, _: u64) -> Result<bool, MockError> {
            panic!("backend bug")
        }
    }
    // Printing each panic's backtrace is slow: allow for it.
    let locks = Redlock::builder((0..3).map(|i| Panicky(NodeId::new(format!("p{i}")))))
        .node_timeout(Duration::from_secs(30))
        .build()
        .expect("config");
    for _ in 0..2 {
        let err = locks.try_lock("k", TTL).expect_err("all panic");
        let LockError::NoQuorum(report) = &err else {
            panic!("expected NoQuorum, got {err:?}")
        };
        assert!(report
            .failures()
            .iter()
            .all(|f| matches!(f.failure(), NodeFailure::Panicked)));
    }
}

/// A mock node that records the batches the manager hands it.
#[derive(Debug, Clone)]
struct Batching {
    node: MockNode,
    largest: Arc<AtomicUsize>,
}

impl LockBackend for Batching {
    type Error = MockError;
    fn node_id(&self) -> &NodeId {
        self.node.node_id()
    }
    fn acquire(&self, c: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, MockError> {
        self.node.acquire(c, ttl, fence)
    }
    fn extend(&self, c: &Claim, ttl: Ttl) -> Result<bool, MockError> {
        self.node.extend(c, ttl)
    }
    fn release(&self, c: &Claim) -> Result<bool, MockError> {
        self.node.release(c)
    }
    fn raise_fence(&self, c: &Claim, at_least: u64) -> Result<bool, MockError> {
        self.node.raise_fence(c, at_least)
    }
    fn run_batch(
        &self,
        requests: &[redlock_core::backend::Request<'_>],
        out: &mut Vec<Result<redlock_core::backend::Response, MockError>>,
    ) {
        self.largest.fetch_max(requests.len(), Ordering::SeqCst);
        out.extend(requests.iter().map(|r| r.run_on(&self.node)));
    }
}

#[test]
fn requests_queued_for_a_node_are_handed_over_as_one_batch() {
    let cluster = MockCluster::new(3);
    let largest = Arc::new(AtomicUsize::new(0));
    let nodes = cluster.backends().into_iter().map(|node| {
        node.set_latency(Duration::from_millis(2));
        Batching {
            node,
            largest: largest.clone(),
        }
    });
    let locks = Redlock::builder(nodes)
        .node_timeout(Duration::from_secs(5))
        .build()
        .expect("config");
    std::thread::scope(|s| {
        for t in 0..16 {
            let locks = &locks;
            s.spawn(move || {
                for i in 0..10 {
                    let key = format!("batch-{t}-{i}");
                    let lock = locks
                        .try_lock(key.as_str(), TTL)
                        .expect("distinct keys are free");
                    assert_eq!(
                        lock.resources().keys(),
                        [key.as_str()],
                        "answers went to the wrong caller"
                    );
                    lock.release().expect("held");
                }
            });
        }
    });
    assert!(
        largest.load(Ordering::SeqCst) > 1,
        "the worker never batched"
    );
    assert!(locks.flush(Duration::from_secs(10)));
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn a_lock_is_extended_and_released_only_where_it_was_not_refused() {
    let cluster = MockCluster::new(3);
    // Another process holds the key on node 2 alone.
    let _theirs = hold_elsewhere(&cluster, "k", &[2]);
    // Node 2's refusal comes first, so it is in the winning round's tally.
    for i in 0..2 {
        cluster.node(i).set_latency(Duration::from_millis(20));
    }
    let locks = manager(&cluster, Duration::from_secs(2));
    let mut lock = locks
        .try_lock("k", Duration::from_secs(30))
        .expect("a quorum");
    assert!(locks.flush(Duration::from_secs(5)));
    let before: Vec<_> = (0..3).map(|i| cluster.node(i).stats()).collect();
    lock.extend(Duration::from_secs(30)).expect("extended");
    lock.release().expect("released");
    assert!(locks.flush(Duration::from_secs(5)));
    let after: Vec<_> = (0..3).map(|i| cluster.node(i).stats()).collect();
    // Nodes 0 and 1 got the extend and the release; node 2, which refused
    // the lock and never held it, neither.
    for i in 0..2 {
        assert_eq!(after[i].extended - before[i].extended, 1, "node {i}");
        assert_eq!(after[i].released - before[i].released, 1, "node {i}");
    }
    assert_eq!(after[2].ops, before[2].ops, "node 2 was sent something");
    assert!(
        cluster.node(2).is_locked("k"),
        "the squatter's key is untouched"
    );
    assert!(!cluster.node(0).is_locked("k") && !cluster.node(1).is_locked("k"));
}
