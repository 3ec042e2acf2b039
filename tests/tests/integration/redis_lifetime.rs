//! Lock lifetime against real redis-server masters: automatic extension and
//! its lost-lock signal under SIGSTOP, the hold bound, panics, multi-resource
//! exclusion and fencing tokens.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redlock_redis::{KeepAlive, LockError, LostReason, Redlock};
use redlock_tests::harness::wait_until;

use crate::redis_common::{backends, calls, cluster, key, manager, NODE_TIMEOUT};

#[test]
fn with_lock_running_three_ttls_keeps_the_lock() {
    let cluster = cluster(5);
    let locks = manager(&cluster, NODE_TIMEOUT);
    let other = manager(&cluster, NODE_TIMEOUT);
    let name = key("scoped");
    let ttl = Duration::from_millis(600);
    let value = locks
        .with_lock(name.as_str(), ttl, |lock| {
            let until = Instant::now() + ttl * 3;
            while Instant::now() < until {
                match other.try_lock(name.as_str(), ttl) {
                    Err(LockError::Contended(_)) => {}
                    other => panic!("another client got past a kept lock: {other:?}"),
                }
                lock.ensure_held().expect("kept alive");
                std::thread::sleep(Duration::from_millis(20));
            }
            "done"
        })
        .expect("held throughout");
    assert_eq!(value, "done");
    other
        .try_lock(name.as_str(), ttl)
        .expect("released after the closure")
        .release()
        .expect("held");
}

#[test]
fn sigstop_of_three_masters_fails_ensure_held_at_the_next_extension() {
    let cluster = cluster(5);
    let timeout = Duration::from_millis(200);
    let locks = manager(&cluster, timeout);
    let ttl = Duration::from_millis(900);
    let healthy = cluster.node(4);
    let (tx, rx) = crossbeam_channel::bounded(1);
    let policy = KeepAlive::new().on_lost(move |reason| {
        let _ = tx.send(reason);
    });
    let result = locks.with_lock_kept(key("sigstop-kept").as_str(), ttl, policy, |lock| {
        lock.ensure_held().expect("fresh");
        // The acquire (a script, for a queued caller) may still be on its
        // way to the healthy master: let it land before counting.
        assert!(locks.flush(Duration::from_secs(5)));
        let before = calls(healthy, "evalsha");
        for i in 0..3 {
            cluster.node(i).pause().expect("SIGSTOP");
        }
        // The keeper reports the failed extension while the lock is still
        // within its validity; ten times the TTL is the hang bound.
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
                    ..
                }
            ),
            "{err}"
        );
        // One extension period at most: the first extend after the stop was
        // the one that failed (the healthy master saw exactly one). The
        // frozen masters' timeouts decided that round, not the healthy
        // master's answer: wait for its extend to have run (no flush while
        // three masters are frozen).
        wait_until(
            Duration::from_secs(10),
            "the healthy master's extend",
            || calls(healthy, "evalsha") > before,
        )
        .expect("the healthy master ran the extend");
        assert_eq!(
            calls(healthy, "evalsha"),
            before + 1,
            "the loss was not noticed at the first extension"
        );
        for i in 0..3 {
            cluster.node(i).resume().expect("SIGCONT");
        }
    });
    assert!(matches!(result, Err(LockError::Lost { .. })), "{result:?}");
}

#[test]
fn the_hold_bound_ends_extension_and_marks_the_lock_lost() {
    let cluster = cluster(3);
    let locks = manager(&cluster, NODE_TIMEOUT);
    let ttl = Duration::from_millis(300);
    let policy = KeepAlive::new().max_hold(Duration::from_millis(500));
    let started = Instant::now();
    let result = locks.with_lock_kept(key("hold-bound").as_str(), ttl, policy, |lock| {
        while !lock.is_lost() {
            assert!(started.elapsed() < Duration::from_secs(10), "never lost");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            started.elapsed() >= Duration::from_millis(500),
            "lost before the bound"
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
}

#[test]
fn a_panic_in_the_closure_releases_the_lock() {
    let cluster = cluster(3);
    let locks = manager(&cluster, NODE_TIMEOUT);
    let name = key("panic");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        locks.with_lock(name.as_str(), Duration::from_secs(60), |_| {
            panic!("the closure failed")
        })
    }));
    assert!(outcome.is_err());
    // The TTL is a minute: only the release can have freed it.
    locks
        .try_lock(name.as_str(), Duration::from_secs(60))
        .expect("released by unwinding")
        .release()
        .expect("held");
}

#[test]
fn overlapping_multi_resource_locks_never_both_succeed_and_leave_no_partial_keys() {
    let cluster = cluster(5);
    let locks = manager(&cluster, NODE_TIMEOUT);
    let held = Mutex::new(HashSet::new());
    let sets: Vec<Vec<String>> = ["ab", "bc", "cd", "da"]
        .iter()
        .map(|pair| pair.chars().map(|c| key(&format!("multi-{c}"))).collect())
        .collect();
    std::thread::scope(|s| {
        for set in &sets {
            let (locks, held) = (&locks, &held);
            s.spawn(move || {
                for _ in 0..50 {
                    let lock = locks
                        .lock_timeout(
                            set.as_slice(),
                            Duration::from_secs(10),
                            Duration::from_secs(30),
                        )
                        .expect("acquire");
                    for k in set {
                        assert!(
                            held.lock().expect("no poison").insert(k.clone()),
                            "{k} held twice"
                        );
                    }
                    std::thread::yield_now();
                    for k in set {
                        held.lock().expect("no poison").remove(k);
                    }
                    lock.release().expect("held");
                }
            });
        }
    });
    assert!(locks.flush(Duration::from_secs(10)));
    let keys = |server: &redlock_tests::harness::RedisServer| -> Vec<String> {
        let mut admin = server.client().expect("client");
        redis::cmd("KEYS")
            .arg("locks:multi-*")
            .query(&mut admin)
            .expect("KEYS")
    };
    for server in cluster.iter() {
        // No lock key is left. A refused queued round may leave a waiting
        // mark on a node (`<key>:waiting`, and the waiting manager's
        // `<key>:waiting:<id>`) even when the call won elsewhere; marks
        // only make nodes refuse and live for the mark TTL.
        let mark = |k: &String| {
            k.ends_with(redlock_redis::WAIT_SUFFIX)
                || k.contains(&format!("{}:", redlock_redis::WAIT_SUFFIX))
        };
        let left: Vec<String> = keys(server).into_iter().filter(|k| !mark(k)).collect();
        assert!(left.is_empty(), "keys left on {}: {left:?}", server.port());
    }
    // The marks expire by themselves: twice (longest pause + node timeout).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    for server in cluster.iter() {
        while !keys(server).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "marks left on {}: {:?}",
                server.port(),
                keys(server)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn strictly_increasing_tokens(nodes: usize, name: &str) {
    let cluster = cluster(nodes);
    let locks = Redlock::builder(backends(&cluster, NODE_TIMEOUT))
        .node_timeout(NODE_TIMEOUT)
        .retry_delay(Duration::ZERO, Duration::from_millis(3))
        .fencing(true)
        .build()
        .expect("config");
    redlock_tests::checks::tokens_rise_across_holders(&locks, name, 8, 1000);
}

#[test]
fn eight_threads_taking_one_lock_a_thousand_times_each_get_rising_tokens_on_five_masters() {
    strictly_increasing_tokens(5, &key("fenced-five"));
}

#[test]
fn eight_threads_taking_one_lock_a_thousand_times_each_get_rising_tokens_on_one_master() {
    strictly_increasing_tokens(1, &key("fenced-one"));
}
