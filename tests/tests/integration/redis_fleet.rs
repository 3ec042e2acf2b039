//! A mixed fleet: one manager over five masters of three kinds at once
//! (two Redis 7.0, two Valkey 9.1, one Redis 6.2), as a fleet in the middle
//! of an upgrade is. Plain locks under contention from two managers keep
//! mutual exclusion and rising fencing tokens, a read-write lock keeps its
//! writers alone, a semaphore its bound, and a waiter is woken by a
//! release rather than by its pause. Every kind must be installed
//! (scripts/install-servers.sh): a missing one fails the test.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redlock_redis::{FencingToken, Redlock};
use redlock_tests::harness::{wait_until, RedisCluster, ServerKind, ServerOptions};

use crate::redis_common::{backends, exists, key, Overlap, NODE_TIMEOUT};
use crate::rwlock::{readers_and_writers, Room};

const TTL: Duration = Duration::from_secs(10);

/// Long enough for every contender on a loaded 2-core machine.
const WAIT: Duration = Duration::from_secs(60);

/// The fleet: each kind at least once, the odd one (Redis 6.2, which takes
/// a single-key lock by script instead of `SET ... GET`) in the middle.
const KINDS: [ServerKind; 5] = [
    ServerKind::Redis70,
    ServerKind::Valkey91,
    ServerKind::Redis62,
    ServerKind::Redis70,
    ServerKind::Valkey91,
];

fn fleet() -> RedisCluster {
    RedisCluster::start_kinds(&KINDS, &ServerOptions::new())
        .expect("a mixed fleet (scripts/install-servers.sh installs the kinds)")
}

fn manager(fleet: &RedisCluster, fencing: bool) -> Redlock {
    Redlock::builder(backends(fleet, NODE_TIMEOUT))
        .node_timeout(NODE_TIMEOUT)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
        .fencing(fencing)
        .build()
        .expect("valid manager")
}

/// Waits until no master keeps any of `keys`: every release ran everywhere.
fn nothing_left(fleet: &RedisCluster, keys: &[String]) {
    for server in fleet.iter() {
        for k in keys {
            wait_until(Duration::from_secs(10), k, || !exists(server, k))
                .unwrap_or_else(|e| panic!("left on a master: {e}"));
        }
    }
}

#[test]
fn the_fleet_runs_every_kind_it_says() {
    let fleet = fleet();
    for (server, kind) in fleet.iter().zip(KINDS) {
        let (name, version) = server.hello().expect("HELLO");
        assert_eq!(name, kind.server(), "{kind}");
        assert!(version.starts_with(kind.version()), "{kind}: {version}");
    }
}

#[test]
fn two_managers_contend_for_a_lock_with_rising_fencing_tokens() {
    let fleet = fleet();
    let managers = [manager(&fleet, true), manager(&fleet, true)];
    let name = key("fleet-lock");
    let overlap = Overlap::default();
    // Read, then written back one higher a moment later: an increment lost
    // to a second holder shows in the total.
    let counter = AtomicU64::new(0);
    let last: Mutex<Option<FencingToken>> = Mutex::new(None);
    const THREADS: usize = 2;
    const ROUNDS: usize = 10;
    std::thread::scope(|s| {
        for locks in &managers {
            for _ in 0..THREADS {
                let (overlap, counter, last, name) = (&overlap, &counter, &last, name.as_str());
                s.spawn(move || {
                    for _ in 0..ROUNDS {
                        let lock = locks.lock_timeout(name, TTL, WAIT).expect("the lock");
                        overlap.enter();
                        let token = lock.fencing_token().expect("fencing is on");
                        {
                            let mut last = last.lock().expect("not poisoned");
                            if let Some(before) = *last {
                                assert!(
                                    token > before,
                                    "token {} after {}",
                                    token.value(),
                                    before.value()
                                );
                            }
                            *last = Some(token);
                        }
                        let seen = counter.load(Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(1));
                        counter.store(seen + 1, Ordering::SeqCst);
                        assert!(lock.is_valid(), "the section outlived the lock");
                        overlap.leave();
                        lock.release().expect("still held");
                    }
                });
            }
        }
    });
    let total = (2 * THREADS * ROUNDS) as u64;
    assert!(!overlap.overlapped(), "two holders at once");
    assert_eq!(
        counter.load(Ordering::SeqCst),
        total,
        "an increment was lost"
    );
    assert_eq!(overlap.done() as u64, total);
    nothing_left(&fleet, &[name]);
}

#[test]
fn readers_and_writers_of_two_managers_never_meet() {
    let fleet = fleet();
    let managers = [manager(&fleet, true), manager(&fleet, false)];
    let name = key("fleet-rwlock");
    let room = Room::default();
    const ROUNDS: usize = 9;
    let inside = Duration::from_millis(2);
    readers_and_writers(&managers, &name, ROUNDS, WAIT, inside, &room);
    assert_eq!(room.done(), 4 * ROUNDS);
    assert!(!room.clashed(), "a writer met someone");
    assert!(room.most_readers() >= 2, "readers never shared: a mutex?");
    nothing_left(
        &fleet,
        &[
            name.clone(),
            format!("{name}{}", redlock_redis::READERS_SUFFIX),
        ],
    );
}

#[test]
fn a_semaphore_of_two_permits_never_has_three_holders() {
    let fleet = fleet();
    let managers = [manager(&fleet, false), manager(&fleet, true)];
    let name = key("fleet-semaphore");
    let inside = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    const ROUNDS: usize = 8;
    std::thread::scope(|s| {
        for locks in &managers {
            for _ in 0..3 {
                let (inside, most, done, name) = (&inside, &most, &done, name.as_str());
                s.spawn(move || {
                    let permits = locks.semaphore(name, 2).expect("semaphore");
                    for _ in 0..ROUNDS {
                        let permit = permits.acquire_timeout(TTL, WAIT).expect("a permit");
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                        inside.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                        permit.release().expect("held");
                    }
                });
            }
        }
    });
    assert_eq!(done.load(Ordering::SeqCst), 6 * ROUNDS);
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 2, "{most} holders of 2 permits");
    assert!(most == 2, "the permits were never held together: a mutex?");
    let permit_keys: Vec<String> = (0..2)
        .map(|i| format!("{name}{}{i}", redlock_core::keys::PERMIT_INFIX))
        .collect();
    nothing_left(&fleet, &permit_keys);
}

#[test]
fn a_waiter_of_another_manager_is_woken_by_the_release() {
    const PAUSE: Duration = Duration::from_secs(30);
    const BOUND: Duration = Duration::from_secs(5);
    let fleet = fleet();
    let holder = manager(&fleet, false);
    // Its pause between refused rounds is 30 s: a lock within the 5 s
    // bound after the release came from a wake-up.
    let waiter = Redlock::builder(backends(&fleet, Duration::from_secs(2)))
        .node_timeout(Duration::from_secs(2))
        .retry_delay(PAUSE, PAUSE)
        .build()
        .expect("valid manager");
    let name = key("fleet-wake");
    // Both managers' pools are up on every master before the race.
    for locks in [&holder, &waiter] {
        wait_until(BOUND * 2, "connections to every master", || {
            locks
                .try_lock("locks:fleet-probe", TTL)
                .is_ok_and(|l| l.release().is_ok())
                && locks.flush(BOUND)
        })
        .expect("the pools connect");
    }
    let woken = waiter.stats().manager.woken;
    let lock = holder.try_lock(name.as_str(), TTL).expect("free");
    assert!(holder.flush(BOUND));
    std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            let got = waiter.lock(name.as_str(), TTL).expect("acquired");
            let at = Instant::now();
            got.release().expect("held");
            at
        });
        // The waiter's mark is on every master: it was refused everywhere
        // and sleeps out its pause, unless woken.
        let mark = format!("{name}{}", redlock_redis::WAIT_SUFFIX);
        for server in fleet.iter() {
            wait_until(BOUND, "the waiter's mark", || exists(server, &mark))
                .expect("the waiter waits");
        }
        let released = Instant::now();
        lock.release().expect("held");
        let at = waiting.join().expect("no panic");
        let after = at.saturating_duration_since(released);
        assert!(
            after < BOUND,
            "acquired {after:?} after the release: the pause ran out, no wake-up"
        );
    });
    assert!(waiter.stats().manager.woken > woken, "not woken");
}
