//! Sweep times of the simulator's scenarios, for the benchmarks
//! (docs/benchmarks.md): each scenario swept over seeds `0..N` on one
//! thread, one line each with the wall time in seconds, the violations and
//! the trace hash. Compare two builds by their ratio, alternated, on one
//! machine; the trace hashes show whether they simulated the same runs.
//!
//! ```text
//! cargo run --release -p redlock-mock --features sim --example sweep_times -- [N] [--only NAME]
//! in-model 0.061 violations=0 trace_hash=…
//! ```
#![allow(clippy::print_stdout)]

use std::time::Instant;

use anyhow::{bail, Context};
use redlock_mock::sim::{sweep, Scenario};

/// The scenarios timed by default: the ones the node-model issue measured.
const DEFAULT: [&str; 9] = [
    "in-model",
    "lagging-replica-failover",
    "local-line-fair",
    "restart-without-persistence",
    "semaphore",
    "semaphore-holder-sets",
    "rwlock",
    "rwlock-blind-readers",
    "fencing",
];

fn main() -> anyhow::Result<()> {
    let (mut seeds, mut only) = (200u64, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--only" => only = Some(args.next().context("--only needs a scenario name")?),
            "--help" | "-h" => {
                println!("usage: sweep_times [SEEDS] [--only NAME]");
                println!("scenarios: {}", Scenario::NAMES.join(", "));
                return Ok(());
            }
            n => match n.parse() {
                Ok(n) => seeds = n,
                Err(_) => bail!("unknown argument {n:?} (try --help)"),
            },
        }
    }
    let names: Vec<&str> = match &only {
        Some(name) => vec![name.as_str()],
        None => DEFAULT.to_vec(),
    };
    for name in names {
        let scenario = Scenario::by_name(name).with_context(|| {
            format!(
                "unknown scenario {name:?}; known: {}",
                Scenario::NAMES.join(", ")
            )
        })?;
        let started = Instant::now();
        let report = sweep(&scenario, 0..seeds, 1);
        println!(
            "{name} {:.3} violations={} trace_hash={:016x}",
            started.elapsed().as_secs_f64(),
            report.violations,
            report.trace_hash
        );
    }
    Ok(())
}
