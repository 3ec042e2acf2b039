//! Waiters woken by release notifications instead of polling
//! ([`Builder::wake_ups`](redlock_core::Builder::wake_ups)), on in-memory
//! nodes; the Redis side (Pub/Sub) is in `redis_wake.rs`.
//!
//! Each contender has a manager of its own, as separate processes would.
//! Waiters pause 30 s between rounds: a call that returns within the 5 s
//! bound after the release was woken, not timed.

use std::time::{Duration, Instant};

use redlock_core::Redlock;
use redlock_mock::{MockCluster, MockNode};

use crate::regressions::eventually;

const TTL: Duration = Duration::from_secs(60);
const PAUSE: Duration = Duration::from_secs(30);
/// Ten times and more what a wake-up takes: only a missed one fails.
const BOUND: Duration = Duration::from_secs(5);

fn manager(cluster: &MockCluster, wake_ups: bool) -> Redlock<MockNode> {
    Redlock::builder(cluster.backends())
        .retry_delay(PAUSE, PAUSE)
        .acquire_timeout(Duration::from_secs(120))
        .wake_ups(wake_ups)
        .build()
        .expect("config")
}

/// Waits until every node answered `waiter`'s queued round, which leaves
/// its waiting mark: its plain round, then the queued one (a round every
/// node refused is released nowhere: none of them set anything).
fn marked(waiter: &Redlock<MockNode>) -> bool {
    eventually(|| waiter.stats().nodes.iter().all(|n| n.requests >= 2))
}

/// `holder` locks `key` on every node; `waiter` calls `lock` on it; once
/// `ready(waiter)` holds, `holder` releases. Returns how long the waiter's
/// call took in all, and from the release.
fn wait_out(
    holder: &Redlock<MockNode>,
    waiter: &Redlock<MockNode>,
    key: &str,
    ready: impl Fn(&Redlock<MockNode>) -> bool,
) -> (Duration, Duration) {
    let lock = holder.try_lock(key, TTL).expect("free");
    assert!(holder.flush(BOUND));
    std::thread::scope(|s| {
        let started = Instant::now();
        let waiting = s.spawn(|| {
            let got = waiter.lock(key, TTL).expect("acquired");
            let at = Instant::now();
            got.release().expect("held");
            at
        });
        assert!(ready(waiter), "the waiter never got that far");
        let released = Instant::now();
        lock.release().expect("held");
        let at = waiting.join().expect("no panic");
        (at - started, at.saturating_duration_since(released))
    })
}

/// The waiter's first round was answered by every node.
fn asked(waiter: &Redlock<MockNode>) -> bool {
    eventually(|| waiter.stats().nodes.iter().all(|n| n.requests >= 1))
}

#[test]
fn a_waiter_of_another_manager_is_woken_by_the_release() {
    let cluster = MockCluster::new(3);
    let holder = manager(&cluster, true);
    let waiter = manager(&cluster, true);
    let (_, after) = wait_out(&holder, &waiter, "woken", marked);
    assert!(
        after < BOUND,
        "acquired {after:?} after the release: the pause ran out, no wake-up"
    );
    let stats = waiter.stats().manager;
    assert!(stats.woken >= 1, "{stats:?}");
    assert!(stats.releases_heard >= 1, "{stats:?}");
    assert_eq!(holder.stats().manager.woken, 0);
}

#[test]
fn without_wake_ups_a_waiter_sleeps_its_pause() {
    // The control: the same waiter with wake-ups off polls, so the test
    // above would fail if the wake-up did not happen.
    let cluster = MockCluster::new(3);
    let holder = manager(&cluster, true);
    let waiter = Redlock::builder(cluster.backends())
        .retry_delay(Duration::from_millis(300), Duration::from_millis(300))
        .wake_ups(false)
        .build()
        .expect("config");
    let (took, _) = wait_out(&holder, &waiter, "polled", asked);
    assert!(
        took >= Duration::from_millis(300),
        "no pause without wake-ups"
    );
    let stats = waiter.stats().manager;
    assert_eq!((stats.woken, stats.releases_heard), (0, 0), "{stats:?}");
}

#[test]
fn a_clock_of_your_own_sleeps_its_pauses_whole() {
    // Wake-ups need the system clock: with `Builder::clock` the pauses are
    // slept on that clock, whole (a test clock may not run in real time).
    let cluster = MockCluster::new(3);
    let holder = manager(&cluster, true);
    let waiter = Redlock::builder(cluster.backends())
        .retry_delay(Duration::from_millis(300), Duration::from_millis(300))
        .clock(std::sync::Arc::new(redlock_core::SystemClock))
        .build()
        .expect("config");
    let (took, _) = wait_out(&holder, &waiter, "own-clock", asked);
    assert!(took >= Duration::from_millis(300), "woken");
    assert_eq!(waiter.stats().manager.woken, 0);
}

#[test]
fn a_key_waited_for_lately_is_acquired_in_turn_not_jumped() {
    // `a` holds while `b` waits; `a` releases and asks again at once. `a`
    // waited for this key before, so its first round is queued and gives
    // way to `b`'s mark: `b` gets the lock first.
    let cluster = MockCluster::new(3);
    let a = manager(&cluster, true);
    let b = manager(&cluster, true);
    // `a` waits once for `b`: the key is contended for `a` from then on.
    let theirs = b.try_lock("turns", TTL).expect("free");
    assert!(b.flush(BOUND));
    std::thread::scope(|s| {
        let waiting = s.spawn(|| a.lock("turns", TTL));
        assert!(marked(&a));
        theirs.release().expect("held");
        waiting
            .join()
            .expect("no panic")
            .expect("woken")
            .release()
            .expect("held")
    });
    // Every node free again (a woken round may have come to a node before
    // the release there): `a` locks all three, and `b` is refused by each.
    assert!(a.flush(BOUND) && b.flush(BOUND));
    let lock = a.try_lock("turns", TTL).expect("free");
    assert!(a.flush(BOUND));
    let before = b.stats().nodes.iter().map(|n| n.requests).min();
    let (b_at, a_at) = std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            let got = b.lock("turns", TTL).expect("woken");
            let at = Instant::now();
            got.release().expect("held");
            at
        });
        // `b` waits: its plain round and its queued one reached every node.
        assert!(eventually(|| {
            b.stats().nodes.iter().map(|n| n.requests).min() >= before.map(|r| r + 2)
        }));
        lock.release().expect("held");
        let again = a.lock_timeout("turns", TTL, BOUND).expect("after b");
        let a_at = Instant::now();
        again.release().expect("held");
        (waiting.join().expect("no panic"), a_at)
    });
    assert!(
        b_at < a_at,
        "the releaser jumped the waiter's line: a {:?} b {:?}",
        a.stats().manager,
        b.stats().manager
    );
    assert!(a.stats().manager.woken >= 1);
}
