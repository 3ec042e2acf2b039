//! The in-memory nodes' throughput, for the benchmarks (docs/benchmarks.md,
//! "Mock throughput and simulator sweeps"): how many lock cycles a second the mock serves, on
//! its own (requests straight to five nodes) and under a manager (one
//! caller on distinct keys, one on a hot key, four threads contending for
//! one key with `lock`). Prints one line per mode; compare two builds by
//! their ratio, measured in one run each, alternated.
//!
//! Run with `cargo run --release --example throughput -p redlock-mock [secs]`.
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use redlock_core::backend::{Claim, LockBackend, Token};
use redlock_core::{Redlock, Resources, Ttl};
use redlock_mock::MockCluster;

const TTL: Duration = Duration::from_secs(30);

/// Runs `cycle` until `secs` pass; cycles per second.
fn rate(secs: f64, mut cycle: impl FnMut(u64) -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed().as_secs_f64() < secs {
        for _ in 0..64 {
            cycle(n)?;
            n += 1;
        }
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

fn main() -> anyhow::Result<()> {
    let secs: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()
        .context("seconds")?
        .unwrap_or(2.0);
    let cluster = MockCluster::new(5);
    let ttl = Ttl::new(TTL)?;

    // The nodes alone: acquire and release, one key, on each of five nodes.
    let names: Vec<Resources> = (0..1024)
        .map(|i| Resources::one(format!("raw:{i}")))
        .collect::<Result<_, _>>()?;
    let nodes = cluster.backends();
    let raw = rate(secs, |n| {
        let claim = Claim::new(
            names[(n % 1024) as usize].clone(),
            Token::from_bytes([7; 20]),
        );
        for node in &nodes {
            node.acquire(&claim, ttl, false)?;
            node.release(&claim)?;
        }
        Ok(())
    })?;
    println!("nodes alone (acquire+release on 5 nodes): {raw:.0} cycles/s");

    let locks = Redlock::new(cluster.backends())?;
    let distinct = rate(secs, |n| {
        locks.try_lock(format!("k:{}", n % 1024), TTL)?.release()?;
        Ok(())
    })?;
    println!("manager, 1 caller, distinct keys: {distinct:.0} cycles/s");
    let hot = rate(secs, |_| {
        locks.try_lock("hot", TTL)?.release()?;
        Ok(())
    })?;
    println!("manager, 1 caller, one key: {hot:.0} cycles/s");

    let done = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<()> {
                    while started.elapsed().as_secs_f64() < secs {
                        locks.lock("contended", TTL)?.release()?;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker
                .join()
                .map_err(|_| anyhow::anyhow!("a worker panicked"))??;
        }
        Ok(())
    })?;
    let contended = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    println!("manager, 4 threads, one key (lock): {contended:.0} cycles/s");
    Ok(())
}
