//! What a lock cycle costs the heap, on real `redis-server` masters: a
//! binary of its own, since it counts every allocation of the process
//! (`stats_alloc` as the global allocator).
//!
//! Backs the CHANGELOG's "a lone caller's request allocates almost
//! nothing": a lone caller's round sends one request per node, whose plan,
//! replies, reads and results `redlock-redis` keeps inline
//! (docs/benchmarks.md has the measured counts).

use std::alloc::System;
use std::time::Duration;

use redlock_redis::{RedisBackend, Redlock};
use redlock_tests::harness::{RedisCluster, ServerOptions};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Generous for a loaded machine: tests about timeouts set their own.
const NODE_TIMEOUT: Duration = Duration::from_millis(500);

/// The most allocations a lone caller's lock + release on five masters
/// may take, everything in the process counted (the manager's threads
/// too): room above what it takes now, below what it took before a
/// batch's buffers were kept inline, so that going back fails (both
/// counts in docs/benchmarks.md's history table).
const MOST_PER_CYCLE: u64 = 45;

#[test]
fn a_lone_callers_lock_cycle_allocates_little() {
    let cluster = RedisCluster::start(5, &ServerOptions::new()).expect("redis-server cluster");
    let backends: Vec<RedisBackend> = cluster
        .iter()
        .map(|server| {
            let mut builder = RedisBackend::builder(server.url()).node_timeout(NODE_TIMEOUT);
            if let Some(ca) = server.ca_pem() {
                builder = builder.tls_root_certificate(ca.as_bytes());
            }
            builder.build().expect("valid backend")
        })
        .collect();
    let locks = Redlock::builder(backends)
        .node_timeout(NODE_TIMEOUT)
        .build()
        .expect("valid manager");
    let cycle = || {
        let lock = locks
            .lock_timeout(
                "alloc-test",
                Duration::from_secs(10),
                Duration::from_secs(10),
            )
            .expect("a lone caller's lock");
        lock.release().expect("release");
    };
    // Connections, scripts and buffers made once.
    for _ in 0..200 {
        cycle();
    }
    let cycles: u32 = 500;
    let region = Region::new(GLOBAL);
    for _ in 0..cycles {
        cycle();
    }
    let allocations = region.change().allocations as u64;
    let per_cycle = allocations as f64 / f64::from(cycles);
    assert!(
        allocations <= MOST_PER_CYCLE * u64::from(cycles),
        "{per_cycle:.1} allocations per lock cycle (at most {MOST_PER_CYCLE})"
    );
}
