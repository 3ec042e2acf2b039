//! Runs one named simulation scenario over a range of seeds and prints a
//! one-line summary last:
//!
//! ```text
//! cargo run --release -p redlock-mock --features sim --example simulate -- --scenario NAME --seeds N [--seed S] [--threads T] [--trace]
//! scenario=NAME runs=N violations=V first_violation_seed=S trace_hash=H
//! ```
//!
//! `--seeds N` runs seeds `S..S+N` (`S` defaults to 0); `--seed S` alone
//! replays seed `S` (runs=1), with the same trace hash as in the sweep.
//! Without flags, `REDLOCK_SIM_SEED` / `REDLOCK_SIM_SEEDS` choose the seeds.
//! For the first violating seed the violations are printed, with the trace
//! leading up to them (all of it with `--trace`).
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use redlock_mock::sim::{run_traced, sweep, Scenario, SeedPlan, ViolationKind};

struct Args {
    scenario: Scenario,
    first: u64,
    count: u64,
    threads: usize,
    trace: bool,
}

fn parse() -> anyhow::Result<Args> {
    let mut scenario = None;
    let (mut seed, mut seeds, mut threads, mut trace) = (None, None, 2usize, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--scenario" => {
                let name = value()?;
                scenario = Some(Scenario::by_name(&name).with_context(|| {
                    format!(
                        "unknown scenario {name:?}; known: {}",
                        Scenario::NAMES.join(", ")
                    )
                })?);
            }
            "--seeds" => seeds = Some(value()?.parse::<u64>().context("--seeds")?),
            "--seed" => seed = Some(value()?.parse::<u64>().context("--seed")?),
            "--threads" => threads = value()?.parse().context("--threads")?,
            "--trace" => trace = true,
            "--help" | "-h" => {
                println!("usage: simulate --scenario NAME [--seeds N] [--seed S] [--threads T] [--trace]");
                println!("scenarios: {}", Scenario::NAMES.join(", "));
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let scenario = scenario.context("--scenario NAME is required (try --help)")?;
    let (first, count) = match (seed, seeds) {
        (Some(s), Some(n)) => (s, n),
        (Some(s), None) => (s, 1),
        (None, Some(n)) => (0, n),
        (None, None) => {
            let seeds = SeedPlan::from_env(1_000)
                .map_err(anyhow::Error::msg)?
                .seeds();
            (seeds.start, seeds.end - seeds.start)
        }
    };
    Ok(Args {
        scenario,
        first,
        count,
        threads,
        trace,
    })
}

fn main() -> anyhow::Result<()> {
    let args = parse()?;
    let seeds = args.first..args.first.saturating_add(args.count);
    let started = Instant::now();
    let report = sweep(&args.scenario, seeds, args.threads);
    let wall = started.elapsed();
    let kinds: Vec<String> = ViolationKind::ALL
        .iter()
        .filter(|k| report.runs_with(**k) > 0)
        .map(|k| format!("{}={}", k.name(), report.runs_with(*k)))
        .collect();
    let mut fenced = if args.scenario.fenced_resource {
        format!("; stale accesses fenced off: {}", report.fenced_off)
    } else {
        String::new()
    };
    if args.scenario.observers > 0 {
        let [leaders, early, phantoms] = report.observed;
        fenced.push_str(&format!(
            "; observers reported {leaders} leaders ({early} before their term's raise, {phantoms} that never led)"
        ));
    }
    println!(
        "# {} seeds {}..{} in {:.2?} on {} threads; acquires: {}{fenced}; violating runs by kind: [{}]",
        args.scenario.name,
        report.first_seed,
        report.first_seed + report.runs,
        wall,
        args.threads,
        report.acquired,
        kinds.join(" ")
    );
    if args.trace && report.first_violation_seed.is_none() {
        let (_, lines) = run_traced(&args.scenario, report.first_seed);
        for line in lines {
            println!("{line}");
        }
    }
    if let Some(seed) = report.first_violation_seed {
        let (outcome, lines) = run_traced(&args.scenario, seed);
        println!(
            "# seed {seed} violates (trace hash {:016x}):",
            outcome.trace_hash
        );
        for v in &outcome.violations {
            println!("#   {v}");
        }
        let until = outcome.violations.first().map_or(Duration::MAX, |v| v.at);
        let shown: Vec<&String> = if args.trace {
            lines.iter().collect()
        } else {
            let upto = lines
                .iter()
                .position(|l| line_time(l) > until)
                .unwrap_or(lines.len());
            lines[upto.saturating_sub(40)..upto].iter().collect()
        };
        println!(
            "# trace{} (replay: --scenario {} --seed {seed} --trace):",
            if args.trace {
                ""
            } else {
                ", last lines before the first violation"
            },
            args.scenario.name
        );
        for line in shown {
            println!("{line}");
        }
    }
    println!("{report}");
    Ok(())
}

/// The time at the start of a trace line (`   12.345678ms ...`).
fn line_time(line: &str) -> Duration {
    let t = line.trim_start().split("ms").next().unwrap_or("");
    let (ms, frac) = t.split_once('.').unwrap_or((t, "0"));
    let ms: u64 = ms.parse().unwrap_or(0);
    let ns: u64 = frac.parse().unwrap_or(0);
    Duration::from_nanos(ms * 1_000_000 + ns)
}
