//! Lock lifetime on in-memory nodes: automatic extension with a lost-lock
//! signal, scoped locking, multi-resource exclusion, fencing tokens.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_core::{KeepAlive, LockError, LostReason, Redlock};
use redlock_mock::{MockCluster, MockNode};

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
        let frozen_at = Instant::now();
        // One extension period is two thirds of the validity; allow it ten
        // times over before calling it a hang.
        while lock.ensure_held().is_ok() {
            assert!(frozen_at.elapsed() < ttl * 10, "the loss was never noticed");
            std::thread::sleep(Duration::from_millis(5));
        }
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
        assert!(healthy.wait_for_ops(healthy.stats().ops, Duration::from_secs(5)));
        assert_eq!(
            healthy.stats().extended,
            extended_before + 1,
            "the loss was not noticed at the first extension"
        );
        "side effect skipped"
    });
    assert!(matches!(result, Err(LockError::Lost { .. })), "{result:?}");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)),
        Ok(LostReason::ExtendFailed)
    );
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
    let seen = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        for _ in 0..8 {
            let (locks, seen) = (locks.clone(), seen.clone());
            s.spawn(move || {
                for _ in 0..100 {
                    let lock = locks
                        .lock_timeout("fenced", Duration::from_secs(10), Duration::from_secs(30))
                        .expect("acquire");
                    let token = lock.fencing_token().expect("fencing on");
                    seen.lock().expect("no poison").push(token);
                    lock.release().expect("held");
                }
            });
        }
    });
    let seen = seen.lock().expect("no poison");
    assert_eq!(seen.len(), 800);
    for pair in seen.windows(2) {
        assert!(
            pair[1].value() > pair[0].value(),
            "token {} after {}",
            pair[1],
            pair[0]
        );
    }
}

#[test]
fn fencing_tokens_rise_across_holders_on_five_nodes() {
    strictly_increasing_tokens(5);
}

#[test]
fn fencing_tokens_rise_across_holders_on_one_node() {
    strictly_increasing_tokens(1);
}

#[test]
fn a_fenced_lock_raises_the_counters_on_a_quorum() {
    let cluster = MockCluster::new(5);
    let locks = Redlock::builder(cluster.backends())
        .fencing(true)
        .build()
        .expect("config");
    // A failed minority attempt inflates two counters ...
    for i in [0, 1] {
        for _ in 0..5 {
            let claim = redlock_core::Claim::new(
                redlock_core::Resources::one("inflated").expect("key"),
                redlock_core::Token::random().expect("entropy"),
            );
            let ttl = redlock_core::Ttl::new(Duration::from_secs(1)).expect("ttl");
            redlock_core::LockBackend::acquire(cluster.node(i), &claim, ttl, true).expect("up");
            redlock_core::LockBackend::release(cluster.node(i), &claim).expect("up");
        }
    }
    // ... and the next holder still gets a token above every counter, raised everywhere it holds.
    let lock = locks
        .try_lock("inflated", Duration::from_secs(5))
        .expect("free");
    let token = lock.fencing_token().expect("fencing on").value();
    assert!(locks.flush(Duration::from_secs(5)));
    assert!(
        token > 5,
        "token {token} is not above the inflated counters"
    );
    let raised = cluster
        .nodes()
        .iter()
        .filter(|n| n.fence("inflated") == token)
        .count();
    assert!(raised >= 3, "only {raised} nodes carry the token");
}
