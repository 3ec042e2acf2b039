//! The quick start: several threads contend for one resource on five
//! in-memory nodes while nodes fail, and the lock keeps working.
//!
//! Run with `cargo run --example quickstart` (no server needed).
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use redlock_core::{LockError, Redlock};
use redlock_mock::{MockCluster, MockNode};

const RESOURCE: &str = "invoice:42";
const TTL: Duration = Duration::from_secs(5);
const THREADS: usize = 4;
const ROUNDS: usize = 10;

/// Each thread takes the lock `ROUNDS` times and works inside it; returns how
/// many critical sections ran, failing if two ever overlapped.
fn contend(locks: &Redlock<MockNode>, phase: &str) -> anyhow::Result<usize> {
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (inside, done) = (Arc::clone(&inside), Arc::clone(&done));
                scope.spawn(move || -> anyhow::Result<()> {
                    for _ in 0..ROUNDS {
                        let lock = locks.lock(RESOURCE, TTL).context("acquire")?;
                        if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                            bail!("two holders inside the critical section");
                        }
                        std::thread::sleep(Duration::from_millis(1)); // the work
                        inside.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                        lock.release().context("release")?;
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker
                .join()
                .map_err(|_| anyhow::anyhow!("worker panicked"))??;
        }
        Ok(())
    })?;
    let n = done.load(Ordering::SeqCst);
    println!(
        "{phase:<34} {n:>3} critical sections by {THREADS} threads in {:>4} ms, never two at once",
        started.elapsed().as_millis()
    );
    Ok(n)
}

fn main() -> anyhow::Result<()> {
    let cluster = MockCluster::new(5);
    let locks = Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_millis(50))
        .retry_delay(Duration::from_millis(1), Duration::from_millis(10))
        .build()?;
    println!(
        "Redlock over {} in-memory nodes, quorum {}",
        cluster.len(),
        locks.quorum()
    );

    let mut total = contend(&locks, "all 5 nodes up:")?;

    cluster.node(1).go_down();
    total += contend(&locks, "mock-1 down:")?;

    cluster.node(3).freeze();
    total += contend(&locks, "mock-1 down, mock-3 frozen:")?;

    cluster.node(4).go_down();
    match locks.try_lock(RESOURCE, TTL) {
        Err(LockError::NoQuorum(report)) => {
            let names: Vec<_> = report.failed_nodes().map(|n| n.to_string()).collect();
            println!(
                "{:<34} no quorum, as expected; failed: {}",
                "mock-1, mock-4 down, mock-3 frozen:",
                names.join(", ")
            );
        }
        other => bail!("expected no quorum with 3 of 5 nodes failing, got {other:?}"),
    }

    cluster.node(1).come_up();
    cluster.node(3).thaw();
    cluster.node(4).come_up();
    total += contend(&locks, "all nodes back:")?;

    println!("done: {total} critical sections, zero overlaps");
    Ok(())
}
