//! Lock lifetime on in-memory nodes: automatic extension with a lost-lock
//! signal, scoped locking, multi-resource exclusion, fencing tokens.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_core::backend::{AcquireOutcome, Claim, LockBackend, Token};
use redlock_core::{KeepAlive, LockError, LostReason, Redlock, Resources, Ttl};
use redlock_mock::{MockCluster, MockNode};
use redlock_tests::harness::wait_until;

fn manager(cluster: &MockCluster) -> Redlock<MockNode> {
    Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_millis(100))
        .retry_delay(Duration::ZERO, Duration::from_millis(2))
        .build()
        .expect("valid config")
}

#[test]
fn with_lock_keeps_the_lock_for_three_ttls() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let other = manager(&cluster);
    let ttl = Duration::from_millis(200);
    let value = locks
        .with_lock("scoped", ttl, |lock| {
            let until = Instant::now() + ttl * 3;
            while Instant::now() < until {
                assert!(
                    matches!(other.try_lock("scoped", ttl), Err(LockError::Contended(_))),
                    "another client took a kept lock"
                );
                lock.ensure_held().expect("kept alive");
                std::thread::sleep(Duration::from_millis(10));
            }
            7
        })
        .expect("held throughout");
    assert_eq!(value, 7);
    other
        .try_lock("scoped", ttl)
        .expect("released after the closure")
        .release()
        .expect("held");
}

#[test]
fn frozen_quorum_during_with_lock_is_reported_within_one_extension_period() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let ttl = Duration::from_millis(300);
    let (tx, rx) = crossbeam_channel::bounded(1);
    let policy = KeepAlive::new().on_lost(move |reason| {
        let _ = tx.send(reason);
    });
    let result = locks.with_lock_kept("freeze", ttl, policy, |lock| {
        lock.ensure_held().expect("fresh");
        let healthy = cluster.node(4);
        let extended_before = healthy.stats().extended;
        for i in 0..3 {
            cluster.node(i).freeze();
        }
        // The keeper reports the failed extension (the callback fires once).
        let reason = rx
            .recv_timeout(ttl * 10)
            .expect("the loss was never noticed");
        assert_eq!(reason, LostReason::ExtendFailed);
        let err = lock.ensure_held().expect_err("lost");
        assert!(
            matches!(
                err,
                LockError::Lost {
                    reason: LostReason::ExtendFailed,
                    cause: Some(_)
                }
            ),
            "{err}"
        );
        // The first extension after the freeze noticed it: one extension
        // period at most (the healthy node saw exactly one more extend).
        // The frozen nodes' timeouts decided that round, not the healthy
        // node's answer: wait for its extend to have run (no flush while
        // three nodes are frozen).
        wait_until(Duration::from_secs(5), "the healthy node's extend", || {
            healthy.stats().extended > extended_before
        })
        .expect("the healthy node ran the extend");
        assert_eq!(
            healthy.stats().extended,
            extended_before + 1,
            "the loss was not noticed at the first extension"
        );
        "side effect skipped"
    });
    assert!(matches!(result, Err(LockError::Lost { .. })), "{result:?}");
    assert!(rx.try_recv().is_err(), "notified more than once");
    for i in 0..3 {
        cluster.node(i).thaw();
    }
}

#[test]
fn the_hold_bound_ends_extension_and_marks_the_lock_lost() {
    let cluster = MockCluster::new(3);
    let locks = manager(&cluster);
    let ttl = Duration::from_millis(150);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let policy = KeepAlive::new()
        .max_hold(Duration::from_millis(250))
        .on_lost(move |reason| {
            assert_eq!(reason, LostReason::HoldLimit);
            counter.fetch_add(1, Ordering::SeqCst);
        });
    let started = Instant::now();
    let result = locks.with_lock_kept("bounded", ttl, policy, |lock| {
        while !lock.is_lost() {
            assert!(started.elapsed() < Duration::from_secs(10), "never lost");
            std::thread::sleep(Duration::from_millis(5));
        }
        // It was extended at least once before the bound stopped it.
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "lost before the bound: {:?}",
            started.elapsed()
        );
    });
    assert!(
        matches!(
            result,
            Err(LockError::Lost {
                reason: LostReason::HoldLimit,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn the_extension_count_bound_marks_the_lock_lost() {
    let cluster = MockCluster::new(3);
    let locks = manager(&cluster);
    let policy = KeepAlive::new().max_extensions(2);
    let result = locks.with_lock_kept("counted", Duration::from_millis(90), policy, |lock| {
        while !lock.is_lost() {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    assert!(
        matches!(
            result,
            Err(LockError::Lost {
                reason: LostReason::ExtensionLimit,
                ..
            })
        ),
        "{result:?}"
    );
    let extended: u64 = cluster
        .nodes()
        .iter()
        .map(|n| n.stats().extended)
        .max()
        .unwrap_or(0);
    assert_eq!(extended, 2, "exactly two extensions reached the nodes");
}

#[test]
fn a_panic_in_the_closure_releases_the_lock() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        locks.with_lock("panicky", Duration::from_secs(30), |_| {
            panic!("the closure failed")
        })
    }));
    assert!(outcome.is_err(), "the panic propagates");
    let lock = locks
        .try_lock("panicky", Duration::from_secs(30))
        .expect("released by the unwinding");
    lock.release().expect("held");
}

#[test]
fn keep_alive_on_a_held_guard_is_opt_in() {
    let cluster = MockCluster::new(3);
    let locks = manager(&cluster);
    let ttl = Duration::from_millis(150);
    let plain = locks.try_lock("plain", ttl).expect("free");
    let kept = locks.try_lock("kept", ttl).expect("free");
    kept.keep_alive(KeepAlive::new()).expect("keeper");
    let until = Instant::now() + ttl * 3;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        plain.is_lost() && !plain.is_valid(),
        "a plain guard expires"
    );
    assert!(matches!(
        plain.ensure_held(),
        Err(LockError::Lost {
            reason: LostReason::Expired,
            ..
        })
    ));
    kept.ensure_held().expect("kept alive");
    kept.release().expect("still held");
}

#[test]
fn overlapping_multi_resource_locks_never_both_succeed() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let holders = Arc::new(Mutex::new(std::collections::HashSet::<&'static str>::new()));
    let sets: [&[&'static str]; 4] = [&["a", "b"], &["b", "c"], &["c", "d"], &["d", "a"]];
    std::thread::scope(|s| {
        for set in sets {
            let (locks, holders) = (locks.clone(), holders.clone());
            s.spawn(move || {
                for _ in 0..100 {
                    let lock = locks
                        .lock_timeout(set, Duration::from_secs(10), Duration::from_secs(30))
                        .expect("acquire");
                    {
                        let mut held = holders.lock().expect("no poison");
                        for key in set {
                            assert!(
                                held.insert(key),
                                "{key} is held by two multi-resource locks"
                            );
                        }
                    }
                    std::thread::yield_now();
                    {
                        let mut held = holders.lock().expect("no poison");
                        for key in set {
                            held.remove(key);
                        }
                    }
                    lock.release().expect("held");
                }
            });
        }
    });
    assert!(locks.flush(Duration::from_secs(5)));
    assert!(
        cluster.nodes().iter().all(|n| n.live_keys() == 0),
        "partial keys remain"
    );
}

fn strictly_increasing_tokens(nodes: usize) {
    let cluster = MockCluster::new(nodes);
    let locks = Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_millis(100))
        .retry_delay(Duration::ZERO, Duration::from_millis(2))
        .fencing(true)
        .build()
        .expect("config");
    redlock_tests::checks::tokens_rise_across_holders(&locks, "fenced", 8, 100);
}

#[test]
fn fencing_tokens_rise_across_holders_on_five_nodes() {
    strictly_increasing_tokens(5);
}

#[test]
fn fencing_tokens_rise_across_holders_on_one_node() {
    strictly_increasing_tokens(1);
}

/// Bumps `key`'s fencing counter on `node` by `times` failed single-node
/// attempts, as a client that never reached a quorum would.
fn inflate(node: &MockNode, key: &str, times: usize) {
    for _ in 0..times {
        let claim = Claim::new(
            Resources::one(key).expect("key"),
            Token::random().expect("entropy"),
        );
        let ttl = Ttl::new(Duration::from_secs(1)).expect("ttl");
        assert!(node.acquire(&claim, ttl, true).expect("up").is_granted());
        assert!(node.release(&claim).expect("up"));
    }
}

/// The grant's counters on each node for a fenced single-node acquire.
fn grant_counter(node: &MockNode, key: &str) -> u64 {
    let claim = Claim::new(
        Resources::one(key).expect("key"),
        Token::random().expect("entropy"),
    );
    let ttl = Ttl::new(Duration::from_secs(1)).expect("ttl");
    let AcquireOutcome::Granted {
        fence: Some(counter),
    } = node.acquire(&claim, ttl, true).expect("up")
    else {
        panic!("no counter")
    };
    assert!(node.release(&claim).expect("up"));
    counter
}

#[test]
fn the_max_of_granted_counters_alone_goes_backwards_and_the_raise_step_fixes_it() {
    // Without the raise step: A wins on nodes 0, 1, 2 where node 0 was
    // inflated by failed attempts; B later wins on 2, 3, 4.
    let bare = MockCluster::new(5);
    inflate(bare.node(0), "k", 10);
    let a_max = [0, 1, 2]
        .iter()
        .map(|&i| grant_counter(bare.node(i), "k"))
        .max()
        .unwrap_or(0);
    let b_max = [2, 3, 4]
        .iter()
        .map(|&i| grant_counter(bare.node(i), "k"))
        .max()
        .unwrap_or(0);
    assert_eq!((a_max, b_max), (11, 2), "max of grants alone");
    assert!(
        b_max < a_max,
        "the later holder's max-only token is lower: not monotonic"
    );

    // The same story through the manager, which raises the counters.
    let cluster = MockCluster::new(5);
    let locks = Redlock::builder(cluster.backends())
        .fencing(true)
        .build()
        .expect("config");
    inflate(cluster.node(0), "k", 10);
    cluster.node(3).go_down();
    cluster.node(4).go_down();
    let a = locks
        .try_lock("k", Duration::from_secs(5))
        .expect("A on 0, 1, 2");
    let token_a = a.fencing_token().expect("fencing on").value();
    a.release().expect("held");
    cluster.node(3).come_up();
    cluster.node(4).come_up();
    cluster.node(0).go_down();
    cluster.node(1).go_down();
    let b = locks
        .try_lock("k", Duration::from_secs(5))
        .expect("B on 2, 3, 4");
    let token_b = b.fencing_token().expect("fencing on").value();
    assert_eq!(token_a, 12, "max(11, 1, 1) + 1");
    assert!(
        token_b > token_a,
        "B's token {token_b} must exceed A's {token_a}"
    );
    b.release().expect("held");
}
