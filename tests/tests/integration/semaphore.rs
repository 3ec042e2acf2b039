//! The counting semaphore on in-memory nodes: at most `permits` holders
//! across managers, each permit a lock of its own, and bad input refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlock_core::keys::PERMIT_INFIX;
use redlock_core::{Cancel, ConfigError, LockError, Redlock, MAX_PERMITS};
use redlock_mock::{MockCluster, MockNode};

const TTL: Duration = Duration::from_secs(10);

fn manager(cluster: &MockCluster) -> Redlock<MockNode> {
    Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_secs(1))
        .retry_delay(Duration::ZERO, Duration::from_millis(2))
        .build()
        .expect("valid config")
}

/// Counts holders inside at once and remembers the most seen.
#[derive(Default)]
struct Inside {
    now: AtomicUsize,
    most: AtomicUsize,
    done: AtomicUsize,
}

impl Inside {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
        self.done.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn k_managers_get_the_k_permits_and_the_next_is_refused_until_one_is_released() {
    let cluster = MockCluster::new(5);
    let managers: Vec<_> = (0..4).map(|_| manager(&cluster)).collect();
    let mut permits = Vec::new();
    for locks in &managers[..3] {
        let jobs = locks.semaphore("jobs", 3).expect("semaphore");
        permits.push(jobs.try_acquire(TTL).expect("a permit is free"));
    }
    let mut slots: Vec<u32> = permits.iter().map(|p| p.slot()).collect();
    slots.sort_unstable();
    assert_eq!(slots, [0, 1, 2], "each holder has a permit of its own");
    let fourth = managers[3].semaphore("jobs", 3).expect("semaphore");
    let refused = fourth.try_acquire(TTL).expect_err("all three are held");
    assert!(matches!(refused, LockError::Contended(_)), "{refused}");
    let freed = permits.remove(1).slot();
    // Dropping the guard releases it.
    assert!(managers[1].flush(Duration::from_secs(5)));
    let permit = fourth.try_acquire(TTL).expect("the released permit");
    assert_eq!(permit.slot(), freed);
    assert_eq!(
        permit.resources().keys(),
        [format!("jobs{PERMIT_INFIX}{freed}")],
        "a permit is the lock on its permit key"
    );
}

#[test]
fn a_try_on_a_full_semaphore_makes_one_round_per_permit() {
    let cluster = MockCluster::new(3);
    let holder = manager(&cluster);
    let full = holder.semaphore("full", 4).expect("semaphore");
    let _held: Vec<_> = (0..4)
        .map(|_| full.try_acquire(TTL).expect("free"))
        .collect();
    // The holder's last replies (a round returns at a quorum) ran: the
    // nodes' counters below see only `other`.
    assert!(holder.flush(Duration::from_secs(5)));
    let other = manager(&cluster);
    let before: Vec<_> = (0..3).map(|i| cluster.node(i).stats()).collect();
    let err = other
        .semaphore("full", 4)
        .expect("semaphore")
        .try_acquire(TTL)
        .expect_err("full");
    assert!(matches!(err, LockError::Contended(_)), "{err}");
    assert!(other.flush(Duration::from_secs(5)));
    // One round per permit, refused by every node.
    let after: Vec<_> = (0..3).map(|i| cluster.node(i).stats()).collect();
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a.refused - b.refused, 4, "{b:?} then {a:?}");
    }
    // A refused round is released only where no answer had come when two
    // refusals decided it (at most one node of three per round), never on
    // the nodes that refused: at most 16 requests, not the 24 of a release
    // to every node.
    let ops: u64 = before.iter().zip(&after).map(|(b, a)| a.ops - b.ops).sum();
    assert!((12..=16).contains(&ops), "{ops} requests");
}

#[test]
fn contenders_of_several_managers_never_exceed_the_permits() {
    let cluster = MockCluster::new(5);
    let managers: Vec<_> = (0..4).map(|_| manager(&cluster)).collect();
    let inside = Inside::default();
    std::thread::scope(|s| {
        for locks in &managers {
            for _ in 0..3 {
                let inside = &inside;
                s.spawn(move || {
                    let pool = locks.semaphore("pool", 3).expect("semaphore");
                    for _ in 0..30 {
                        let permit = pool
                            .acquire_timeout(TTL, Duration::from_secs(60))
                            .expect("a permit within the minute");
                        inside.enter();
                        std::thread::yield_now();
                        inside.leave();
                        permit.release().expect("released");
                    }
                });
            }
        }
    });
    assert_eq!(inside.done.load(Ordering::SeqCst), 4 * 3 * 30);
    let most = inside.most.load(Ordering::SeqCst);
    assert!(most <= 3, "{most} holders at once");
}

#[test]
fn a_cancelled_wait_for_a_permit_returns_promptly_and_holds_none() {
    let cluster = MockCluster::new(3);
    let holder = manager(&cluster);
    let waiter = manager(&cluster);
    let held = holder
        .semaphore("cancel", 2)
        .expect("semaphore")
        .try_acquire(TTL)
        .expect("free");
    let s = holder.semaphore("cancel", 2).expect("semaphore");
    let second = s.try_acquire(TTL).expect("the other permit");
    let cancel = Cancel::new();
    let refused_before = cluster.node(0).stats().refused;
    let (result, waited) = std::thread::scope(|scope| {
        let cancel = &cancel;
        let waiter = &waiter;
        let handle = scope.spawn(move || {
            let s = waiter.semaphore("cancel", 2).expect("semaphore");
            s.acquire_cancellable(TTL, None, cancel)
        });
        // Waiting once it has been refused a few times on every permit.
        let waiting = Instant::now();
        while cluster.node(0).stats().refused < refused_before + 6 {
            assert!(waiting.elapsed() < Duration::from_secs(10), "no rounds");
            std::thread::sleep(Duration::from_millis(1));
        }
        let asked = Instant::now();
        cancel.cancel();
        let result = handle.join().expect("no panic");
        (result, asked.elapsed())
    });
    assert!(matches!(result, Err(LockError::Cancelled)), "{result:?}");
    assert!(waited < Duration::from_secs(1), "took {waited:?}");
    // Already cancelled: at once, without a round.
    let s = waiter.semaphore("cancel", 2).expect("semaphore");
    let before = cluster.node(0).stats().ops;
    assert!(matches!(
        s.acquire_cancellable(TTL, None, &cancel),
        Err(LockError::Cancelled)
    ));
    assert_eq!(cluster.node(0).stats().ops, before);
    // It left nothing: both permits are free once the holders release.
    drop((held, second));
    assert!(holder.flush(Duration::from_secs(5)));
    let a = s.try_acquire(TTL).expect("free");
    let b = s.try_acquire(TTL).expect("free");
    assert_ne!(a.slot(), b.slot());
}

#[test]
fn two_nodes_down_leave_a_quorum_and_three_give_no_quorum_in_one_round() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let s = locks.semaphore("faults", 2).expect("semaphore");
    cluster.node(0).go_down();
    cluster.node(3).freeze();
    let permit = s.try_acquire(TTL).expect("a quorum is up");
    permit.release().expect("released on a quorum");
    cluster.node(4).go_down();
    let err = s.try_acquire(TTL).expect_err("no quorum");
    // Failing nodes are no contention: the call does not go on to the
    // other permit.
    assert!(matches!(err, LockError::NoQuorum(_)), "{err}");
    cluster.node(3).thaw();
}

#[test]
fn a_permit_has_a_locks_life() {
    let cluster = MockCluster::new(3);
    let locks = manager(&cluster);
    let one = locks.semaphore("one", 1).expect("semaphore");
    let other = manager(&cluster);
    let theirs = other.semaphore("one", 1).expect("semaphore");
    let value = one
        .with_permit(Duration::from_millis(300), |permit| {
            // Kept alive past its TTL, and held throughout.
            std::thread::sleep(Duration::from_millis(700));
            assert!(
                matches!(theirs.try_acquire(TTL), Err(LockError::Contended(_))),
                "held by the closure"
            );
            permit.ensure_held().map(|()| permit.slot())
        })
        .expect("acquired")
        .expect("held throughout");
    assert_eq!(value, 0);
    let mut permit = theirs.try_acquire(TTL).expect("released on return");
    let validity = permit.extend(Duration::from_secs(20)).expect("extended");
    assert!(validity > TTL);
}

#[test]
fn fenced_permits_carry_tokens_that_rise_per_permit() {
    let cluster = MockCluster::new(3);
    let locks = Redlock::builder(cluster.backends())
        .fencing(true)
        .build()
        .expect("valid");
    let s = locks.semaphore("fenced", 1).expect("semaphore");
    let first = s.try_acquire(TTL).expect("free");
    let a = first.fencing_token().expect("fencing is on");
    first.release().expect("released");
    let second = s.try_acquire(TTL).expect("free again");
    let b = second.fencing_token().expect("fencing is on");
    assert!(b.value() > a.value(), "{a:?} then {b:?}");
}

#[test]
fn bad_input_gets_a_typed_error() {
    let cluster = MockCluster::new(3);
    let locks = manager(&cluster);
    assert_eq!(locks.semaphore("s", 0).err(), Some(ConfigError::NoPermits));
    assert_eq!(
        locks.semaphore("s", MAX_PERMITS + 1).err(),
        Some(ConfigError::TooManyPermits {
            permits: MAX_PERMITS + 1,
            max: MAX_PERMITS
        })
    );
    assert_eq!(locks.semaphore("", 2).err(), Some(ConfigError::EmptyKey));
    assert!(locks.semaphore("s", MAX_PERMITS).is_ok());
    let mixed = ConfigError::SemaphoreName {
        name: "s".into(),
        permits: MAX_PERMITS,
    };
    assert_eq!(locks.semaphore("s", 2).err(), Some(mixed.clone()));
    let err = locks.try_lock("s", TTL).expect_err("a semaphore's name");
    assert!(matches!(&err, LockError::Config(e) if *e == mixed), "{err}");
    let err = locks
        .lock_timeout("s", TTL, Duration::from_millis(10))
        .expect_err("a semaphore's name");
    assert!(matches!(&err, LockError::Config(e) if *e == mixed), "{err}");
    // A permit's key cannot be named at all; a name that merely looks
    // like one is a resource of its own.
    let permit_key = format!("s{PERMIT_INFIX}7");
    let err = locks
        .try_lock(permit_key.as_str(), TTL)
        .expect_err("a permit's key");
    assert!(
        matches!(&err, LockError::Config(ConfigError::ReservedChar { .. })),
        "{err}"
    );
    drop(locks.try_lock("s:permit:7", TTL).expect("another resource"));
    // A TTL the manager refuses is refused for a permit too.
    let s = locks.semaphore("t", 2).expect("semaphore");
    let err = s.try_acquire(Duration::ZERO).expect_err("bad TTL");
    assert!(
        matches!(err, LockError::Config(ConfigError::TtlZero)),
        "{err}"
    );
    // Nothing was left on the nodes by the refused calls.
    assert!(locks.flush(Duration::from_secs(5)));
    for i in 0..3 {
        assert_eq!(cluster.node(i).live_keys(), 0, "node {i}");
    }
}
