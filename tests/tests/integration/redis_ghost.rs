//! "Ghost" keys: an acquire that timed out must never run on a node after
//! the release that followed it. Frozen masters (SIGSTOP) and a proxy that
//! holds one request back make the node execute late what it was sent; once
//! it has, no lock key may be left behind.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlock_redis::backend::LockBackend;
use redlock_redis::{RedisBackend, Redlock, Ttl};
use redlock_tests::harness::{wait_until, Direction, Proxy, RedisCluster, RedisServer};

use crate::redis_common::{backend, backends, calls, claim, cluster, exists, key, manager};

const TTL: Duration = Duration::from_secs(10);

/// How long after the last request a node may take to have run everything
/// it was sent: a node timeout plus a generous margin for a loaded machine.
const SETTLE: Duration = Duration::from_secs(2);

/// The pause between two lock cycles.
const PACE: Duration = Duration::from_millis(4);

/// The longest the lock cycles of one test run.
const CYCLING: Duration = Duration::from_secs(4);

/// A resource name of about 20 kB: the server reads such a request in
/// several chunks, interleaved with the other connections' requests, as it
/// would a large batch.
fn long_key(name: &str) -> String {
    format!("{}:{}", key(name), "x".repeat(20_000))
}

/// A manager with fencing and a short node timeout over `cluster`: an
/// acquire (which also names the fencing counter) is twice the size of its
/// release.
fn fenced_manager(cluster: &RedisCluster) -> Redlock {
    fenced_builder(cluster).build().expect("valid manager")
}

/// [`fenced_manager`]'s builder.
fn fenced_builder(cluster: &RedisCluster) -> redlock_core::Builder<RedisBackend> {
    let timeout = Duration::from_millis(50);
    Redlock::builder(backends(cluster, timeout))
        .node_timeout(timeout)
        .fencing(true)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
}

/// Runs `try_lock` + `release` cycles on each of `names` (whatever each
/// answers), each name in a thread of its own: 250 of them, each followed
/// by a short pause, or fewer if they take longer than [`CYCLING`] (a round
/// waits for frozen masters up to its node timeout). After the first tenth
/// of every thread's, `frozen` masters are paused (SIGSTOP) for the rest;
/// they are resumed once the threads are done. Nothing more is called
/// then. Returns the time of the resume.
fn freeze_while_cycling(
    cluster: &RedisCluster,
    locks: &Redlock,
    frozen: &[usize],
    names: &[&str],
) -> Instant {
    let cycles = 250;
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for &name in names {
            let (done, locks) = (&done, locks);
            s.spawn(move || {
                let started = Instant::now();
                for _ in 0..cycles {
                    if started.elapsed() > CYCLING {
                        break;
                    }
                    if let Ok(lock) = locks.try_lock(name, TTL) {
                        let _ = lock.release();
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    // A pace that keeps the masters frozen for many node timeouts.
                    std::thread::sleep(PACE);
                }
            });
        }
        // Warm: every pool has its connections before the freeze.
        wait_until(Duration::from_secs(30), "the first cycles", || {
            done.load(Ordering::SeqCst) >= names.len() * cycles / 10
        })
        .expect("cycling");
        for &i in frozen {
            cluster.node(i).pause().expect("SIGSTOP");
        }
    });
    for &i in frozen {
        cluster.node(i).resume().expect("SIGCONT");
    }
    Instant::now()
}

#[test]
fn a_master_frozen_during_lock_cycles_keeps_no_ghost_key_after_it_resumes() {
    let cluster = cluster(5);
    let locks = fenced_manager(&cluster);
    let name = long_key("ghost-one-frozen");
    let resumed = freeze_while_cycling(&cluster, &locks, &[2], &[&name]);
    // Nothing more is called: the resumed master runs what it was sent, in
    // order, and the stale acquires are followed by their releases.
    assert_no_key_left(&cluster, &name, resumed);
}

/// Four names of about 20 kB each, for four callers.
fn four_names(name: &str) -> Vec<String> {
    (0..4).map(|i| long_key(&format!("{name}-{i}"))).collect()
}

#[test]
fn masters_frozen_while_four_callers_cycle_through_the_poller_keep_no_ghost_key() {
    for frozen in [&[2][..], &[0, 2, 4]] {
        let cluster = cluster(5);
        // Without own rounds every round goes through the poller, also
        // while a caller happens to be alone.
        let locks = fenced_builder(&cluster)
            .own_rounds(false)
            .poller_from(1)
            .build()
            .expect("valid manager");
        let names = four_names(&format!("ghost-polled-{}", frozen.len()));
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let resumed = freeze_while_cycling(&cluster, &locks, frozen, &refs);
        assert!(locks.stats().manager.polled_batches > 0);
        for name in &names {
            assert_no_key_left(&cluster, name, resumed);
        }
    }
}

/// Polls until `name` is on no master, failing after [`SETTLE`].
fn assert_no_key_left(cluster: &RedisCluster, name: &str, resumed: Instant) {
    wait_until(SETTLE, "no lock key on any master", || {
        cluster.iter().all(|server| !exists(server, name))
    })
    .unwrap_or_else(|e| {
        let left: Vec<u16> = cluster
            .iter()
            .filter(|s| exists(s, name))
            .map(RedisServer::port)
            .collect();
        panic!(
            "{e}: the key was left on the masters at ports {left:?}, {:?} after the resume",
            resumed.elapsed()
        )
    });
}

#[test]
fn three_masters_frozen_during_lock_cycles_do_not_refuse_the_resource_for_a_ttl() {
    let cluster = cluster(5);
    let locks = fenced_manager(&cluster);
    let name = long_key("ghost-three-frozen");
    let resumed = freeze_while_cycling(&cluster, &locks, &[0, 2, 4], &[&name]);
    // Another manager (its own connections) gets the lock well within the
    // TTL of any acquire the frozen masters ran late.
    let other = manager(&cluster, Duration::from_millis(500));
    let mut last = None;
    wait_until(SETTLE, "the resource to be free again", || {
        match other.try_lock(name.as_str(), TTL) {
            Ok(lock) => {
                let _ = lock.release();
                true
            }
            Err(err) => {
                last = Some(err.to_string());
                false
            }
        }
    })
    .unwrap_or_else(|e| {
        panic!(
            "{e}: still refused {:?} after the resume: {last:?}",
            resumed.elapsed()
        )
    });
    assert_no_key_left(&cluster, &name, resumed);
}

#[test]
fn an_acquire_held_back_past_its_timeout_leaves_no_key_once_the_server_ran_it() {
    let server = RedisServer::start().expect("server");
    let proxy = Proxy::in_front_of(&server).expect("proxy");
    let timeout = Duration::from_millis(100);
    let node: RedisBackend = backend(&server, proxy.url(), timeout);
    let warm = claim(&key("held-back-warm"));
    assert!(node
        .acquire(&warm, Ttl::new(TTL).expect("ttl"), false)
        .expect("through the proxy")
        .is_granted());
    assert!(node.release(&warm).expect("held"));
    let sets_before = calls(&server, "set");

    // The acquire reaches the server only well after the node timeout: to
    // the client it merely timed out (the server is healthy).
    let name = key("held-back");
    let late = claim(&name);
    proxy.delay(timeout * 5, Direction::ToServer);
    let err = node
        .acquire(&late, Ttl::new(TTL).expect("ttl"), false)
        .expect_err("held back beyond the node timeout");
    assert!(err.is_timeout(), "{err}");
    // What the manager does next: release what it may have got, as soon as
    // the way to the server is clear again.
    proxy.pass_through();
    let _ = node.release(&late);

    wait_until(SETTLE, "the held-back acquire to run", || {
        calls(&server, "set") > sets_before
    })
    .expect("the server ran the acquire");
    wait_until(SETTLE, "no lock key", || !exists(&server, &name))
        .unwrap_or_else(|e| panic!("{e}: the late acquire left {name} behind"));
    // The backend is usable again once the server has answered.
    let next = claim(&name);
    wait_until(SETTLE, "the node to grant again", || {
        node.acquire(&next, Ttl::new(TTL).expect("ttl"), false)
            .is_ok_and(|outcome| outcome.is_granted())
    })
    .expect("granted again");
    assert!(node.release(&next).expect("answered"));
}
