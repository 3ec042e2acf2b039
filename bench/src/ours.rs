//! Our manager (`redlock-redis`), shared by all client threads of a cell.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use redlock_core::{EventHandler, MetricsEvents};
use redlock_redis::{RedisBackend, Redlock};

use crate::cell::{Cell, Outcome, TTL};
use crate::measure::{OverlapDetector, Recorder, Usage};
use crate::runner;
use crate::scrape::Scraped;

/// The per-node timeout, for the backends and the manager (the default).
pub(crate) const NODE_TIMEOUT: Duration = Duration::from_millis(50);
/// Retry pauses in the hot-key and fair modes unless `--hot-retry` says
/// otherwise: short, since all contenders are on this machine. The other
/// modes never retry on a healthy cluster.
pub(crate) const HOT_RETRY: (Duration, Duration) =
    (Duration::from_millis(1), Duration::from_millis(5));
/// How long one `lock_timeout` call may retry.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Which retry jitter the manager gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Jitter {
    /// These pauses (min, max) in the hot-key mode, the default elsewhere.
    Hot(Duration, Duration),
    /// The library's default (10–200 ms).
    Default,
}

/// A manager of its own: new backends (pools) and node workers, sharing
/// nothing with another manager built here, as in another process.
pub(crate) fn manager(
    urls: &[String],
    retry: Option<(Duration, Duration)>,
) -> anyhow::Result<Redlock> {
    manager_with(urls, retry, None)
}

/// As [`manager`], sending its events to `events`.
fn manager_with(
    urls: &[String],
    retry: Option<(Duration, Duration)>,
    events: Option<Arc<dyn EventHandler>>,
) -> anyhow::Result<Redlock> {
    let backends = urls
        .iter()
        .map(|url| {
            RedisBackend::builder(url)
                .node_timeout(NODE_TIMEOUT)
                .build()
        })
        .collect::<Result<Vec<_>, _>>()
        .context("building the Redis backends")?;
    let mut builder = Redlock::builder(backends)
        .node_timeout(NODE_TIMEOUT)
        .own_rounds(own_rounds())
        .poller(poller() != Some(false))
        .poller_from(poller_from());
    if let Some((min, max)) = retry {
        builder = builder.retry_delay(min, max);
    }
    if let Some(events) = events {
        builder = builder.events(events);
    }
    builder.build().context("building the manager")
}

/// Whether a lone caller sends its rounds itself (`Builder::own_rounds`):
/// on unless `REDLOCK_BENCH_OWN_ROUNDS=0`, to compare both in one build.
pub(crate) fn own_rounds() -> bool {
    std::env::var("REDLOCK_BENCH_OWN_ROUNDS").map_or(true, |v| v != "0")
}

/// The manager's poller (`Builder::poller`) as `REDLOCK_BENCH_POLLER`
/// sets it, to compare in one build: `0` off (every round through the
/// workers), `1` on for every round of several callers
/// (`Builder::poller_from(1)`); unset (`None`), the defaults.
pub(crate) fn poller() -> Option<bool> {
    match std::env::var("REDLOCK_BENCH_POLLER").as_deref() {
        Ok("0") => Some(false),
        Ok("1") => Some(true),
        _ => None,
    }
}

/// `Builder::poller_from` for the benchmark: `REDLOCK_BENCH_POLLER_FROM`
/// when set, 1 with `REDLOCK_BENCH_POLLER=1`, else the default.
pub(crate) fn poller_from() -> usize {
    std::env::var("REDLOCK_BENCH_POLLER_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if poller() == Some(true) {
            1
        } else {
            redlock_redis::POLLER_FROM
        })
}

/// As [`run`], while another thread reads `Redlock::stats` every second.
pub(crate) fn run_reading_stats(cell: &Cell<'_>) -> anyhow::Result<Outcome> {
    run_with(cell, Jitter::Default, Beside::Stats)
}

/// As [`run`], with `MetricsEvents` recording every event into a registry
/// of atomics (`Scraped`) that another thread scrapes every second.
pub(crate) fn run_recording_metrics(cell: &Cell<'_>) -> anyhow::Result<Outcome> {
    run_with(cell, Jitter::Default, Beside::Metrics(Scraped::new()))
}

/// Cycles of `lock_timeout` + confirmed `release`.
pub(crate) fn run(cell: &Cell<'_>, jitter: Jitter) -> anyhow::Result<Outcome> {
    run_with(cell, jitter, Beside::Nothing)
}

/// What runs beside the cycles, once a second.
enum Beside {
    Nothing,
    /// Reads `Redlock::stats`.
    Stats,
    /// Scrapes the registry the manager's `MetricsEvents` records into.
    Metrics(Scraped),
}

fn run_with(cell: &Cell<'_>, jitter: Jitter, beside: Beside) -> anyhow::Result<Outcome> {
    let hot = cell.mode.is_hot();
    let retry = match jitter {
        Jitter::Hot(min, max) if hot => Some((min, max)),
        _ => None,
    };
    let events = match &beside {
        Beside::Metrics(registry) => {
            Some(Arc::new(MetricsEvents::with_recorder(registry.clone())) as Arc<dyn EventHandler>)
        }
        _ => None,
    };
    let locks = manager_with(&cell.urls, retry, events)?;
    let detector = hot.then(OverlapDetector::default);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (record, usage) = std::thread::scope(|s| {
        if !matches!(beside, Beside::Nothing) {
            s.spawn(|| {
                let mut reads = 0_u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    reads += match &beside {
                        Beside::Metrics(registry) => registry.scrape().min(1),
                        _ => std::hint::black_box(locks.stats()).manager.acquired.min(1),
                    };
                    // Once a second, waking often enough to stop promptly.
                    for _ in 0..100 {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                reads
            });
        }
        let result = run_threads(cell, &locks, detector.as_ref());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        result
    })?;
    let nodes = locks.stats().nodes;
    let node_timeouts = Some((
        nodes.iter().map(|n| n.failures.timed_out).sum(),
        nodes.iter().map(|n| n.queued_past_deadline).sum(),
    ));
    Ok(Outcome {
        record,
        usage,
        overlaps: detector.map(|d| d.overlaps()),
        fair: None,
        procs: None,
        shared: None,
        node_timeouts,
    })
}

/// The cycles of every client thread.
fn run_threads(
    cell: &Cell<'_>,
    locks: &Redlock,
    detector: Option<&OverlapDetector>,
) -> anyhow::Result<(Recorder, Usage)> {
    runner::threads(&cell.setup, cell.clients(), |client, window, rec| {
        let key = cell.key(client);
        while window.open() {
            let started = Instant::now();
            match locks.lock_timeout(key.as_str(), TTL, ACQUIRE_TIMEOUT) {
                Ok(lock) => {
                    if let Some(detector) = detector {
                        detector.enter();
                        std::thread::yield_now();
                        detector.leave();
                    }
                    match lock.release() {
                        Ok(()) => rec.ok(window, started),
                        Err(e) => rec.error(window, started, format!("release: {e}")),
                    }
                }
                Err(e) => rec.error(window, started, format!("lock: {e}")),
            }
        }
    })
}
