//! Scoped locking with automatic extension: a job that runs three times its
//! TTL keeps the lock, checks it before committing, and notices when it is lost.
//!
//! Run with `cargo run --example scoped` (no server needed).
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use redlock_core::{KeepAlive, LockError, Redlock};
use redlock_mock::MockCluster;

fn main() -> anyhow::Result<()> {
    let cluster = MockCluster::new(5);
    let locks = Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_millis(20))
        .build()?;
    let ttl = Duration::from_millis(300);

    // 1. A job longer than the TTL: the keeper thread extends the lock.
    let started = Instant::now();
    let rows = locks.with_lock("nightly-export", ttl, |lock| {
        std::thread::sleep(ttl * 3);
        lock.ensure_held()?; // check right before the side effect
        Ok::<_, LockError<_>>(1_204)
    })??;
    println!(
        "job ran {} ms with a {} ms TTL and exported {rows} rows under the lock",
        started.elapsed().as_millis(),
        ttl.as_millis()
    );

    // 2. The lock is lost mid-job (3 of 5 nodes freeze): the job sees it.
    let (tx, rx) = std::sync::mpsc::channel();
    let policy = KeepAlive::new().on_lost(move |reason| {
        let _ = tx.send(reason);
    });
    let outcome = locks.with_lock_kept("nightly-export", ttl, policy, |lock| {
        for i in 0..3 {
            cluster.node(i).freeze();
        }
        while lock.ensure_held().is_ok() {
            std::thread::sleep(Duration::from_millis(10));
        }
        "skipped the commit"
    });
    for i in 0..3 {
        cluster.node(i).thaw();
    }
    match outcome {
        Err(LockError::Lost { reason, .. }) => {
            println!("lost mid-job ({reason}); callback said: {}", rx.recv()?)
        }
        other => anyhow::bail!("expected a lost lock, got {other:?}"),
    }

    // 3. A bound on total hold time stops a runaway holder.
    let policy = KeepAlive::new().max_hold(Duration::from_millis(500));
    let outcome = locks.with_lock_kept("nightly-export", ttl, policy, |lock| {
        while !lock.is_lost() {
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    println!(
        "runaway holder: {}",
        outcome
            .err()
            .map_or("not stopped".into(), |e| e.to_string())
    );
    Ok(())
}
