//! Cancelling a waiting `lock` call from another thread: a worker waits
//! (with no deadline) for a lock another process holds, and a shutdown hook
//! on another thread stops the wait; the call returns
//! `LockError::Cancelled` promptly and leaves nothing held.
//!
//! Run with `cargo run --example cancel` (no server needed).
#![allow(clippy::print_stdout)]

use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use redlock_core::{Cancel, LockError, Redlock};
use redlock_mock::MockCluster;

const TTL: Duration = Duration::from_secs(60);

fn main() -> anyhow::Result<()> {
    let cluster = MockCluster::new(5);
    let other_process = Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_millis(500)) // margin for a loaded machine
        .build()?;
    let locks = Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(5), Duration::from_millis(50))
        .build()?;

    // Another process holds the lock, for a long while.
    let held = other_process.try_lock("reindex", TTL)?;
    println!("another process holds \"reindex\" for {} s", TTL.as_secs());

    // The worker waits for it with no deadline, until a `Cancel` handle
    // (cheap to clone, shared with whoever may stop the wait) is cancelled.
    let cancel = Cancel::new();
    let (waiting, wait_started) = mpsc::channel();
    let worker = {
        let (locks, cancel) = (locks.clone(), cancel.clone());
        std::thread::spawn(move || {
            let _ = waiting.send(());
            let result = locks.lock_cancellable("reindex", TTL, None, &cancel);
            (result, Instant::now())
        })
    };

    // The shutdown hook (here: main, after a while) cancels the wait.
    wait_started.recv()?;
    std::thread::sleep(Duration::from_millis(200));
    println!("worker is waiting; cancelling from another thread");
    let asked = Instant::now();
    cancel.cancel();
    let (result, returned) = worker
        .join()
        .map_err(|_| anyhow::anyhow!("the worker panicked"))?;
    let took = returned.saturating_duration_since(asked);
    match result {
        Err(LockError::Cancelled) => {
            println!(
                "lock_cancellable returned Cancelled {} ms after cancel()",
                took.as_millis()
            )
        }
        other => bail!("expected Cancelled, got {other:?}"),
    }
    // Promptly: a pause between rounds stops within about 10 ms, a round
    // under way takes at most a node timeout. The bound is generous for a
    // loaded machine; it is not the 60 s the lock is still held.
    ensure!(
        took < Duration::from_secs(5),
        "the cancelled call took {took:?}"
    );

    // A handle stays cancelled: later calls with it return at once, even
    // for a free lock. Use a new `Cancel` for new work.
    held.release()?;
    ensure!(
        matches!(
            locks.lock_cancellable("reindex", TTL, None, &cancel),
            Err(LockError::Cancelled)
        ),
        "a cancelled handle must refuse later calls"
    );
    println!("a cancelled handle refuses later calls at once");
    let lock = locks.lock_cancellable("reindex", TTL, None, &Cancel::new())?;
    println!("with a fresh handle the (now free) lock is taken");
    lock.release()?;

    // The cancelled call left nothing behind on the nodes.
    ensure!(
        locks.flush(Duration::from_secs(10)),
        "nodes did not catch up"
    );
    ensure!(
        cluster
            .nodes()
            .iter()
            .all(|node| !node.is_locked("reindex")),
        "a key was left behind"
    );
    println!("no key left on any node");
    Ok(())
}
