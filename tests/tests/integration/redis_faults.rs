//! Real faults against real redis-server masters: kill -9, SIGSTOP, restarts
//! without persistence, a proxy that delays traffic.

use std::time::{Duration, Instant};

use redlock_redis::backend::LockBackend;
use redlock_redis::{Lock, LockError, NodeFailure, RedisErrorKind, Redlock, Ttl};
use redlock_tests::harness::{wait_until, Direction, Proxy, RedisCluster, RedisServer};

use crate::redis_common::{
    backend, backends, claim, cluster, exists, key, manager, manager_over, Overlap, NODE_TIMEOUT,
};

const TTL: Duration = Duration::from_secs(10);

fn failed_ports(err: &LockError) -> Vec<String> {
    err.report()
        .map(|r| r.failed_nodes().map(|n| n.to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn kill_one_then_two_masters_locking_keeps_working_without_overlap() {
    let cluster = cluster(5);
    let locks = manager(&cluster, NODE_TIMEOUT);
    let overlap = Overlap::default();
    let name = key("kill-nine");
    for phase in 0..3 {
        if phase > 0 {
            cluster.node(phase - 1).kill().expect("kill -9");
        }
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..15 {
                        let lock = locks
                            .lock_timeout(name.as_str(), TTL, Duration::from_secs(30))
                            .expect("quorum remains");
                        overlap.enter();
                        std::thread::yield_now();
                        overlap.leave();
                        lock.release().expect("released on a quorum");
                    }
                });
            }
        });
    }
    assert!(!overlap.overlapped(), "two holders at once");
    assert_eq!(overlap.done(), 3 * 4 * 15);
}

#[test]
fn three_masters_down_is_no_quorum_naming_them_within_the_timeout() {
    let cluster = cluster(5);
    let locks = manager(&cluster, NODE_TIMEOUT);
    for i in [0, 2, 4] {
        cluster.node(i).kill().expect("kill");
    }
    let started = Instant::now();
    let err = locks
        .try_lock(key("three-down").as_str(), TTL)
        .expect_err("no quorum");
    let elapsed = started.elapsed();
    assert!(elapsed < NODE_TIMEOUT * 10, "took {elapsed:?}");
    let LockError::NoQuorum(report) = &err else {
        panic!("expected NoQuorum, got {err}")
    };
    let expected: Vec<String> = [0, 2, 4]
        .iter()
        .map(|&i| format!("127.0.0.1:{}/0", cluster.node(i).port()))
        .collect();
    assert_eq!(failed_ports(&err), expected);
    for failure in report.failures() {
        let NodeFailure::Backend(e) = failure.failure() else {
            panic!("expected a backend error, got {failure}")
        };
        // Refused, or reset: a pooled connection can still be open at the kill.
        assert!(
            matches!(
                e.kind(),
                RedisErrorKind::ConnectionRefused | RedisErrorKind::Io
            ),
            "{e}"
        );
    }
}

#[test]
fn sigstop_one_master_neither_slows_acquire_nor_hangs_release() {
    let cluster = cluster(5);
    // A long per-node timeout makes any wait for the frozen master obvious.
    let timeout = Duration::from_secs(3);
    let locks = manager(&cluster, timeout);
    let name = key("sigstop-one");
    locks
        .try_lock(name.as_str(), TTL)
        .expect("all healthy")
        .release()
        .expect("held");
    cluster.node(1).pause().expect("SIGSTOP");
    for _ in 0..5 {
        let started = Instant::now();
        let lock = locks
            .try_lock(name.as_str(), TTL)
            .expect("4 healthy masters grant");
        let acquired = started.elapsed();
        assert!(
            acquired < timeout,
            "acquire waited for the frozen master: {acquired:?}"
        );
        let started = Instant::now();
        lock.release().expect("released on the 4 healthy masters");
        assert!(
            started.elapsed() < timeout,
            "release took {:?}",
            started.elapsed()
        );
    }
    cluster.node(1).resume().expect("SIGCONT");
}

#[test]
fn sigstop_one_master_holds_no_caller_of_the_poller() {
    let cluster = cluster(5);
    // A long per-node timeout makes any wait for the frozen master obvious.
    let timeout = Duration::from_secs(3);
    // Without own rounds every round goes through the poller.
    let locks = Redlock::builder(backends(&cluster, timeout))
        .node_timeout(timeout)
        .own_rounds(false)
        .poller_from(1)
        .build()
        .expect("valid manager");
    let names: Vec<String> = (0..4)
        .map(|i| key(&format!("sigstop-polled-{i}")))
        .collect();
    for name in &names {
        let lock = locks.try_lock(name.as_str(), TTL).expect("all healthy");
        lock.release().expect("held");
    }
    cluster.node(1).pause().expect("SIGSTOP");
    std::thread::scope(|s| {
        for name in &names {
            let locks = &locks;
            s.spawn(move || {
                for cycle in 0..5 {
                    let started = Instant::now();
                    let lock = locks
                        .try_lock(name.as_str(), TTL)
                        .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
                    let acquired = started.elapsed();
                    assert!(acquired < timeout, "acquire took {acquired:?}");
                    let started = Instant::now();
                    lock.release()
                        .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
                    let released = started.elapsed();
                    assert!(released < timeout, "release took {released:?}");
                }
            });
        }
    });
    assert!(locks.stats().manager.polled_batches > 0);
    cluster.node(1).resume().expect("SIGCONT");
    assert!(locks.flush(Duration::from_secs(30)), "caught up");
    for node in cluster.nodes() {
        for name in &names {
            assert!(!exists(node, name), "{name} left on {}", node.port());
        }
    }
}

/// A lone caller's release returns once a quorum answered, leaving a
/// frozen master's answer unread on its connection (`Started::detach`): a
/// flush reads it, so it reports that master until the master ran the
/// release, and then every master is free of the key.
#[test]
fn a_flush_waits_for_the_answers_a_lone_callers_rounds_left_unread() {
    let cluster = cluster(5);
    let timeout = Duration::from_millis(500);
    let locks = manager(&cluster, timeout);
    let name = key("left-unread");
    let lock = locks.try_lock(name.as_str(), TTL).expect("all healthy");
    cluster.node(2).pause().expect("SIGSTOP");
    let started = Instant::now();
    lock.release().expect("released on the 4 healthy masters");
    let took = started.elapsed();
    assert!(took < timeout * 10, "release took {took:?}");
    assert!(
        !locks.flush(timeout),
        "the frozen master has not run the release"
    );
    assert!(cluster.node(2).resume().is_ok(), "SIGCONT");
    assert!(locks.flush(Duration::from_secs(30)), "caught up");
    for node in cluster.nodes() {
        assert!(!exists(node, &name), "{name} left on {}", node.port());
    }
}

#[test]
fn sigstop_three_masters_is_a_bounded_typed_error_and_sigcont_restores() {
    let cluster = cluster(5);
    let timeout = Duration::from_millis(300);
    let locks = manager(&cluster, timeout);
    let name = key("sigstop-three");
    for i in 0..3 {
        cluster.node(i).pause().expect("SIGSTOP");
    }
    let started = Instant::now();
    let err = locks.try_lock(name.as_str(), TTL).expect_err("no quorum");
    let elapsed = started.elapsed();
    assert!(elapsed < timeout * 10, "took {elapsed:?}");
    let LockError::NoQuorum(report) = &err else {
        panic!("expected NoQuorum, got {err}")
    };
    assert_eq!(report.failures().len(), 3, "{err}");
    for failure in report.failures() {
        let timed_out = match failure.failure() {
            NodeFailure::TimedOut => true,
            NodeFailure::Backend(e) => e.kind() == RedisErrorKind::Timeout,
            _ => false,
        };
        assert!(timed_out, "expected a timeout, got {failure}");
    }
    for i in 0..3 {
        cluster.node(i).resume().expect("SIGCONT");
    }
    let lock = locks
        .lock_timeout(name.as_str(), TTL, Duration::from_secs(10))
        .expect("service restored");
    lock.release().expect("held");
}

#[test]
fn restart_without_persistence_breaks_exclusion_and_a_delayed_restart_keeps_it() {
    let cluster = cluster(5);
    let locks = manager(&cluster, NODE_TIMEOUT);

    // What the specification warns about: A holds the lock on exactly
    // masters 0, 1, 2 (3 and 4 are down meanwhile; a SIGSTOPped master would
    // still apply A's SET from its socket buffer once resumed) ...
    let name = key("restart-unsafe");
    let a = lock_on_first_three(&cluster, &locks, &name, TTL);
    // ... master 0 crashes and comes straight back, empty ...
    cluster
        .node(0)
        .restart()
        .expect("restart without persistence");
    // ... and B gets a quorum (0, 3, 4) while A's lock is still valid.
    let b = locks
        .lock_timeout(name.as_str(), TTL, Duration::from_secs(5))
        .expect("B acquires too: the unsafe case");
    assert!(
        a.is_valid() && b.is_valid(),
        "both hold the lock at once: mutual exclusion is broken"
    );
    drop((a, b));

    // The delayed-restart procedure (docs/operations.md): the crashed master
    // stays out of service for longer than the largest TTL.
    let name = key("restart-delayed");
    let ttl = Duration::from_millis(1500);
    let a = lock_on_first_three(&cluster, &locks, &name, ttl);
    cluster.node(0).kill().expect("crash");
    let down_since = Instant::now();
    // While master 0 is kept down, B cannot reach a quorum.
    while a.is_valid() {
        match locks.try_lock(name.as_str(), ttl) {
            Err(LockError::Contended(_) | LockError::NoQuorum(_)) => {}
            Ok(_) => panic!("B acquired while A was valid"),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    // Restart only once the maximum TTL (plus drift) has passed.
    while down_since.elapsed() < ttl + Duration::from_millis(100) {
        std::thread::sleep(Duration::from_millis(20));
    }
    cluster.node(0).restart().expect("delayed restart");
    let b = locks
        .lock_timeout(name.as_str(), ttl, Duration::from_secs(5))
        .expect("B acquires after A expired");
    assert!(
        !a.is_valid(),
        "B must only hold the lock after A's validity ended"
    );
    drop(b);
}

/// Takes a lock held on exactly masters 0, 1 and 2: 3 and 4 are down during
/// the acquire and come back empty.
fn lock_on_first_three(cluster: &RedisCluster, locks: &Redlock, name: &str, ttl: Duration) -> Lock {
    // Earlier releases (which return at a quorum) have run on every master:
    // none is left to fail on the two killed below and be kept for retries,
    // so the flush after the acquire can say every master caught up.
    assert!(locks.flush(Duration::from_secs(10)), "masters caught up");
    cluster.node(3).kill().expect("kill");
    cluster.node(4).kill().expect("kill");
    let lock = locks.try_lock(name, ttl).expect("A on 0, 1, 2");
    // The acquire returns at the quorum of 0, 1, 2: wait until it has failed
    // on 3 and 4 too, or a late one could set A's key on a master restarted
    // empty below.
    assert!(
        locks.flush(Duration::from_secs(10)),
        "the acquire ran on every master"
    );
    cluster.node(3).restart().expect("restart");
    cluster.node(4).restart().expect("restart");
    lock
}

#[test]
fn script_flush_on_all_masters_mid_run_keeps_release_and_extend_working() {
    let cluster = cluster(5);
    let locks = manager(&cluster, NODE_TIMEOUT);
    let name = key("script-flush");
    let warm = locks
        .try_lock([name.as_str(), "locks:script-flush-b"], TTL)
        .expect("free");
    warm.release().expect("held");
    let mut lock = locks
        .try_lock([name.as_str(), "locks:script-flush-b"], TTL)
        .expect("free");
    for server in cluster.iter() {
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .exec(&mut server.client().expect("client"))
            .expect("SCRIPT FLUSH");
    }
    lock.extend(TTL).expect("extend after SCRIPT FLUSH");
    lock.release().expect("release after SCRIPT FLUSH");
}

#[test]
fn a_master_turned_replica_reports_readonly_and_the_lock_still_works() {
    let cluster = cluster(5);
    let primary = RedisServer::start().expect("a separate primary");
    let replica = cluster.node(2);
    let mut admin = replica.client().expect("client");
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port())
        .exec(&mut admin)
        .expect("REPLICAOF");
    wait_until(Duration::from_secs(10), "the replica role", || {
        redis::cmd("INFO")
            .arg("replication")
            .query::<String>(&mut admin)
            .is_ok_and(|info| info.contains("role:slave"))
    })
    .expect("replica");

    // The backend names the node and the reason.
    let node = backend(replica, &replica.url(), NODE_TIMEOUT);
    let err = node
        .acquire(&claim("locks:replica"), Ttl::new(TTL).expect("ttl"), false)
        .expect_err("read-only");
    assert_eq!(err.kind(), RedisErrorKind::ReadOnly, "{err}");
    assert_eq!(
        err.node().as_str(),
        format!("127.0.0.1:{}/0", replica.port())
    );

    // The manager still locks on the four masters ...
    let locks = manager(&cluster, NODE_TIMEOUT);
    let name = key("replica");
    locks
        .try_lock(name.as_str(), TTL)
        .expect("4 masters grant")
        .release()
        .expect("held");
    // A release returns at a quorum: wait until every master has run it
    // before taking the key directly on two of them.
    assert!(locks.flush(Duration::from_secs(10)), "masters caught up");
    // ... and a failed round's report names the replica with READONLY.
    let other = claim(&name);
    for i in [0, 1] {
        let n = backend(cluster.node(i), &cluster.node(i).url(), NODE_TIMEOUT);
        assert!(n
            .acquire(&other, Ttl::new(TTL).expect("ttl"), false)
            .expect("up")
            .is_granted());
    }
    let err = locks
        .try_lock(name.as_str(), TTL)
        .expect_err("2 held elsewhere, 1 replica");
    let LockError::Contended(report) = &err else {
        panic!("expected Contended, got {err}")
    };
    let [failure] = report.failures() else {
        panic!("expected one failed node: {err}")
    };
    assert_eq!(failure.node(), node.node_id());
    assert!(
        matches!(failure.failure(), NodeFailure::Backend(e) if e.kind() == RedisErrorKind::ReadOnly),
        "{err}"
    );
    redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .exec(&mut admin)
        .expect("REPLICAOF NO ONE");
}

#[test]
fn a_proxy_delaying_one_master_beyond_the_timeout_does_not_stop_acquire() {
    let cluster = cluster(5);
    let timeout = Duration::from_millis(200);
    let proxy = Proxy::in_front_of(cluster.node(4)).expect("proxy");
    let mut nodes = backends(&cluster, timeout);
    nodes[4] = backend(cluster.node(4), proxy.url(), timeout);
    let locks = manager_over(nodes, timeout);
    let name = key("proxy-delay");
    locks
        .try_lock(name.as_str(), TTL)
        .expect("through the proxy")
        .release()
        .expect("held");
    proxy.delay(timeout * 5, Direction::Both);
    for _ in 0..3 {
        let started = Instant::now();
        let lock = locks
            .try_lock(name.as_str(), TTL)
            .expect("4 direct masters grant");
        assert!(
            started.elapsed() < timeout * 10,
            "took {:?}",
            started.elapsed()
        );
        lock.release().expect("held");
    }
    proxy.blackhole();
    let lock = locks
        .try_lock(name.as_str(), TTL)
        .expect("blackholed master is just one failure");
    lock.release().expect("held");
    proxy.cut();
    let lock = locks
        .try_lock(name.as_str(), TTL)
        .expect("cut master is just one failure");
    lock.release().expect("held");
}
