//! `redlock-bench`: acquire+release cycles of our Redlock manager on real
//! redis-server masters, against the peers from crates.io (`rslock`,
//! `redlock`) and raw references over persistent connections (sequential,
//! all nodes at once = the floor, clients in lockstep = the pipelining
//! ceiling). Run it with `scripts/bench.sh` (`--quick` for a short run);
//! `docs/benchmarks.md` explains every figure.
//!
//! The masters run on free loopback ports through the test harness of
//! `redlock-tests`, which stops them when dropped, also on an error or a
//! panic.
// A command-line report: printing is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cell;
mod cli;
mod fair;
mod measure;
mod ours;
mod peers;
mod procfs;
mod procs;
mod raw;
mod report;
mod runner;
mod scrape;
mod semaphore;

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use redlock_tests::harness::{RedisCluster, RedisServer, ServerOptions};

use crate::cell::{Cell, Impl, Mode, Outcome, FROZEN_NODE};
use crate::cli::Options;
use crate::measure::Hooks;
use crate::report::{Row, Summary};
use crate::runner::Setup;

/// A pause between cells so the previous one's threads and sockets settle.
const SETTLE: Duration = Duration::from_millis(200);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("redlock-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some(procs::CHILD_ARG) {
        return procs::child(args.skip(1));
    }
    let options = cli::parse(args)?;
    if options.help {
        println!("{}", cli::USAGE);
        return Ok(());
    }
    let started = Instant::now();
    print_machine(&options);

    // Every cluster the selected modes need, started once and kept for the
    // whole run, so that rounds can interleave all modes.
    let mut clusters = BTreeMap::new();
    for mode in &options.modes {
        if let Entry::Vacant(slot) = clusters.entry(mode.nodes()) {
            slot.insert(start_cluster(mode.nodes(), options.own_sessions)?);
        }
    }
    let mut rows: Vec<Row> = options
        .modes
        .iter()
        .flat_map(|&mode| {
            mode.impls()
                .into_iter()
                .filter(|imp| options.impls.contains(imp))
                .map(move |imp| Row::new(mode, imp))
        })
        .collect();
    for round in 1..=options.rounds {
        for row in &mut rows {
            if row.is_broken() {
                continue;
            }
            let cluster = clusters
                .get(&row.mode.nodes())
                .context("no cluster for a mode")?;
            std::thread::sleep(SETTLE);
            let result = run_cell(cluster, row.mode, row.imp, &options)?;
            row.add(options.plan.window, result);
            println!("round {round}/{}: {}", options.rounds, row.progress());
            std::io::stdout().flush()?;
        }
    }
    drop(clusters);

    println!();
    println!("{}", Row::header());
    for row in &rows {
        println!("{}", row.markdown());
    }
    let contention: Vec<String> = rows.iter().filter_map(Row::contention).collect();
    if !contention.is_empty() {
        println!();
        println!(
            "Contention across processes (each with a manager of default settings, one thread):"
        );
        for line in contention {
            println!("  {line}");
        }
    }
    let fairness: Vec<String> = rows.iter().filter_map(Row::fairness).collect();
    if !fairness.is_empty() {
        println!();
        println!("Fairness between two managers on one key (time from one's release to the other's acquisition):");
        for line in fairness {
            println!("  {line}");
        }
    }
    let shared: Vec<String> = rows.iter().filter_map(Row::shared).collect();
    if !shared.is_empty() {
        println!();
        println!(
            "{} managers × {} threads (wait: acquire called to held; inside: holders at once, counted in the benchmark):",
            cell::SEM_MANAGERS,
            cell::SEM_THREADS
        );
        for line in shared {
            println!("  {line}");
        }
    }
    let summary = Summary::from_rows(&rows);
    println!();
    println!(
        "finished in {:.0} s; the N sweep's N=5 is the 1×1 mode. Ratios (this run) and the issue's targets:",
        started.elapsed().as_secs_f64()
    );
    print!("{}", summary.targets());
    println!("The same figures for the fastest peer and the floor, for context:");
    print!("{}", Summary::references(&rows));
    println!("{}", summary.line());
    Ok(())
}

fn start_cluster(n: usize, own_sessions: bool) -> anyhow::Result<RedisCluster> {
    RedisCluster::start(n, &ServerOptions::new().own_session(own_sessions))
        .with_context(|| format!("starting {n} masters"))
}

/// One round of one implementation in one mode. The inner result is the
/// implementation's (a failure there fails the row); the outer one is the
/// harness's (a server that cannot be resumed ends the run).
fn run_cell(
    cluster: &RedisCluster,
    mode: Mode,
    imp: Impl,
    options: &Options,
) -> anyhow::Result<anyhow::Result<Outcome>> {
    let servers = cluster
        .iter()
        .map(|node| node.pid().context("a redis-server is not running"))
        .collect::<anyhow::Result<Vec<u32>>>()?;
    let frozen = cluster.node(FROZEN_NODE);
    let freeze = || frozen.pause();
    let resume = || frozen.resume();
    let hooks = if mode == Mode::Frozen {
        Hooks {
            mid_warmup: Some(&freeze),
            after: Some(&resume),
        }
    } else {
        Hooks::default()
    };
    let cell = Cell {
        mode,
        imp,
        urls: cluster.urls(),
        setup: Setup {
            plan: options.plan,
            servers,
            hooks,
        },
    };
    let outcome = match imp {
        Impl::Ours if mode == Mode::Fair => fair::run(&cell, options.hot_retry),
        Impl::Ours if mode == Mode::Procs => procs::run(&cell),
        Impl::Ours if matches!(mode, Mode::Semaphore | Mode::Mutex4x4) => {
            semaphore::run(&cell, options.hot_retry)
        }
        Impl::Ours => {
            let (min, max) = options.hot_retry;
            ours::run(&cell, ours::Jitter::Hot(min, max))
        }
        Impl::OursDefaultJitter => ours::run(&cell, ours::Jitter::Default),
        Impl::OursStats => ours::run_reading_stats(&cell),
        Impl::OursMetrics => ours::run_recording_metrics(&cell),
        Impl::Rslock => peers::rslock(&cell),
        Impl::Redlock => peers::redlock(&cell),
        Impl::RawSeq => raw::run(&cell, raw::Shape::Sequential),
        Impl::RawFloor => raw::run(&cell, raw::Shape::Floor),
        Impl::RawCeiling => raw::run(&cell, raw::Shape::Ceiling),
        Impl::RawParked => raw::run(&cell, raw::Shape::Parked),
        Impl::RawParkedNodes => raw::run(&cell, raw::Shape::ParkedNodes),
        Impl::RawParkedPipelined => raw::run(&cell, raw::Shape::ParkedPipelined),
        Impl::RawCeilingOurs => raw::run(&cell, raw::Shape::CeilingOurs),
        Impl::RawParkedOurs => raw::run(&cell, raw::Shape::ParkedOurs),
    };
    // Whatever happened, no node stays frozen for the next cell.
    resume_all(cluster)?;
    Ok(outcome)
}

fn resume_all(cluster: &RedisCluster) -> anyhow::Result<()> {
    cluster.iter().try_for_each(RedisServer::resume)
}

fn print_machine(options: &Options) {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let redis = std::process::Command::new(
        std::env::var_os("REDIS_SERVER").unwrap_or_else(|| "redis-server".into()),
    )
    .arg("--version")
    .output()
    .ok()
    .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    .unwrap_or_else(|| "redis-server not found".to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    println!(
        "redlock-bench{}",
        if options.quick { " --quick" } else { "" }
    );
    println!(
        "machine: {cores} cores, {}, Linux {kernel}",
        procfs::cpu_model()
    );
    println!(
        "servers: {redis}, {}",
        if options.own_sessions {
            "each in a session of its own (--own-sessions)"
        } else {
            "children of the benchmark, in its session"
        }
    );
    println!(
        "plan: {} round(s) over all cells, each cell {:.1} s warm-up + {:.1} s measured; TTL {} s; \
         ours: node timeout {} ms, hot-key, fair, semaphore and mutex4x4 retry {}–{} ms, \
         procs: {} processes with the defaults",
        options.rounds,
        options.plan.warmup.as_secs_f64(),
        options.plan.window.as_secs_f64(),
        cell::TTL.as_secs(),
        ours::NODE_TIMEOUT.as_millis(),
        options.hot_retry.0.as_secs_f64() * 1e3,
        options.hot_retry.1.as_secs_f64() * 1e3,
        cell::PROCS,
    );
    println!();
}
