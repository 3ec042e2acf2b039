//! Measures what fencing costs per acquire on 5 real masters: acquire+release
//! cycles with and without fencing, interleaved in one run, reported as a
//! ratio.
//!
//! Run with `cargo run --release -p redlock-tests --example fencing_cost`.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use redlock_redis::{RedisBackend, Redlock};
use redlock_tests::harness::{RedisCluster, ServerOptions};

const BATCH: usize = 1000;
const BATCHES: usize = 5;

fn manager(cluster: &RedisCluster, fencing: bool) -> anyhow::Result<Redlock> {
    let backends = cluster
        .urls()
        .iter()
        .map(|u| {
            RedisBackend::builder(u)
                .node_timeout(Duration::from_millis(200))
                .build()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Redlock::builder(backends)
        .node_timeout(Duration::from_millis(200))
        .fencing(fencing)
        .build()?)
}

/// Mean microseconds per acquire+release cycle over one batch.
fn batch(locks: &Redlock, key: &str) -> anyhow::Result<f64> {
    let started = Instant::now();
    for _ in 0..BATCH {
        locks.try_lock(key, Duration::from_secs(10))?.release()?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / BATCH as f64)
}

fn main() -> anyhow::Result<()> {
    let cluster = RedisCluster::start(5, &ServerOptions::new())?;
    let (plain, fenced) = (manager(&cluster, false)?, manager(&cluster, true)?);
    batch(&plain, "locks:warm")?;
    batch(&fenced, "locks:warm")?;
    let (mut p, mut f) = (Vec::new(), Vec::new());
    for _ in 0..BATCHES {
        p.push(batch(&plain, "locks:plain")?);
        f.push(batch(&fenced, "locks:fenced")?);
    }
    p.sort_by(f64::total_cmp);
    f.sort_by(f64::total_cmp);
    let (p, f) = (p[BATCHES / 2], f[BATCHES / 2]);
    println!("5 masters, {BATCHES} interleaved batches of {BATCH} cycles, median batch:");
    println!("plain acquire+release:  {p:.0} us/cycle");
    println!("fenced acquire+release: {f:.0} us/cycle");
    println!("fencing_cost_ratio={:.2}", f / p);
    Ok(())
}
