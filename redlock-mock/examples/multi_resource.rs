//! Multi-resource locks: transfers lock both accounts, all or none, so two
//! transfers that share an account never run at once.
//!
//! Run with `cargo run --example multi_resource` (no server needed).
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redlock_core::{LockError, Redlock};
use redlock_mock::MockCluster;

fn main() -> anyhow::Result<()> {
    let cluster = MockCluster::new(5);
    let locks = Redlock::builder(cluster.backends())
        .retry_delay(Duration::ZERO, Duration::from_millis(2))
        .build()?;
    let balances: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(1_000)).collect();
    let ttl = Duration::from_secs(5);

    std::thread::scope(|s| {
        for (from, to) in [(0, 1), (1, 2), (2, 3), (3, 0)] {
            let (locks, balances) = (&locks, &balances);
            s.spawn(move || -> anyhow::Result<()> {
                for _ in 0..200 {
                    let keys = [format!("account:{from}"), format!("account:{to}")];
                    let lock = locks.lock(keys, ttl)?;
                    // Read, then write: only safe because both accounts are locked.
                    let (a, b) = (
                        balances[from].load(Ordering::SeqCst),
                        balances[to].load(Ordering::SeqCst),
                    );
                    std::thread::yield_now();
                    balances[from].store(a - 1, Ordering::SeqCst);
                    balances[to].store(b + 1, Ordering::SeqCst);
                    lock.release()?;
                }
                Ok(())
            });
        }
    });
    let total: u64 = balances.iter().map(|b| b.load(Ordering::SeqCst)).sum();
    println!("800 transfers over overlapping account pairs; total is {total} (4000 means no lost update)");
    anyhow::ensure!(total == 4_000, "lost updates");

    let held = locks.try_lock(["account:0", "account:1"], ttl)?;
    match locks.try_lock(["account:1", "account:2"], ttl) {
        Err(LockError::Contended(_)) => {
            println!("[account:1, account:2] refused while [account:0, account:1] is held")
        }
        other => anyhow::bail!("expected contention, got {other:?}"),
    }
    assert!(locks.flush(Duration::from_secs(1)));
    let partial = cluster
        .nodes()
        .iter()
        .filter(|n| n.is_locked("account:2"))
        .count();
    println!("nodes holding a partial key for the refused lock: {partial}");
    held.release()?;
    Ok(())
}
