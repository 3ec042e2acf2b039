//! A caller alone on its manager sends its rounds to the nodes itself
//! (`LockBackend::start`) and reads the answers, waking no node worker; with
//! other callers driving, the workers take the rounds (and batch them); a
//! node that froze since its last answer does not hold a lone caller's round
//! beyond the others' decision.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redlock_core::backend::{Claim, LockBackend, Token};
use redlock_core::{Redlock, Resources, Ttl};
use redlock_mock::MockCluster;

use crate::starting::{nodes, sum};

const TTL: Duration = Duration::from_secs(10);

/// A manager over `nodes` with `timeout` per node.
fn manager<B: LockBackend + 'static>(
    nodes: impl IntoIterator<Item = B>,
    timeout: Duration,
) -> Redlock<B> {
    Redlock::builder(nodes)
        .node_timeout(timeout)
        .build()
        .expect("config")
}

#[test]
fn a_lone_callers_rounds_wake_no_node_worker() {
    let (cluster, nodes) = nodes(3, false);
    let locks = manager(nodes.clone(), Duration::from_secs(5));
    let mut lock = locks.try_lock("k", TTL).expect("free");
    lock.extend(TTL).expect("held");
    lock.release().expect("held");
    // Acquire, extend and release: three rounds on three nodes, all sent
    // and answered on this thread; every node ran all three by the time
    // release returned.
    assert_eq!(sum(&nodes, |n| &n.on_worker), 0, "a worker ran a request");
    assert_eq!(sum(&nodes, |n| &n.started), 9);
    assert_eq!(locks.stats().manager.direct_rounds, 3);
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn with_another_caller_driving_the_workers_take_the_rounds() {
    let (cluster, nodes) = nodes(3, false);
    let locks = manager(nodes.clone(), Duration::from_secs(5));
    // Another process holds "busy": a caller of this manager waits for it.
    let theirs = Claim::new(
        Resources::one("busy").expect("key"),
        Token::random().expect("entropy"),
    );
    for node in cluster.nodes() {
        assert!(node
            .acquire(&theirs, Ttl::new(TTL).expect("ttl"), false)
            .expect("up")
            .is_granted());
    }
    std::thread::scope(|s| {
        let waiter = s.spawn(|| locks.lock_timeout("busy", TTL, Duration::from_millis(500)));
        // Once the waiter's first round is out, it drives until it gives up.
        while sum(&nodes, |n| &n.started) + sum(&nodes, |n| &n.on_worker) < 3 {
            std::thread::yield_now();
        }
        let before = sum(&nodes, |n| &n.on_worker);
        locks
            .try_lock("other", TTL)
            .expect("free")
            .release()
            .expect("held");
        assert!(
            sum(&nodes, |n| &n.on_worker) >= before + 2 * 2,
            "the workers did not take the rounds of a caller that was not alone"
        );
        assert!(waiter.join().expect("no panic").is_err(), "still held");
    });
}

#[test]
fn a_node_frozen_since_its_last_answer_holds_a_lone_caller_only_until_the_others_decide() {
    let (_cluster, nodes) = nodes(5, false);
    // A frozen node answers nothing for the whole node timeout: a round
    // that waited for it would take 10 s.
    let timeout = Duration::from_secs(10);
    let locks = manager(nodes.clone(), timeout);
    locks
        .try_lock("k", TTL)
        .expect("free")
        .release()
        .expect("held");
    nodes[1].freeze();
    for round in 0..3 {
        let started = Instant::now();
        let lock = locks.try_lock("k", TTL).expect("four nodes grant");
        lock.release().expect("released on four");
        let took = started.elapsed();
        assert!(
            took < timeout / 2,
            "round {round}: a lock and release took {took:?}"
        );
    }
    // The first round found the node silent; after that its requests went
    // to its worker (blocked by the freeze) and no longer to the caller.
    assert_eq!(nodes[1].started.load(Ordering::SeqCst), 1 + 2);
    nodes[1].thaw();
    assert!(locks.flush(Duration::from_secs(20)), "the node caught up");
}

#[test]
fn a_round_the_workers_decide_does_not_wait_for_the_callers_own_frozen_node() {
    let (_cluster, nodes) = nodes(5, false);
    // Two nodes answer through their workers, the caller reads two itself,
    // and the fifth, which it also reads itself, froze: only the workers'
    // answers make the quorum. A caller that waited for its own nodes'
    // answers alone would take the node timeout.
    let timeout = Duration::from_secs(10);
    let locks = manager(nodes.clone(), timeout);
    for node in &nodes[..2] {
        node.refuses.store(true, Ordering::SeqCst);
    }
    nodes[4].freeze();
    let started = Instant::now();
    let lock = locks.try_lock("k", TTL).expect("four nodes grant");
    let took = started.elapsed();
    assert!(took < timeout / 2, "the lock took {took:?}");
    assert_eq!(sum(&nodes[..2], |n| &n.on_worker), 2, "through the workers");
    assert_eq!(
        nodes[4].started.load(Ordering::SeqCst),
        1,
        "read by the caller"
    );
    drop(lock);
    nodes[4].thaw();
    assert!(locks.flush(Duration::from_secs(20)), "the node caught up");
}

#[test]
fn mock_nodes_serve_a_lone_caller_themselves_and_a_frozen_one_through_its_worker() {
    let cluster = MockCluster::new(5);
    let timeout = Duration::from_secs(10);
    let locks = manager(cluster.backends(), timeout);
    locks
        .try_lock("k", TTL)
        .expect("free")
        .release()
        .expect("held");
    assert_eq!(locks.stats().manager.direct_rounds, 2);
    // Every node ran both requests by the time release returned.
    assert!(cluster.nodes().iter().all(|n| n.stats().ops == 2));
    cluster.node(3).freeze();
    let started = Instant::now();
    let lock = locks.try_lock("k", TTL).expect("four nodes grant");
    lock.release().expect("released on four");
    let took = started.elapsed();
    assert!(took < timeout / 2, "a lock and release took {took:?}");
    assert_eq!(locks.stats().manager.direct_rounds, 4);
    cluster.node(3).thaw();
    assert!(locks.flush(Duration::from_secs(20)), "the node caught up");
    assert_eq!(cluster.node(3).live_keys(), 0);
}

/// Drops a guard and at once locks the key again, `times` times: on one
/// node, a release that reached the node after the next acquire would
/// refuse it.
fn drop_then_lock_again<B: LockBackend + 'static>(locks: &Redlock<B>, key: &str, times: usize) {
    for i in 0..times {
        let lock = locks
            .try_lock(key, TTL)
            .unwrap_or_else(|e| panic!("cycle {i}: the dropped guard's key was still held: {e}"));
        drop(lock);
    }
    assert!(locks.flush(Duration::from_secs(10)));
}

#[test]
fn a_dropped_guards_release_reaches_a_mock_node_before_the_next_lone_callers_acquire() {
    let cluster = MockCluster::new(1);
    let locks = manager(cluster.backends(), Duration::from_secs(5));
    drop_then_lock_again(&locks, "k", 2000);
    // The drops' releases went through the worker; acquires after them
    // went to the node itself once the worker had run them (on Redis the
    // next acquire is always sooner than the release's round trip).
    assert!(locks.stats().manager.direct_rounds > 0);
}

#[test]
fn a_dropped_guards_release_reaches_a_redis_master_before_the_next_lone_callers_acquire() {
    let cluster = crate::redis_common::cluster(1);
    let locks = crate::redis_common::manager(&cluster, Duration::from_secs(5));
    drop_then_lock_again(&locks, &crate::redis_common::key("drop-again"), 500);
}

#[test]
fn with_own_rounds_off_a_lone_callers_rounds_go_through_the_workers() {
    let (_cluster, nodes) = nodes(3, false);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .own_rounds(false)
        .build()
        .expect("config");
    locks
        .try_lock("k", TTL)
        .expect("free")
        .release()
        .expect("held");
    assert!(locks.flush(Duration::from_secs(10)));
    assert_eq!(sum(&nodes, |n| &n.started), 0, "a caller started a request");
    assert_eq!(sum(&nodes, |n| &n.on_worker), 6);
    assert_eq!(locks.stats().manager.direct_rounds, 0);
}
