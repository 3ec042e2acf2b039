//! Observability: the manager's events logged through `tracing`, and a dump
//! of its counters (`Stats`) at the end.
//!
//! `TracingEvents` is the core's event hook for `tracing` (feature
//! `tracing` of `redlock-core`, or of `redlock-redis`): node failures, full
//! queues and lost locks at `warn`, a node back at `info`, each call and
//! round at `debug`, keep-alive extensions at `trace`. Any subscriber
//! prints them; here `tracing-subscriber`'s plain text one, at `debug`.
//! `Redlock::stats` is always there, hook or not: cheap counters per node
//! and per outcome, to read at any time (a health endpoint, a metrics
//! exporter, a log line at shutdown).
//!
//! Run with `cargo run --example events` (no server needed).
#![allow(clippy::print_stdout)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, ensure};
use redlock_core::{KeepAlive, LockError, LostReason, Redlock, Stats, TracingEvents};
use redlock_mock::MockCluster;
use tracing_subscriber::filter::LevelFilter;

/// Writes the log to stdout and keeps a copy, so that the example can
/// check what was logged at the end.
#[derive(Clone, Default)]
struct Tee(Arc<Mutex<Vec<u8>>>);

impl Write for Tee {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut copy) = self.0.lock() {
            copy.extend_from_slice(bytes);
        }
        std::io::stdout().write_all(bytes)?;
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush()
    }
}

fn main() -> anyhow::Result<()> {
    // 1. A subscriber: what an application sets up once at start.
    let log = Tee::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_max_level(LevelFilter::DEBUG)
        .without_time()
        .with_writer(move || writer.clone())
        .init();

    // 2. The manager, with `TracingEvents` as its event hook.
    let cluster = MockCluster::new(5);
    let locks = Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_millis(500)) // margin for a loaded machine
        .events(Arc::new(TracingEvents))
        .build()?;

    println!("--- a lock taken and released: each round and call at debug");
    locks
        .try_lock("report", Duration::from_secs(10))?
        .release()?;

    println!("--- mock-1 down: its failures at warn; the lock still works on 4 of 5");
    cluster.node(1).go_down();
    locks
        .try_lock("report", Duration::from_secs(10))?
        .release()?;
    // Let the down node's answers come in (false: it is still down).
    let _ = locks.flush(Duration::from_secs(5));
    cluster.node(1).come_up();
    println!("--- mock-1 back: `node answers again` at info with its next request");
    locks
        .try_lock("report", Duration::from_secs(10))?
        .release()?;

    println!("--- a kept-alive lock stopped by its hold bound: `lock lost` at warn");
    let policy = KeepAlive::new().max_hold(Duration::from_secs(2));
    let outcome = locks.with_lock_kept("report", Duration::from_secs(2), policy, |lock| {
        while !lock.is_lost() {
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    match outcome {
        Err(LockError::Lost {
            reason: LostReason::HoldLimit,
            ..
        }) => {}
        other => bail!("expected the lock lost to its hold bound, got {other:?}"),
    }

    // 3. The counters, for a dashboard or a log line at shutdown. Flush
    //    first so that the slower nodes' answers are counted too.
    ensure!(
        locks.flush(Duration::from_secs(5)),
        "nodes did not catch up"
    );
    let stats = locks.stats();
    print_stats(&stats);

    // What this run must have shown.
    ensure!(stats.manager.acquired == 4, "expected 4 locks acquired");
    ensure!(stats.manager.lost == 1, "expected 1 lost lock");
    ensure!(
        stats.nodes[1].failures.backend >= 1,
        "mock-1's failures were not counted"
    );
    ensure!(
        stats.nodes[1]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("down")),
        "mock-1's last error should say it was down"
    );
    let logged = String::from_utf8(
        log.0
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .clone(),
    )?;
    for line in [
        "call ended",
        "round decided",
        "node request failed",
        "node answers again",
        "lock lost",
    ] {
        ensure!(logged.contains(line), "nothing logged {line:?}");
    }
    println!("--- every expected event was logged and counted");
    Ok(())
}

/// One line for the manager's calls and one per node.
fn print_stats(stats: &Stats) {
    let m = &stats.manager;
    println!(
        "stats: acquired {} contended {} no-quorum {} timed-out {} extended {} lost {} handed-off {}",
        m.acquired, m.contended, m.no_quorum, m.timed_out, m.extended, m.lost, m.handed_off
    );
    for node in &stats.nodes {
        println!(
            "  {:<7} requests {:>3}  failures {:>2} (backend {}, timed out {})  last error: {}",
            node.node.as_str(),
            node.requests,
            node.failures.total(),
            node.failures.backend,
            node.failures.timed_out,
            node.last_error.as_deref().unwrap_or("-"),
        );
    }
}
