//! The event hook and `Redlock::stats` report what the manager does:
//! acquisitions by outcome, node failures and recoveries, keep-alive
//! extensions, lost locks and full queues.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redlock_core::backend::LockBackend;
use redlock_core::{
    CallKind, CallOutcome, Event, EventHandler, FailureKind, KeepAlive, LockError, LostReason,
    Redlock,
};
use redlock_mock::MockCluster;

/// What the hook saw, as owned values.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Call(CallKind, CallOutcome, u32),
    /// A failed call's last round: granted, refused, failed nodes.
    Round(usize, usize, usize),
    NodeFailed(String, FailureKind, u64),
    NodeRecovered(String, u64),
    KeptAlive,
    Lost(LostReason),
    HandedOff,
    QueueFull(String),
}

#[derive(Default)]
struct Record(Mutex<Vec<Seen>>);

impl EventHandler for Record {
    fn on_event(&self, event: &Event<'_>) {
        if let Event::Call {
            last_round: Some(round),
            ..
        } = event
        {
            self.0.lock().push(Seen::Round(
                round.granted,
                round.refused,
                round.failed.len(),
            ));
        }
        let seen = match event {
            Event::Call {
                kind,
                outcome,
                rounds,
                ..
            } => Seen::Call(*kind, *outcome, *rounds),
            Event::NodeFailed {
                node,
                kind,
                consecutive,
                ..
            } => Seen::NodeFailed(node.to_string(), *kind, *consecutive),
            Event::NodeRecovered {
                node,
                after_failures,
            } => Seen::NodeRecovered(node.to_string(), *after_failures),
            Event::KeptAlive { .. } => Seen::KeptAlive,
            Event::Lost { reason, .. } => Seen::Lost(*reason),
            Event::QueueFull { node } => Seen::QueueFull(node.to_string()),
            Event::HandedOff { .. } => Seen::HandedOff,
            _ => return,
        };
        self.0.lock().push(seen);
    }
}

impl Record {
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.0.lock())
    }
}

const TTL: Duration = Duration::from_secs(10);

fn setup(n: usize) -> (MockCluster, Redlock<redlock_mock::MockNode>, Arc<Record>) {
    let cluster = MockCluster::new(n);
    let record = Arc::new(Record::default());
    let locks = Redlock::builder(cluster.backends())
        .events(Arc::clone(&record) as Arc<dyn EventHandler>)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(5))
        .build()
        .expect("config");
    (cluster, locks, record)
}

#[test]
fn calls_are_reported_and_counted_by_outcome() {
    let (_cluster, locks, record) = setup(3);
    let other = Redlock::new(_cluster.backends()).expect("config");
    let mut lock = locks.try_lock("a", TTL).expect("free");
    lock.extend(TTL).expect("extend");
    let held = other.try_lock("b", TTL).expect("free");
    // `other` returned at a quorum: its acquire must have run on every node
    // before `locks` asks, or `locks` could be granted on the late one and
    // its round record show a grant.
    assert!(other.flush(Duration::from_secs(5)), "nodes caught up");
    assert!(matches!(
        locks.try_lock("b", TTL),
        Err(LockError::Contended(_))
    ));
    let timed_out = locks.lock_timeout("b", TTL, Duration::from_millis(30));
    assert!(matches!(timed_out, Err(LockError::Timeout { .. })));
    held.release().expect("release");
    lock.release().expect("release");

    let seen = record.take();
    // The contended call's last round: nobody granted, a quorum refused.
    let rounds: Vec<_> = seen
        .iter()
        .filter(|s| matches!(s, Seen::Round(..)))
        .collect();
    assert!(
        matches!(rounds.first(), Some(Seen::Round(0, refused, 0)) if *refused >= 2),
        "{seen:?}"
    );
    let calls: Vec<_> = seen
        .iter()
        .filter(|s| matches!(s, Seen::Call(..)))
        .cloned()
        .collect();
    assert_eq!(calls.len(), 5, "{seen:?}");
    assert_eq!(calls[0], Seen::Call(CallKind::Lock, CallOutcome::Ok, 1));
    assert_eq!(calls[1], Seen::Call(CallKind::Extend, CallOutcome::Ok, 1));
    assert_eq!(
        calls[2],
        Seen::Call(CallKind::Lock, CallOutcome::Contended, 1)
    );
    let Seen::Call(CallKind::Lock, CallOutcome::Timeout, rounds) = calls[3] else {
        panic!("{:?}", calls[3]);
    };
    assert!(rounds >= 1, "{rounds}");
    assert_eq!(calls[4], Seen::Call(CallKind::Release, CallOutcome::Ok, 1));

    let stats = locks.stats().manager;
    assert_eq!(
        (
            stats.acquired,
            stats.contended,
            stats.timed_out,
            stats.extended
        ),
        (1, 1, 1, 1)
    );
}

#[test]
fn releases_are_reported_confirmed_by_release_or_sent_by_drop() {
    let clock = redlock_mock::ManualClock::new();
    let cluster = MockCluster::with_clock(3, Arc::new(clock.clone()));
    let record = Arc::new(Record::default());
    let locks = Redlock::builder(cluster.backends())
        .clock(Arc::new(clock.clone()))
        .events(Arc::clone(&record) as Arc<dyn EventHandler>)
        .build()
        .expect("config");
    locks
        .try_lock("a", TTL)
        .expect("free")
        .release()
        .expect("held");
    drop(locks.try_lock("b", TTL).expect("free"));
    assert!(
        locks.flush(Duration::from_secs(5)),
        "the dropped release ran"
    );
    assert!(cluster.nodes().iter().all(|n| !n.is_locked("b")));
    let expiring = locks.try_lock("c", Duration::from_secs(1)).expect("free");
    assert!(locks.flush(Duration::from_secs(5)), "every node granted");
    clock.advance(Duration::from_secs(2));
    let err = expiring.release().expect_err("expired");
    assert!(matches!(err, LockError::NotHeld(_)), "{err:?}");
    let releases: Vec<_> = record
        .take()
        .into_iter()
        .filter(|s| matches!(s, Seen::Call(CallKind::Release, ..)))
        .collect();
    assert_eq!(
        releases,
        [
            Seen::Call(CallKind::Release, CallOutcome::Ok, 1),
            Seen::Call(CallKind::Release, CallOutcome::Ok, 1),
            Seen::Call(CallKind::Release, CallOutcome::Contended, 1),
        ]
    );
}

#[test]
fn node_failures_and_recoveries_are_reported_and_counted() {
    let (cluster, locks, record) = setup(3);
    cluster.node(1).go_down();
    locks
        .try_lock("a", TTL)
        .expect("quorum")
        .release()
        .expect("release");
    locks
        .try_lock("a", TTL)
        .expect("quorum")
        .release()
        .expect("release");
    // A quorum decided each call; let the down node's answers come in
    // (false: it is down, and keeps the releases for more tries, which
    // fail too and count).
    assert!(!locks.flush(Duration::from_secs(5)));
    let node = cluster.node(1).node_id().to_string();
    let stats = locks.stats();
    let failed = stats.nodes[1].failures.backend;
    assert!(failed >= 4, "{stats:?}");
    assert_eq!(stats.nodes[1].consecutive_failures, failed);
    assert_eq!(stats.nodes[1].failures.total(), failed);
    assert!(stats.nodes[1]
        .last_error
        .as_deref()
        .is_some_and(|e| e.contains("down")));
    assert_eq!(stats.nodes[0].failures.total(), 0);
    assert_eq!(stats.nodes[0].requests, 4);

    cluster.node(1).come_up();
    locks
        .try_lock("a", TTL)
        .expect("all up")
        .release()
        .expect("release");
    assert!(locks.flush(Duration::from_secs(5)));
    let seen: Vec<_> = record
        .take()
        .into_iter()
        .filter(|s| !matches!(s, Seen::Call(..) | Seen::Round(..)))
        .collect();
    let failed: Vec<_> = (1..=4)
        .map(|n| Seen::NodeFailed(node.clone(), FailureKind::Backend, n))
        .collect();
    assert_eq!(seen[..4], failed[..], "{seen:?}");
    let recovered: Vec<_> = seen
        .iter()
        .filter(|s| matches!(s, Seen::NodeRecovered(..)))
        .collect();
    assert!(
        matches!(recovered[..], [Seen::NodeRecovered(n, after)] if *n == node && *after >= 4),
        "{seen:?}"
    );
    assert_eq!(locks.stats().nodes[1].consecutive_failures, 0);
}

#[test]
fn a_kept_lock_reports_its_extensions_and_its_loss() {
    let (cluster, locks, record) = setup(3);
    let lock = locks
        .try_lock("kept", Duration::from_millis(300))
        .expect("free");
    let (tx, rx) = mpsc::channel();
    lock.keep_alive(KeepAlive::new().on_lost(move |reason| {
        let _ = tx.send(reason);
    }))
    .expect("keep alive");
    // Wait for one extension, then take two nodes down: the next one fails.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !record.0.lock().contains(&Seen::KeptAlive) {
        assert!(std::time::Instant::now() < deadline, "never extended");
        std::thread::sleep(Duration::from_millis(5));
    }
    cluster.node(0).go_down();
    cluster.node(1).go_down();
    let reason = rx.recv_timeout(Duration::from_secs(10)).expect("lost");
    assert_eq!(reason, LostReason::ExtendFailed);
    let seen = record.take();
    assert!(
        seen.contains(&Seen::Lost(LostReason::ExtendFailed)),
        "{seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|s| matches!(s, Seen::Lost(_))).count(),
        1,
        "{seen:?}"
    );
    let stats = locks.stats().manager;
    assert_eq!(stats.lost, 1);
    assert!(stats.extended >= 1);
    drop(lock);
}

#[test]
fn a_full_queue_is_reported() {
    let cluster = MockCluster::new(3);
    let record = Arc::new(Record::default());
    let locks = Redlock::builder(cluster.backends())
        .events(Arc::clone(&record) as Arc<dyn EventHandler>)
        .queue_depth(1)
        .node_timeout(Duration::from_millis(20))
        .build()
        .expect("config");
    cluster.node(2).freeze();
    // The frozen node's worker holds the first request; the next fills its
    // queue of one; the third is turned away.
    for key in ["q1", "q2", "q3"] {
        locks
            .try_lock(key, TTL)
            .expect("quorum")
            .release()
            .expect("release");
    }
    let node = cluster.node(2).node_id().to_string();
    assert!(
        record.take().contains(&Seen::QueueFull(node)),
        "no QueueFull"
    );
    assert!(locks.stats().nodes[2].failures.overloaded >= 1);
    cluster.node(2).thaw();
}

#[test]
fn local_hand_offs_are_reported_and_counted() {
    let (_cluster, locks, record) = setup(3);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..100 {
                    let lock = locks.lock("line", TTL).expect("in line");
                    std::thread::yield_now();
                    lock.release().expect("release");
                }
            });
        }
    });
    let handed = locks.stats().manager.handed_off;
    // Four callers looping on one key queue in the line: the lock passes
    // from caller to caller by hand-off.
    assert!(handed > 0, "no hand-off in 400 contended cycles");
    let events = record
        .take()
        .iter()
        .filter(|s| matches!(s, Seen::HandedOff))
        .count();
    assert_eq!(u64::try_from(events).expect("fits"), handed);
    assert_eq!(locks.stats().manager.acquired, 400);
}

/// Records each decided round's kind and decision.
#[derive(Default)]
struct Rounds(
    Mutex<
        Vec<(
            redlock_core::engine::RoundKind,
            redlock_core::decide::Decision,
            usize,
        )>,
    >,
);

impl EventHandler for Rounds {
    fn on_event(&self, event: &Event<'_>) {
        if let Event::Round(round) = event {
            self.0
                .lock()
                .push((round.kind, round.decision, round.summary.failed.len()));
        }
    }
}

#[test]
fn every_decided_round_is_reported_with_its_nodes() {
    use redlock_core::decide::Decision;
    use redlock_core::engine::RoundKind;
    let cluster = MockCluster::new(3);
    let rounds = Arc::new(Rounds::default());
    let locks = Redlock::builder(cluster.backends())
        .events(Arc::clone(&rounds) as Arc<dyn EventHandler>)
        .build()
        .expect("config");
    cluster.node(2).go_down();
    let mut lock = locks.try_lock("r", TTL).expect("quorum");
    lock.extend(TTL).expect("extend");
    lock.release().expect("release");
    let other = Redlock::new(cluster.backends()).expect("config");
    let held = other.try_lock("r", TTL).expect("free");
    assert!(locks.try_lock("r", TTL).is_err());
    held.release().expect("release");
    // With a second node down, only both failures decide the round: its
    // record must name them (above, the down node's answer may come after
    // the two live nodes decided).
    cluster.node(1).go_down();
    assert!(matches!(
        locks.try_lock("s", TTL),
        Err(LockError::NoQuorum(_))
    ));
    let seen = rounds.0.lock().clone();
    let kinds: Vec<RoundKind> = seen.iter().map(|r| r.0).collect();
    assert_eq!(
        kinds,
        [
            RoundKind::Acquire,
            RoundKind::Extend,
            RoundKind::Release,
            RoundKind::Acquire,
            RoundKind::Acquire
        ],
        "{seen:?}"
    );
    assert!(seen[..3].iter().all(|r| r.1 == Decision::Won), "{seen:?}");
    assert_eq!(seen[3].1, Decision::Lost, "{seen:?}");
    // The nodes that are down show as failed.
    assert_eq!((seen[4].1, seen[4].2), (Decision::Lost, 2), "{seen:?}");
}

#[test]
fn requests_still_queued_past_their_deadline_are_counted_apart() {
    let cluster = MockCluster::new(3);
    let locks = redlock_core::Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_millis(20))
        .build()
        .expect("config");
    // Uncontended and quick: nothing waits in a queue.
    locks
        .try_lock("quick", Duration::from_secs(5))
        .expect("free")
        .release()
        .expect("held");
    assert!(locks
        .stats()
        .nodes
        .iter()
        .all(|n| n.queued_past_deadline == 0));
    // Each request now takes 30 ms on every node, longer than a round
    // waits: eight callers' acquires queue behind one another, and those
    // still queued when their round stopped waiting are dropped unsent.
    for node in cluster.nodes() {
        node.set_latency(Duration::from_millis(30));
    }
    std::thread::scope(|s| {
        for t in 0..8 {
            let locks = &locks;
            s.spawn(move || {
                let _ = locks.try_lock(format!("slow-{t}").as_str(), Duration::from_secs(5));
            });
        }
    });
    assert!(locks.flush(Duration::from_secs(10)));
    let stats = locks.stats();
    let dropped: u64 = stats.nodes.iter().map(|n| n.queued_past_deadline).sum();
    assert!(
        dropped > 0,
        "no request was dropped as queued past its deadline"
    );
    for node in &stats.nodes {
        assert!(
            node.queued_past_deadline <= node.failures.timed_out,
            "{node:?}"
        );
    }
}

/// The resources and rounds of every lock call the hook saw.
#[derive(Default)]
struct Named(Mutex<Vec<(Vec<String>, CallOutcome, u32)>>);

impl EventHandler for Named {
    fn on_event(&self, event: &Event<'_>) {
        if let Event::Call {
            kind: CallKind::Lock,
            resources,
            outcome,
            rounds,
            ..
        } = event
        {
            self.0
                .lock()
                .push((resources.keys().to_vec(), *outcome, *rounds));
        }
    }
}

#[test]
fn reads_and_permits_are_reported_under_their_keys() {
    let cluster = MockCluster::new(3);
    let named = Arc::new(Named::default());
    let locks = Redlock::builder(cluster.backends())
        .events(Arc::clone(&named) as Arc<dyn EventHandler>)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(2))
        .build()
        .expect("valid config");
    let ttl = Duration::from_secs(10);
    let write = locks.try_write("doc", ttl).expect("free");
    let err = locks
        .read_timeout("doc", ttl, Duration::from_millis(30))
        .expect_err("a writer inside");
    assert!(matches!(err, LockError::Timeout { .. }), "{err}");
    drop(write);
    let _read = locks.try_read("doc", ttl).expect("free again");
    let permit = locks
        .semaphore("jobs", 2)
        .expect("semaphore")
        .try_acquire(ttl)
        .expect("free");
    let seen = named.0.lock().clone();
    let on_doc: Vec<_> = seen.iter().filter(|(keys, ..)| keys == &["doc"]).collect();
    assert_eq!(on_doc.len(), 3, "the write and two reads: {seen:?}");
    assert!(
        matches!(on_doc[1], (_, CallOutcome::Timeout, rounds) if *rounds > 1),
        "{seen:?}"
    );
    assert!(matches!(on_doc[2], (_, CallOutcome::Ok, 1)), "{seen:?}");
    let won = format!("jobs{}{}", redlock_core::keys::PERMIT_INFIX, permit.slot());
    assert!(
        seen.iter().any(
            |(keys, outcome, _)| keys.as_slice() == std::slice::from_ref(&won)
                && *outcome == CallOutcome::Ok
        ),
        "{seen:?}"
    );
}

/// Counts the releases the hook was told were dropped, by node.
#[derive(Default)]
struct Dropped(Mutex<Vec<(String, u64)>>);

impl EventHandler for Dropped {
    fn on_event(&self, event: &Event<'_>) {
        if let Event::ReleasesDropped { node, count } = event {
            self.0.lock().push((node.to_string(), *count));
        }
    }
}

/// The releases kept per failed node (`NodeStats::releases_dropped`).
const KEPT_RELEASES: usize = 4096;

#[test]
fn bug_releases_kept_for_a_down_node_grew_without_bound() {
    // The nodes' keys expire by a clock of the test's own: nothing expires
    // until it is moved, however slow the run.
    let clock = redlock_mock::ManualClock::new();
    let cluster = MockCluster::with_clock(3, Arc::new(clock.clone()));
    let dropped = Arc::new(Dropped::default());
    let locks = Redlock::builder(cluster.backends())
        .events(Arc::clone(&dropped) as Arc<dyn EventHandler>)
        .build()
        .expect("config");
    // A TTL far beyond the test: the kept releases are never given up.
    let ttl = Duration::from_secs(600);
    let over = 5;
    let keys: Vec<String> = (0..KEPT_RELEASES + over)
        .map(|i| format!("churn:{i}"))
        .collect();
    let guards: Vec<_> = keys
        .iter()
        .map(|key| locks.try_lock(key.as_str(), ttl).expect("free"))
        .collect();
    assert!(locks.flush(Duration::from_secs(10)), "nodes caught up");
    let down = cluster.node(2);
    assert_eq!(down.live_keys(), keys.len());
    down.go_down();
    for guard in guards {
        guard.release().expect("a quorum released");
    }
    // Node 2 failed every release; at most KEPT_RELEASES are kept for it,
    // the oldest dropped first, and said so.
    assert!(!locks.flush(Duration::from_secs(10)), "node 2 is down");
    let stats = locks.stats();
    assert_eq!(stats.nodes[2].releases_dropped, over as u64, "{stats:?}");
    assert!(stats.nodes[..2].iter().all(|n| n.releases_dropped == 0));
    let told: Vec<_> = dropped.0.lock().clone();
    let node = down.node_id().to_string();
    assert!(told.iter().all(|(n, _)| *n == node), "{told:?}");
    assert_eq!(told.iter().map(|(_, c)| c).sum::<u64>(), over as u64);

    // Back up: the kept releases are sent, the dropped ones' keys stay
    // until their TTL.
    down.come_up();
    assert!(locks.flush(Duration::from_secs(10)), "node 2 caught up");
    let left: Vec<_> = keys.iter().filter(|k| down.is_locked(k)).collect();
    assert_eq!(left, keys[..over].iter().collect::<Vec<_>>());
    // As on Redis, a key lives through its last millisecond.
    clock.advance(ttl);
    assert_eq!(down.live_keys(), over);
    clock.advance(Duration::from_millis(1));
    assert_eq!(down.live_keys(), 0);
}
