//! One cell of the benchmark (one implementation in one mode): the
//! measurement window, per-client recorders, and the coordinator that reads
//! CPU and context-switch counters at the window's edges.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::procfs;

/// Longest latency the histograms keep exactly (longer ones saturate).
const MAX_LATENCY: Duration = Duration::from_secs(120);

/// How long each cell runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Before the window: connections open, caches warm; not recorded.
    pub(crate) warmup: Duration,
    /// The measured window.
    pub(crate) window: Duration,
    /// How long after the window every client must have stopped before the
    /// cell counts as stalled (a client blocked on a frozen node).
    pub(crate) grace: Duration,
}

/// The measured interval: a cycle counts when it started and ended inside.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub(crate) start: Instant,
    pub(crate) end: Instant,
}

impl Window {
    /// Whether clients should start another cycle.
    pub(crate) fn open(&self) -> bool {
        Instant::now() < self.end
    }

    /// Whether an interval `started..ended` lies inside the window.
    pub(crate) fn contains(&self, started: Instant, ended: Instant) -> bool {
        started >= self.start && ended <= self.end
    }
}

/// What one client saw: latencies of its successful cycles, counts, and the
/// first error for the report.
#[derive(Debug)]
pub(crate) struct Recorder {
    hist: Histogram<u64>,
    ok: u64,
    errors: u64,
    first_error: Option<String>,
    fault: Option<String>,
}

/// An empty latency histogram in nanoseconds, up to [`MAX_LATENCY`], with
/// three significant digits: 0.1 % resolution at any latency.
pub(crate) fn latency_histogram() -> Histogram<u64> {
    let high = u64::try_from(MAX_LATENCY.as_nanos()).unwrap_or(u64::MAX);
    Histogram::new_with_bounds(1, high, 3).expect("valid histogram bounds")
}

/// Records `latency` into a [`latency_histogram`] (saturating at its top).
fn record_latency(hist: &mut Histogram<u64>, latency: Duration) {
    let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
    hist.saturating_record(nanos.max(1));
}

impl Recorder {
    pub(crate) fn new() -> Self {
        Recorder {
            hist: latency_histogram(),
            ok: 0,
            errors: 0,
            first_error: None,
            fault: None,
        }
    }

    /// A successful cycle that started at `started` and ends now.
    pub(crate) fn ok(&mut self, window: &Window, started: Instant) {
        self.ok_at(window, started, Instant::now(), 1);
    }

    /// `n` successful cycles (clients in lockstep) over `started..ended`.
    pub(crate) fn ok_at(&mut self, window: &Window, started: Instant, ended: Instant, n: u64) {
        if window.contains(started, ended) {
            let nanos = u64::try_from((ended - started).as_nanos()).unwrap_or(u64::MAX);
            self.hist.saturating_record_n(nanos.max(1), n);
            self.ok += n;
        }
    }

    /// A successful cycle that another process found inside its window.
    pub(crate) fn ok_counted(&mut self, latency: Duration) {
        record_latency(&mut self.hist, latency);
        self.ok += 1;
    }

    /// A failed cycle that another process recorded; `counted` when it
    /// started inside the window.
    pub(crate) fn error_counted(&mut self, counted: bool, error: impl fmt::Display) {
        if self.first_error.is_none() {
            self.first_error = Some(error.to_string());
        }
        if counted {
            self.errors += 1;
        }
    }

    /// A failed cycle (error or not acquired) that started at `started`.
    pub(crate) fn error(&mut self, window: &Window, started: Instant, error: impl fmt::Display) {
        if self.first_error.is_none() {
            self.first_error = Some(error.to_string());
        }
        if window.contains(started, Instant::now()) {
            self.errors += 1;
        }
    }

    /// A client could not go on (setup failed, it panicked): the cell fails.
    pub(crate) fn fault(&mut self, fault: impl fmt::Display) {
        if self.fault.is_none() {
            self.fault = Some(fault.to_string());
        }
    }

    /// Folds another client's record into this one.
    pub(crate) fn merge(&mut self, other: Recorder) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.hist.add(&other.hist);
        self.ok += other.ok;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        if self.fault.is_none() {
            self.fault = other.fault;
        }
    }

    pub(crate) fn ok_count(&self) -> u64 {
        self.ok
    }

    pub(crate) fn errors(&self) -> u64 {
        self.errors
    }

    pub(crate) fn first_error(&self) -> Option<&str> {
        self.first_error.as_deref()
    }

    pub(crate) fn fault_message(&self) -> Option<&str> {
        self.fault.as_deref()
    }

    /// The latency at quantile `q` (0.5, 0.99, 0.999), if any cycle counted.
    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        (self.ok > 0).then(|| Duration::from_nanos(self.hist.value_at_quantile(q)))
    }
}

/// The fair mode's figures beyond the cycles: each side's (manager's)
/// acquisitions, and the cross-side hand-offs: from one side starting a
/// release to the other side's next acquire returning.
#[derive(Debug)]
pub(crate) struct FairRecord {
    /// Acquisitions per side whose cycle counted (it started and ended
    /// inside the window, as for `ok/s`).
    acquired: Vec<u64>,
    /// Cross-side hand-off latencies inside the window.
    handoffs: Histogram<u64>,
}

impl FairRecord {
    pub(crate) fn new(sides: usize) -> Self {
        FairRecord {
            acquired: vec![0; sides],
            handoffs: latency_histogram(),
        }
    }

    /// One more counted acquisition of `side`.
    pub(crate) fn count(&mut self, side: usize) {
        if self.acquired.len() <= side {
            self.acquired.resize(side + 1, 0);
        }
        self.acquired[side] += 1;
    }

    /// One cross-side hand-off that took `latency`.
    pub(crate) fn handoff(&mut self, latency: Duration) {
        record_latency(&mut self.handoffs, latency);
    }

    /// Folds another round's record into this one.
    pub(crate) fn merge(&mut self, other: &FairRecord) {
        if self.acquired.len() < other.acquired.len() {
            self.acquired.resize(other.acquired.len(), 0);
        }
        for (mine, theirs) in self.acquired.iter_mut().zip(&other.acquired) {
            *mine += theirs;
        }
        // Same bounds on both sides: adding cannot fail.
        let _ = self.handoffs.add(&other.handoffs);
    }

    /// All sides' acquisitions.
    pub(crate) fn total(&self) -> u64 {
        self.acquired.iter().sum()
    }

    /// Each side's share of the acquisitions, in percent; `None` without any.
    pub(crate) fn shares(&self) -> Option<Vec<f64>> {
        let total = self.total();
        (total > 0).then(|| {
            self.acquired
                .iter()
                .map(|&n| n as f64 * 100.0 / total as f64)
                .collect()
        })
    }

    /// The smallest side's share in percent: 50 is an even split of two, 0 a
    /// side that never got the lock.
    pub(crate) fn min_share(&self) -> Option<f64> {
        self.shares()?.into_iter().reduce(f64::min)
    }

    /// How many times the lock passed from one side to another.
    pub(crate) fn handoffs(&self) -> u64 {
        self.handoffs.len()
    }

    /// The cross-side hand-off latency at quantile `q`, if any was seen.
    pub(crate) fn handoff_quantile(&self, q: f64) -> Option<Duration> {
        (self.handoffs() > 0).then(|| Duration::from_nanos(self.handoffs.value_at_quantile(q)))
    }
}

/// The procs mode's figures beyond the cycles: each process's acquisitions
/// and the wait from calling `lock` to holding the lock.
#[derive(Debug)]
pub(crate) struct ProcsRecord {
    /// Acquisitions per process whose cycle counted (inside the window).
    acquired: Vec<u64>,
    /// Waits from calling `lock` to holding the lock.
    waits: Histogram<u64>,
    /// Hold intervals compared for overlaps, all of them (also outside the
    /// window).
    holds: u64,
}

impl ProcsRecord {
    pub(crate) fn new(processes: usize) -> Self {
        ProcsRecord {
            acquired: vec![0; processes],
            waits: latency_histogram(),
            holds: 0,
        }
    }

    /// One counted acquisition of process `index`.
    pub(crate) fn count(&mut self, index: usize) {
        if self.acquired.len() <= index {
            self.acquired.resize(index + 1, 0);
        }
        self.acquired[index] += 1;
    }

    /// One wait that took `wait`.
    pub(crate) fn wait(&mut self, wait: Duration) {
        record_latency(&mut self.waits, wait);
    }

    /// `n` more hold intervals were checked for overlaps.
    pub(crate) fn checked(&mut self, n: u64) {
        self.holds += n;
    }

    /// Folds another round's record into this one.
    pub(crate) fn merge(&mut self, other: &ProcsRecord) {
        if self.acquired.len() < other.acquired.len() {
            self.acquired.resize(other.acquired.len(), 0);
        }
        for (mine, theirs) in self.acquired.iter_mut().zip(&other.acquired) {
            *mine += theirs;
        }
        // Same bounds on both sides: adding cannot fail.
        let _ = self.waits.add(&other.waits);
        self.holds += other.holds;
    }

    /// All processes' counted acquisitions.
    pub(crate) fn total(&self) -> u64 {
        self.acquired.iter().sum()
    }

    /// Hold intervals checked for overlaps.
    pub(crate) fn holds(&self) -> u64 {
        self.holds
    }

    /// The largest and the smallest process's share of the acquisitions, in
    /// percent (100 / processes each when even); `None` without any.
    pub(crate) fn max_min_share(&self) -> Option<(f64, f64)> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let share = |n: u64| n as f64 * 100.0 / total as f64;
        let max = self.acquired.iter().copied().max().unwrap_or(0);
        let min = self.acquired.iter().copied().min().unwrap_or(0);
        Some((share(max), share(min)))
    }

    /// The wait at quantile `q`, if any wait counted.
    pub(crate) fn wait_quantile(&self, q: f64) -> Option<Duration> {
        (!self.waits.is_empty()).then(|| Duration::from_nanos(self.waits.value_at_quantile(q)))
    }
}

/// The semaphore and mutex4x4 modes' figures beyond the cycles: each
/// manager's acquisitions and the waits (as [`ProcsRecord`], a manager for
/// a process), and the most holders that were inside at once.
#[derive(Debug)]
pub(crate) struct SharedRecord {
    pub(crate) by_manager: ProcsRecord,
    pub(crate) peak: u32,
}

impl SharedRecord {
    pub(crate) fn new(managers: usize) -> Self {
        SharedRecord {
            by_manager: ProcsRecord::new(managers),
            peak: 0,
        }
    }

    /// Folds another round's record into this one.
    pub(crate) fn merge(&mut self, other: &SharedRecord) {
        self.by_manager.merge(&other.by_manager);
        self.peak = self.peak.max(other.peak);
    }
}

/// Counts critical sections entered while `capacity` others are running:
/// two holders of the same lock at once (capacity 1, the default), or more
/// holders than a semaphore's permits. Also keeps the most inside at once.
#[derive(Debug)]
pub(crate) struct OverlapDetector {
    capacity: u32,
    inside: AtomicU32,
    peak: AtomicU32,
    overlaps: AtomicU64,
}

impl Default for OverlapDetector {
    fn default() -> Self {
        Self::with_capacity(1)
    }
}

impl OverlapDetector {
    /// A detector for `capacity` holders at once.
    pub(crate) fn with_capacity(capacity: u32) -> Self {
        OverlapDetector {
            capacity,
            inside: AtomicU32::new(0),
            peak: AtomicU32::new(0),
            overlaps: AtomicU64::new(0),
        }
    }

    /// Call right after the lock was acquired.
    pub(crate) fn enter(&self) {
        let before = self.inside.fetch_add(1, Ordering::SeqCst);
        self.peak.fetch_max(before + 1, Ordering::SeqCst);
        if before >= self.capacity {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The most holders inside at once so far.
    pub(crate) fn peak(&self) -> u32 {
        self.peak.load(Ordering::SeqCst)
    }

    /// Call right before the lock is released.
    pub(crate) fn leave(&self) {
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn overlaps(&self) -> u64 {
        self.overlaps.load(Ordering::SeqCst)
    }
}

/// Tracks the clients of a cell: how many finished their cycles, and when
/// the threads may exit. Threads wait for [`Progress::hold`] so that their
/// context switches are still counted when the window's end is read.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    done: AtomicUsize,
    released: Mutex<bool>,
    wake: Condvar,
}

impl Progress {
    /// Marks one client as done when dropped (also when it panicked).
    pub(crate) fn done_guard(self: &Arc<Self>) -> DoneGuard {
        DoneGuard(Arc::clone(self))
    }

    /// Blocks until the coordinator has read the counters at the window's
    /// end.
    pub(crate) fn hold(&self) {
        let mut released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        while !*released {
            released = self
                .wake
                .wait(released)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Lets the threads waiting in [`Progress::hold`] go.
    pub(crate) fn release(&self) {
        *self.released.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.notify_all();
    }

    fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }
}

/// Marks one client as done when dropped.
#[derive(Debug)]
pub(crate) struct DoneGuard(Arc<Progress>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        self.0.done.fetch_add(1, Ordering::SeqCst);
    }
}

/// Counter readings at one instant.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Snapshot {
    client_cpu: Duration,
    server_cpu: Duration,
    context_switches: u64,
}

impl Snapshot {
    /// Reads the counters of the client processes `clients` (`"self"`, or
    /// the pids of child processes) and of the servers.
    pub(crate) fn take(clients: &[String], servers: &[u32]) -> anyhow::Result<Self> {
        let mut server_cpu = Duration::ZERO;
        for pid in servers {
            server_cpu += procfs::cpu_time(&pid.to_string())?;
        }
        let mut client_cpu = Duration::ZERO;
        let mut context_switches = 0;
        for pid in clients {
            client_cpu += procfs::cpu_time(pid)?;
            context_switches += procfs::context_switches(pid)?;
        }
        Ok(Snapshot {
            client_cpu,
            server_cpu,
            context_switches,
        })
    }

    /// What passed from `before` to this reading; `stalled` as given.
    pub(crate) fn since(&self, before: &Snapshot, stalled: usize) -> Usage {
        Usage {
            client_cpu: self.client_cpu.saturating_sub(before.client_cpu),
            server_cpu: self.server_cpu.saturating_sub(before.server_cpu),
            context_switches: self
                .context_switches
                .saturating_sub(before.context_switches),
            stalled,
        }
    }
}

/// What the window cost, from counters read at its edges.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Usage {
    /// This process (all threads).
    pub(crate) client_cpu: Duration,
    /// All redis-server processes of the cell.
    pub(crate) server_cpu: Duration,
    pub(crate) context_switches: u64,
    /// Clients still running `grace` after the window closed.
    pub(crate) stalled: usize,
}

impl Usage {
    /// Adds another round's usage.
    pub(crate) fn add(&mut self, other: &Usage) {
        self.client_cpu += other.client_cpu;
        self.server_cpu += other.server_cpu;
        self.context_switches += other.context_switches;
        self.stalled = self.stalled.max(other.stalled);
    }
}

/// Hooks a cell runs at fixed points of its timeline.
#[derive(Default)]
pub(crate) struct Hooks<'a> {
    /// Halfway through the warm-up (e.g. freeze a node).
    pub(crate) mid_warmup: Option<&'a (dyn Fn() -> anyhow::Result<()> + Sync)>,
    /// After the window and the grace period, before the clients are joined
    /// (e.g. resume the frozen node, so blocked clients can finish).
    pub(crate) after: Option<&'a (dyn Fn() -> anyhow::Result<()> + Sync)>,
}

impl fmt::Debug for Hooks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks").finish_non_exhaustive()
    }
}

/// The window starting one warm-up from now.
pub(crate) fn window(plan: &Plan) -> Window {
    let start = Instant::now() + plan.warmup;
    Window {
        start,
        end: start + plan.window,
    }
}

/// Runs on the coordinating thread while `clients` clients work through
/// `window`: reads the counters at its edges, lets the threads exit, waits up
/// to the grace period for the clients to finish, then runs the `after` hook.
pub(crate) fn coordinate(
    plan: &Plan,
    window: &Window,
    servers: &[u32],
    progress: &Progress,
    clients: usize,
    hooks: &Hooks<'_>,
) -> anyhow::Result<Usage> {
    let result = (|| -> anyhow::Result<Usage> {
        if let Some(hook) = hooks.mid_warmup {
            sleep_until(window.start - plan.warmup / 2);
            hook()?;
        }
        let this = ["self".to_owned()];
        sleep_until(window.start);
        let before = Snapshot::take(&this, servers)?;
        sleep_until(window.end);
        let after = Snapshot::take(&this, servers);
        progress.release();
        let after = after?;
        let deadline = window.end + plan.grace;
        while progress.done() < clients && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(after.since(&before, clients.saturating_sub(progress.done())))
    })();
    // Whatever happened: the threads may exit, a frozen node is resumed.
    progress.release();
    let after = hooks.after.map_or(Ok(()), |hook| hook());
    let usage = result?;
    after?;
    Ok(usage)
}

pub(crate) fn sleep_until(instant: Instant) {
    let now = Instant::now();
    if instant > now {
        std::thread::sleep(instant - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_shares_and_the_smaller_side() {
        let mut record = FairRecord::new(2);
        assert_eq!(record.shares(), None);
        assert_eq!(record.min_share(), None);
        assert_eq!(record.handoff_quantile(0.5), None);
        for side in [0, 0, 0, 1] {
            record.count(side);
        }
        let mut other = FairRecord::new(2);
        for _ in 0..4 {
            other.count(1);
        }
        other.handoff(Duration::from_micros(300));
        record.merge(&other);
        assert_eq!(record.total(), 8);
        assert_eq!(record.shares(), Some(vec![37.5, 62.5]));
        assert_eq!(record.min_share(), Some(37.5));
        assert_eq!(record.handoffs(), 1);
        let p50 = record.handoff_quantile(0.5).expect("one hand-off");
        assert!(p50.abs_diff(Duration::from_micros(300)) < Duration::from_micros(1));
        let mut starved = FairRecord::new(2);
        starved.count(0);
        assert_eq!(starved.min_share(), Some(0.0));
    }

    #[test]
    fn procs_shares_and_waits() {
        let mut record = ProcsRecord::new(4);
        assert_eq!(record.max_min_share(), None);
        assert_eq!(record.wait_quantile(0.5), None);
        for index in [0, 0, 1, 2] {
            record.count(index);
            record.wait(Duration::from_millis(2));
        }
        let mut other = ProcsRecord::new(4);
        other.count(0);
        other.wait(Duration::from_millis(2));
        other.checked(7);
        record.merge(&other);
        assert_eq!(record.total(), 5);
        assert_eq!(record.holds(), 7);
        // Process 3 never got the lock.
        assert_eq!(record.max_min_share(), Some((60.0, 0.0)));
        let p50 = record.wait_quantile(0.5).expect("waits");
        assert!(p50.abs_diff(Duration::from_millis(2)) < Duration::from_micros(10));
    }
}
