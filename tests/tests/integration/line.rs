//! Callers of one manager waiting for the same resources queue in a local
//! line (FIFO) instead of polling the nodes, and a release hands the lock to
//! the next in line in the same batch as the release.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;
use redlock_core::backend::{AcquireOutcome, Claim, LockBackend, Request, Response};
use redlock_core::{LockError, NodeId, Redlock, Ttl};
use redlock_mock::{MockCluster, MockError, MockNode};

const TTL: Duration = Duration::from_secs(10);

fn manager(cluster: &MockCluster) -> Redlock<MockNode> {
    // A node timeout far above any scheduling delay, so that no queued
    // request is ever dropped as stale on a loaded machine.
    Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid config")
}

fn settle(locks: &Redlock<MockNode>) {
    assert!(locks.flush(Duration::from_secs(10)), "nodes caught up");
}

/// How many acquires each node granted and refused.
fn acquires(cluster: &MockCluster) -> Vec<(u64, u64)> {
    cluster
        .nodes()
        .iter()
        .map(|n| (n.stats().granted, n.stats().refused))
        .collect()
}

#[test]
fn callers_on_one_key_take_turns_without_a_single_refused_attempt() {
    const THREADS: usize = 8;
    const CYCLES: usize = 40;
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (locks, inside, overlaps) = (locks.clone(), inside.clone(), overlaps.clone());
            thread::spawn(move || {
                for cycle in 0..CYCLES {
                    let lock = locks
                        .lock_timeout("hot", TTL, Duration::from_secs(60))
                        .expect("every caller gets its turn");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    thread::yield_now();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    // Half release and wait, half drop and move on.
                    if cycle % 2 == 0 {
                        lock.release().expect("still held");
                    } else {
                        drop(lock);
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("no panic");
    }
    settle(&locks);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    // Each lock was won by exactly one acquire per node: nobody polled the
    // nodes while another caller of this manager held the key.
    let won = (THREADS * CYCLES) as u64;
    assert_eq!(acquires(&cluster), vec![(won, 0); 5]);
    assert!(cluster.nodes().iter().all(|n| !n.is_locked("hot")));
}

/// Records each batch a node's worker hands its backend.
#[derive(Debug)]
struct Recorder {
    node: MockNode,
    batches: Arc<Mutex<Vec<Vec<&'static str>>>>,
}

impl LockBackend for Recorder {
    type Error = MockError;
    fn node_id(&self) -> &NodeId {
        self.node.node_id()
    }
    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, MockError> {
        self.batches.lock().push(vec!["acquire"]);
        self.node.acquire(claim, ttl, fence)
    }
    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, MockError> {
        self.node.extend(claim, ttl)
    }
    fn release(&self, claim: &Claim) -> Result<bool, MockError> {
        self.batches.lock().push(vec!["release"]);
        self.node.release(claim)
    }
    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, MockError> {
        self.node.raise_fence(claim, at_least)
    }
    fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, MockError>>) {
        let kinds = requests
            .iter()
            .map(|r| match r {
                Request::Acquire { .. } => "acquire",
                Request::Release { .. } => "release",
                _ => "other",
            })
            .collect();
        self.batches.lock().push(kinds);
        out.extend(requests.iter().map(|r| r.run_on(&self.node)));
    }
}

#[test]
fn a_release_and_the_next_callers_acquire_reach_a_node_in_one_batch() {
    let cluster = MockCluster::new(3);
    let batches = Arc::new(Mutex::new(Vec::new()));
    let recorders = cluster.nodes().iter().map(|node| Recorder {
        node: node.clone(),
        batches: Arc::clone(&batches),
    });
    let locks = Redlock::builder(recorders)
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid config");
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let locks = locks.clone();
            thread::spawn(move || {
                for _ in 0..50 {
                    let lock = locks
                        .lock_timeout("hot", TTL, Duration::from_secs(60))
                        .expect("turn");
                    lock.release().expect("held");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("no panic");
    }
    let batches = batches.lock();
    let handed = batches
        .iter()
        .filter(|b| b.windows(2).any(|w| w == ["release", "acquire"]))
        .count();
    // 200 locks, 199 of them after another: some hand-offs must find the
    // next caller queued (one is enough to show the batching).
    assert!(
        handed > 0,
        "no release was followed by an acquire in one batch"
    );
}

#[test]
fn a_waiter_whose_deadline_passes_in_line_times_out_without_touching_the_nodes() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let held = locks
        .lock_timeout("k", TTL, Duration::from_secs(5))
        .expect("free");
    let waiter = {
        let locks = locks.clone();
        thread::spawn(move || locks.lock_timeout("k", TTL, Duration::from_millis(100)))
    };
    let err = waiter
        .join()
        .expect("no panic")
        .expect_err("held by another");
    match err {
        LockError::Timeout { attempts, last } => {
            assert_eq!(attempts, 0, "it never reached the nodes");
            assert!(matches!(*last, LockError::Contended(_)), "{last:?}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    settle(&locks);
    assert_eq!(acquires(&cluster), vec![(1, 0); 5]);
    // The line carries on: the next caller gets the lock once it is released.
    let next = {
        let locks = locks.clone();
        thread::spawn(move || locks.lock_timeout("k", TTL, Duration::from_secs(5)))
    };
    held.release().expect("held");
    let next = next.join().expect("no panic").expect("handed over");
    next.release().expect("held");
    settle(&locks);
    assert_eq!(acquires(&cluster), vec![(2, 0); 5]);
}

#[test]
fn a_waiter_behind_one_that_gives_up_still_gets_its_turn() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let held = locks.lock("k", TTL).expect("free");
    let spawn = |timeout| {
        let locks = locks.clone();
        thread::spawn(move || locks.lock_timeout("k", TTL, timeout).map(drop))
    };
    let impatient = spawn(Duration::from_millis(50));
    let patient = spawn(Duration::from_secs(30));
    assert!(matches!(
        impatient.join().expect("no panic"),
        Err(LockError::Timeout { attempts: 0, .. })
    ));
    drop(held);
    patient.join().expect("no panic").expect("its turn came");
}

#[test]
fn try_lock_does_not_queue_and_is_refused_by_the_nodes() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let _held = locks.lock("k", TTL).expect("free");
    let err = locks.try_lock("k", TTL).expect_err("held");
    let LockError::Contended(report) = err else {
        panic!("expected contention, got {err:?}");
    };
    assert!(report.refused() >= 3);
}

#[test]
fn a_leaked_guard_frees_its_line_when_its_lock_expires() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    std::mem::forget(locks.lock("k", Duration::from_millis(300)).expect("free"));
    // The waiter takes over once the leaked lock's validity is over, and the
    // nodes grant it because the key expired there too.
    let lock = locks
        .lock_timeout("k", TTL, Duration::from_secs(10))
        .expect("the leaked lock expired");
    assert!(lock.is_valid());
}

#[test]
fn a_holder_that_outlived_its_lock_does_not_hand_over_what_it_no_longer_owns() {
    let cluster = MockCluster::new(5);
    let locks = manager(&cluster);
    let stale = locks.lock("k", Duration::from_millis(300)).expect("free");
    let current = locks
        .lock_timeout("k", TTL, Duration::from_secs(10))
        .expect("the first lock expired");
    // The first guard comes back late: its release finds nothing of its own
    // and leaves the line to the current holder.
    assert!(matches!(stale.release(), Err(LockError::NotHeld(_))));
    assert!(current.is_valid());
    assert!(matches!(
        locks.lock_timeout("k", TTL, Duration::from_millis(50)),
        Err(LockError::Timeout { attempts: 0, .. })
    ));
    current.release().expect("still held");
    let again = locks
        .lock_timeout("k", TTL, Duration::from_secs(5))
        .expect("free again");
    again.release().expect("held");
}
