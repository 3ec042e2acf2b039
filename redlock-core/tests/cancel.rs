//! `Redlock::lock_cancellable` stopped from another thread: waiting in the
//! local line, polling the nodes against another manager, and cancelled
//! before the call. Bounds are hang bounds (10x and more what is expected).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlock_core::{Cancel, LockError, Redlock};
use redlock_mock::MockCluster;

const TTL: Duration = Duration::from_secs(30);
const PROMPT: Duration = Duration::from_secs(2);

/// Starts `lock_cancellable` with no deadline on another thread; returns
/// the receiver of its result.
fn wait_in_thread(
    locks: &Redlock<redlock_mock::MockNode>,
    key: &'static str,
    cancel: &Cancel,
) -> mpsc::Receiver<Result<(), String>> {
    let (tx, rx) = mpsc::channel();
    let locks = locks.clone();
    let cancel = cancel.clone();
    thread::spawn(move || {
        let result = locks
            .lock_cancellable(key, TTL, None, &cancel)
            .map(drop)
            .map_err(|e| match e {
                LockError::Cancelled => "cancelled".to_owned(),
                other => other.to_string(),
            });
        let _ = tx.send(result);
    });
    rx
}

/// Cancels `cancel` and requires the waiting call behind `rx` to return
/// `Cancelled` within [`PROMPT`].
fn cancel_and_expect_prompt_return(cancel: &Cancel, rx: &mpsc::Receiver<Result<(), String>>) {
    let asked = Instant::now();
    cancel.cancel();
    let result = rx
        .recv_timeout(PROMPT)
        .expect("the waiter returned promptly");
    assert_eq!(result, Err("cancelled".to_owned()));
    assert!(asked.elapsed() < PROMPT);
}

#[test]
fn a_waiter_in_the_local_line_stops_at_once_and_leaves_the_line() {
    let cluster = MockCluster::new(3);
    let locks = Redlock::new(cluster.backends()).unwrap();
    let held = locks.lock("line", TTL).unwrap();
    let cancel = Cancel::new();
    let rx = wait_in_thread(&locks, "line", &cancel);
    // Still waiting a while later: the lock is held for 30 s.
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    cancel_and_expect_prompt_return(&cancel, &rx);
    // The line does not wait for the cancelled caller: after the release,
    // the next caller acquires at once.
    held.release().unwrap();
    let next = locks.lock_timeout("line", TTL, Duration::from_secs(1));
    assert!(next.is_ok(), "{next:?}");
}

#[test]
fn a_caller_polling_the_nodes_stops_at_once_and_leaves_no_key() {
    let cluster = MockCluster::new(3);
    let holder = Redlock::new(cluster.backends()).unwrap();
    // Another manager: it retries rounds against the nodes.
    let waiter = Redlock::new(cluster.backends()).unwrap();
    let held = holder.lock("nodes", TTL).unwrap();
    let cancel = Cancel::new();
    let rx = wait_in_thread(&waiter, "nodes", &cancel);
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    cancel_and_expect_prompt_return(&cancel, &rx);
    held.release().unwrap();
    assert!(waiter.flush(PROMPT) && holder.flush(PROMPT));
    assert!(cluster.nodes().iter().all(|node| !node.is_locked("nodes")));
}

#[test]
fn a_cancelled_handle_refuses_at_once_and_an_uncancelled_one_acquires() {
    let cluster = MockCluster::new(3);
    let locks = Redlock::new(cluster.backends()).unwrap();
    let cancel = Cancel::new();
    let deadline = Some(Instant::now() + Duration::from_secs(5));
    let lock = locks.lock_cancellable("k", TTL, deadline, &cancel).unwrap();
    lock.release().unwrap();
    cancel.cancel();
    let refused = locks.lock_cancellable("k", TTL, deadline, &cancel);
    assert!(matches!(refused, Err(LockError::Cancelled)), "{refused:?}");
    assert!(!refused.unwrap_err().is_retryable());
    assert!(locks.flush(PROMPT));
    assert!(cluster.nodes().iter().all(|node| !node.is_locked("k")));
}

#[test]
fn a_deadline_still_ends_an_uncancelled_wait() {
    let cluster = MockCluster::new(3);
    let holder = Redlock::new(cluster.backends()).unwrap();
    let waiter = Redlock::new(cluster.backends()).unwrap();
    let _held = holder.lock("d", TTL).unwrap();
    let deadline = Some(Instant::now() + Duration::from_millis(300));
    let result = waiter.lock_cancellable("d", TTL, deadline, &Cancel::new());
    assert!(
        matches!(result, Err(LockError::Timeout { .. })),
        "{result:?}"
    );
}
