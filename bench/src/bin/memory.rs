//! `memory`: what the lock manager keeps in memory, in-process and without
//! servers. The target: at most 1 KiB per held lock in the manager,
//! and no growth over 1,000,000 acquire+release cycles.
//!
//! A counting global allocator (`stats_alloc`, wrapping the system
//! allocator) tracks the live heap bytes (sizes requested, so without the
//! allocator's own overhead) and the number of allocations. The nodes are a
//! null backend that grants everything and stores nothing, so what is counted
//! is the manager: guards, shared state, worker queues, local lines; the mock
//! nodes of `redlock-mock` (which store their keys) are run for comparison.
//!
//! Run it with `cargo run --release --locked -p redlock-bench --bin memory`
//! (`scripts/bench.sh` runs it before the main benchmark);
//! `docs/benchmarks.md` explains every figure. It asserts nothing.
// A command-line report: printing is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::alloc::System;
use std::fmt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use redlock_core::backend::{AcquireOutcome, Claim, LockBackend, Token, TOKEN_LEN};
use redlock_core::{Lock, NodeId, Redlock, Resources, Ttl};
use redlock_mock::MockCluster;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Locks held at once for the per-lock figure.
const HELD: usize = 10_000;
/// Cycles of the growth runs on the null backend.
const CYCLES: usize = 1_000_000;
/// Cycles of the hot-key run on the mock nodes.
const HOT_CYCLES: usize = 100_000;
/// The first sample of a growth run, taken as its baseline (after warm-up).
const FIRST_SAMPLE: usize = 10_000;
/// Nodes of every manager.
const NODES: usize = 5;
/// Client threads of the multi-threaded runs.
const THREADS: usize = 8;
/// TTL of the held locks: far longer than the run.
const HELD_TTL: Duration = Duration::from_secs(600);
/// TTL of the cycles.
const CYCLE_TTL: Duration = Duration::from_secs(10);
/// How long the hot-key callers wait in line at most.
const HOT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on waiting for the node workers to catch up.
const FLUSH: Duration = Duration::from_secs(10);
/// A pause after a flush, so that the worker that answered it has also
/// dropped the last job it held before the counters are read.
const SETTLE: Duration = Duration::from_millis(10);

/// Flushes that found a node's queue full and were tried again.
static FLUSH_RETRIES: AtomicUsize = AtomicUsize::new(0);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memory: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The heap as the counting allocator sees it.
#[derive(Debug, Clone, Copy)]
struct Heap {
    /// Bytes allocated and not yet freed.
    bytes: i64,
    /// Allocations not yet freed.
    blocks: i64,
    /// Allocations made so far (freed or not).
    allocations: i64,
}

impl Heap {
    fn now() -> Self {
        let s = GLOBAL.stats();
        Heap {
            bytes: signed(s.bytes_allocated) - signed(s.bytes_deallocated),
            blocks: signed(s.allocations) - signed(s.deallocations),
            allocations: signed(s.allocations),
        }
    }
}

fn signed(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `a / b`, rounded to the nearest integer.
fn per(a: i64, b: usize) -> i64 {
    (a as f64 / b.max(1) as f64).round() as i64
}

/// The null node: grants every acquire, answers extend and release with
/// true, stores nothing.
#[derive(Debug)]
struct Null {
    id: NodeId,
}

/// The null node never fails.
#[derive(Debug)]
enum Never {}

impl fmt::Display for Never {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}

impl std::error::Error for Never {}

impl LockBackend for Null {
    type Error = Never;
    fn node_id(&self) -> &NodeId {
        &self.id
    }
    fn acquire(&self, _: &Claim, _: Ttl, _: bool) -> Result<AcquireOutcome, Never> {
        Ok(AcquireOutcome::Granted { fence: None })
    }
    fn extend(&self, _: &Claim, _: Ttl) -> Result<bool, Never> {
        Ok(true)
    }
    fn release(&self, _: &Claim) -> Result<bool, Never> {
        Ok(true)
    }
    fn raise_fence(&self, _: &Claim, _: u64) -> Result<bool, Never> {
        Ok(true)
    }
}

fn null_manager() -> anyhow::Result<Redlock<Null>> {
    let nodes = (0..NODES).map(|i| Null {
        id: NodeId::new(format!("null-{i}")),
    });
    Redlock::new(nodes).context("building the manager over null nodes")
}

/// Waits for every queued request to run, then lets the workers drop their
/// last jobs.
///
/// `flush` also returns `false` at once when a node's queue is full (the
/// barrier could not be queued): the nodes a round did not wait for can lag
/// behind by a whole queue. Then it is tried again until `FLUSH` passed.
fn settle<B: LockBackend + 'static>(locks: &Redlock<B>) -> anyhow::Result<()> {
    let deadline = Instant::now() + FLUSH;
    loop {
        let now = Instant::now();
        if now >= deadline {
            bail!("the node workers did not catch up within {FLUSH:?}");
        }
        if locks.flush(deadline - now) {
            break;
        }
        FLUSH_RETRIES.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(SETTLE);
    }
    std::thread::sleep(SETTLE);
    Ok(())
}

/// How a lock is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// `try_lock`: one round, no local line.
    TryLock,
    /// `lock`: through the manager's local line for the resource.
    Lock,
}

impl Via {
    fn name(self) -> &'static str {
        match self {
            Via::TryLock => "try_lock",
            Via::Lock => "lock",
        }
    }

    fn take<B: LockBackend + 'static>(
        self,
        locks: &Redlock<B>,
        key: &str,
        ttl: Duration,
    ) -> anyhow::Result<Lock<B>> {
        let lock = match self {
            Via::TryLock => locks.try_lock(key, ttl),
            Via::Lock => locks.lock(key, ttl),
        };
        lock.with_context(|| format!("{} {key:?}", self.name()))
    }
}

/// The heap of `HELD` locks held at once.
#[derive(Debug)]
struct Held {
    backend: &'static str,
    via: Via,
    /// Live bytes per held lock.
    bytes: i64,
    /// Live allocations per held lock, times 100.
    blocks_x100: i64,
    /// Live bytes per lock still kept once all were released.
    kept_bytes: i64,
}

/// Holds `HELD` locks on distinct keys and measures what they keep alive.
fn held<B: LockBackend + 'static>(
    backend: &'static str,
    locks: &Redlock<B>,
    via: Via,
    round: usize,
) -> anyhow::Result<Held> {
    // Warm-up: every code path once, the workers' queues grown.
    for i in 0..1_000 {
        via.take(locks, &format!("w{i}"), HELD_TTL)?
            .release()
            .context("warm-up release")?;
    }
    settle(locks)?;
    let keys: Vec<String> = (0..HELD).map(|i| format!("k{round}-{i}")).collect();
    let mut guards: Vec<Lock<B>> = Vec::with_capacity(HELD);
    let before = Heap::now();
    for key in &keys {
        guards.push(via.take(locks, key, HELD_TTL)?);
    }
    settle(locks)?;
    let after = Heap::now();
    for guard in guards.drain(..) {
        guard.release().context("releasing a held lock")?;
    }
    settle(locks)?;
    let released = Heap::now();
    Ok(Held {
        backend,
        via,
        bytes: per(after.bytes - before.bytes, HELD),
        blocks_x100: per(100 * (after.blocks - before.blocks), HELD),
        kept_bytes: per(released.bytes - before.bytes, HELD),
    })
}

/// The pieces of one held lock that can be built outside the manager.
#[derive(Debug)]
struct Pieces {
    /// `Resources::one(key)`: the key's `String` in an `Arc`.
    resources: i64,
    /// `Arc<Claim>`: resources and token.
    claim: i64,
}

fn pieces() -> anyhow::Result<Pieces> {
    let keys: Vec<String> = (0..HELD).map(|i| format!("k0-{i}")).collect();
    let mut resources = Vec::with_capacity(HELD);
    let mut claims = Vec::with_capacity(HELD);
    let start = Heap::now();
    for key in &keys {
        resources.push(Resources::one(key.as_str()).context("resources")?);
    }
    let with_resources = Heap::now();
    for r in resources.drain(..) {
        claims.push(Arc::new(Claim::new(r, Token::from_bytes([7; TOKEN_LEN]))));
    }
    let with_claims = Heap::now();
    drop(claims);
    Ok(Pieces {
        resources: per(with_resources.bytes - start.bytes, HELD),
        claim: per(with_claims.bytes - with_resources.bytes, HELD),
    })
}

/// Live bytes over a long run of cycles.
#[derive(Debug)]
struct Growth {
    name: String,
    cycles: usize,
    threads: usize,
    /// (cycles done, live bytes) at each sample.
    samples: Vec<(usize, i64)>,
    allocations_per_cycle: f64,
    secs: f64,
}

impl Growth {
    fn first(&self) -> i64 {
        self.samples.first().map_or(0, |s| s.1)
    }
    fn last(&self) -> i64 {
        self.samples.last().map_or(0, |s| s.1)
    }
    fn max(&self) -> i64 {
        self.samples.iter().map(|s| s.1).max().unwrap_or(0)
    }
    fn growth(&self) -> i64 {
        self.last() - self.first()
    }
}

/// Where a growth run samples: after `FIRST_SAMPLE` cycles, then every
/// `step`, up to `total` (cumulative counts).
fn checkpoints(total: usize, step: usize) -> Vec<usize> {
    let mut points = vec![FIRST_SAMPLE];
    points.extend(
        (1..=total / step)
            .map(|k| k * step)
            .filter(|&p| p > FIRST_SAMPLE),
    );
    points
}

/// Runs `total` lock+release cycles split over `threads` threads (thread
/// `t` on `key(t)`), and samples the live bytes at each checkpoint with
/// every thread paused and the workers caught up.
fn growth<B: LockBackend + 'static>(
    name: &str,
    locks: &Redlock<B>,
    threads: usize,
    points: &[usize],
    key: impl Fn(usize) -> String + Sync,
    cycle: impl Fn(&Redlock<B>, &str) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<Growth> {
    let barrier = Barrier::new(threads + 1);
    let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let mut samples = Vec::with_capacity(points.len());
    let started = Instant::now();
    let mut allocations = (0, 0);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (barrier, failure, key, cycle) = (&barrier, &failure, &key, &cycle);
            scope.spawn(move || {
                let key = key(t);
                let mut done = 0;
                for &point in points {
                    barrier.wait();
                    for _ in 0..(point - done) / threads {
                        if let Err(e) = cycle(locks, &key) {
                            let mut slot = failure.lock().unwrap_or_else(|p| p.into_inner());
                            slot.get_or_insert(e);
                            break;
                        }
                    }
                    done = point;
                    barrier.wait();
                }
            });
        }
        for &point in points {
            barrier.wait();
            barrier.wait();
            // On an error, go on meeting the threads at the barriers.
            if let Err(e) = settle(locks) {
                let mut slot = failure.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(e);
            }
            let heap = Heap::now();
            if samples.is_empty() {
                allocations.0 = heap.allocations;
            }
            allocations.1 = heap.allocations;
            samples.push((point, heap.bytes));
        }
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e.context(format!("{name}: a cycle failed")));
    }
    let measured = points.last().copied().unwrap_or(0) - FIRST_SAMPLE;
    Ok(Growth {
        name: name.to_owned(),
        cycles: points.last().copied().unwrap_or(0),
        threads,
        samples,
        allocations_per_cycle: (allocations.1 - allocations.0) as f64 / measured.max(1) as f64,
        secs: started.elapsed().as_secs_f64(),
    })
}

fn run() -> anyhow::Result<()> {
    let started = Instant::now();
    println!(
        "memory: heap counted by stats_alloc over the system allocator (sizes requested, \
         without malloc's own overhead); {NODES} nodes per manager"
    );

    // Per held lock.
    let pieces = pieces()?;
    let null = null_manager()?;
    let cluster = MockCluster::new(NODES);
    let mock = Redlock::new(cluster.backends()).context("building the manager over mocks")?;
    let held_rows = [
        held("null", &null, Via::TryLock, 1)?,
        held("null", &null, Via::Lock, 2)?,
        held("mock", &mock, Via::TryLock, 3)?,
    ];
    println!();
    println!("held at once: {HELD} locks on distinct keys, TTL {HELD_TTL:?}");
    println!(
        "{:<8} {:<9} {:>11} {:>12} {:>12}",
        "backend", "acquire", "B/lock", "allocs/lock", "kept B/lock"
    );
    for row in &held_rows {
        println!(
            "{:<8} {:<9} {:>11} {:>12.2} {:>12}",
            row.backend,
            row.via.name(),
            row.bytes,
            row.blocks_x100 as f64 / 100.0,
            row.kept_bytes
        );
    }
    let per_lock = held_rows[0].bytes;
    println!(
        "pieces of one lock: Resources::one(key) {} B (the key's String in an Arc), \
         Arc<Claim> {} B, the rest (the guard's Arc<LockState>) {} B; the guard itself, \
         {} B, lives where the caller keeps it (here a Vec reserved before the baseline)",
        pieces.resources,
        pieces.claim,
        per_lock - pieces.resources - pieces.claim,
        std::mem::size_of::<Lock<Null>>(),
    );

    // Growth over cycles.
    let runs = [
        growth(
            "null, 1 thread, one key",
            &null,
            1,
            &checkpoints(CYCLES, 100_000),
            |_| "g".to_owned(),
            |locks, key| {
                Via::Lock.take(locks, key, CYCLE_TTL)?.release()?;
                Ok(())
            },
        )?,
        growth(
            "null, 8 threads, a key each",
            &null,
            THREADS,
            &checkpoints(CYCLES, 100_000),
            |t| format!("g{t}"),
            |locks, key| {
                Via::Lock.take(locks, key, CYCLE_TTL)?.release()?;
                Ok(())
            },
        )?,
        growth(
            "mock, 8 threads, one hot key",
            &mock,
            THREADS,
            &checkpoints(HOT_CYCLES, 10_000),
            |_| "hot".to_owned(),
            |locks, key| {
                locks
                    .lock_timeout(key, CYCLE_TTL, HOT_TIMEOUT)
                    .with_context(|| format!("lock_timeout {key:?}"))?
                    .release()?;
                Ok(())
            },
        )?,
    ];
    println!();
    println!(
        "growth: lock+release cycles (lock(key, {CYCLE_TTL:?}) or lock_timeout(key, {CYCLE_TTL:?}, \
         {HOT_TIMEOUT:?}), then Lock::release); live bytes after the first {FIRST_SAMPLE} cycles \
         and at every sample after"
    );
    println!(
        "{:<30} {:>9} {:>12} {:>12} {:>12} {:>8} {:>13} {:>7}",
        "run", "cycles", "first B", "last B", "max B", "growth", "allocs/cycle", "secs"
    );
    for run in &runs {
        println!(
            "{:<30} {:>9} {:>12} {:>12} {:>12} {:>8} {:>13.1} {:>7.1}",
            run.name,
            run.cycles,
            run.first(),
            run.last(),
            run.max(),
            run.growth(),
            run.allocations_per_cycle,
            run.secs
        );
        let trail: Vec<String> = run
            .samples
            .iter()
            .map(|&(at, bytes)| format!("{}k:{:+}", at / 1000, bytes - run.first()))
            .collect();
        println!("  {} threads, vs first: {}", run.threads, trail.join(" "));
    }
    drop((null, mock));
    println!();
    println!(
        "kept B/lock: still live once all {HELD} were released (capacity that stays). \
         Flushes retried because a node's queue was full: {}. Total {:.1} s",
        FLUSH_RETRIES.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    println!(
        "memory bytes_per_held_lock={per_lock} growth_1m_bytes={} growth_1m_8threads_bytes={} \
         growth_hot_bytes={}",
        runs[0].growth(),
        runs[1].growth(),
        runs[2].growth()
    );
    Ok(())
}
