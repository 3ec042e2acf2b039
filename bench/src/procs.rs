//! The procs mode: [`PROCS`] processes contend for one key, each with a
//! manager of its own built with the library's defaults (retry pauses of
//! 10–200 ms, acquire timeout 10 s) and one thread that loops `lock` +
//! `release`, as application instances waiting for a shared job would. No
//! local line helps here: every hand-off goes through the nodes.
//!
//! The benchmark runs itself as the children ([`CHILD_ARG`]): each gets the
//! masters, the key and the window as Unix-time nanoseconds (an `Instant`
//! means nothing in another process), and writes one line per cycle to a
//! file of its own, which the parent reads once the child has exited.
//! Besides the cycles, the mode reports the wait (from calling `lock` to
//! holding the lock), each process's share of the acquisitions, and
//! overlaps: the hold intervals of all children, read on the system clock
//! (`SystemTime`, one clock for all processes), must not intersect.
//!
//! Cycles count as in the other modes (started and ended inside the window).
//! Waits count when they end inside the window, whenever they began, and so
//! do the waits still going on at its end, with their whole length: a
//! process starved through the window shows in the tail instead of
//! dropping out of it.
//!
//! The parent kills and reaps every child on every path: a child still
//! running a grace period after the window is killed and counts as stalled.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use redlock_redis::Redlock;

use crate::cell::{Cell, Outcome, PROCS, TTL};
use crate::measure::{self, ProcsRecord, Recorder, Snapshot, Window};

/// The hidden first argument that makes the benchmark a procs-mode child:
/// `__procs-child INDEX START_NS END_NS KEY OUT URL...`.
pub(crate) const CHILD_ARG: &str = "__procs-child";

/// How often the parent checks whether its children have exited.
const POLL: Duration = Duration::from_millis(5);

/// Distinguishes the runs (rounds) of one benchmark process: each locks its
/// own key and writes to its own directory, so that a child killed while
/// holding the lock cannot block the next round for a TTL.
static RUN: AtomicU64 = AtomicU64::new(0);

/// Runs one round of the procs mode: starts the children, reads the
/// counters at the window's edges, waits for the children (killing those
/// past the grace period), and folds their reports.
pub(crate) fn run(cell: &Cell<'_>) -> anyhow::Result<Outcome> {
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let key = format!("{}:{}:{run}", cell.key(0), std::process::id());
    let dir = ScratchDir::create(run)?;
    let plan = &cell.setup.plan;
    let window = measure::window(plan);
    let (start_ns, end_ns) = (unix_nanos_at(window.start), unix_nanos_at(window.end));
    let exe = std::env::current_exe().context("locating the benchmark's executable")?;

    let mut children = Children::default();
    for index in 0..PROCS {
        let child = Command::new(&exe)
            .arg(CHILD_ARG)
            .arg(index.to_string())
            .arg(start_ns.to_string())
            .arg(end_ns.to_string())
            .arg(&key)
            .arg(dir.report(index))
            .args(&cell.urls)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting a procs-mode child")?;
        children.0.push(Some(child));
    }
    let pids: Vec<String> = children.pids();

    measure::sleep_until(window.start);
    let before = Snapshot::take(&pids, &cell.setup.servers)?;
    measure::sleep_until(window.end);
    let after = Snapshot::take(&pids, &cell.setup.servers)?;
    let stalled = children.wait_until(window.end + plan.grace)?;
    let usage = after.since(&before, stalled);

    let mut record = Recorder::new();
    let mut procs = ProcsRecord::new(PROCS);
    let mut holds = Vec::new();
    for index in 0..PROCS {
        match Report::read(&dir.report(index)) {
            Ok(report) => report.fold(index, &mut record, &mut procs, &mut holds),
            // A stalled child was killed: the row fails as stalled.
            Err(_) if stalled > 0 => {}
            Err(e) => record.fault(format!("procs child {index}: {e:#}")),
        }
    }
    procs.checked(holds.len() as u64);
    Ok(Outcome {
        record,
        usage,
        overlaps: Some(overlaps(holds)),
        fair: None,
        procs: Some(procs),
        shared: None,
        node_timeouts: None,
    })
}

/// The children of one round; dropping kills and reaps those still running.
#[derive(Debug, Default)]
struct Children(Vec<Option<Child>>);

impl Children {
    fn pids(&self) -> Vec<String> {
        self.0
            .iter()
            .flatten()
            .map(|child| child.id().to_string())
            .collect()
    }

    /// Reaps the children that exit before `deadline`, then kills and reaps
    /// the others; returns how many had to be killed.
    fn wait_until(&mut self, deadline: Instant) -> anyhow::Result<usize> {
        loop {
            for slot in &mut self.0 {
                if let Some(child) = slot {
                    if child.try_wait().context("waiting for a child")?.is_some() {
                        *slot = None;
                    }
                }
            }
            if self.0.iter().all(Option::is_none) || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(POLL);
        }
        let running = self.0.iter().flatten().count();
        self.kill_all();
        Ok(running)
    }

    fn kill_all(&mut self) {
        for child in self.0.iter_mut().filter_map(Option::take) {
            kill(child);
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Kills `child` (it may have exited already) and reaps it.
fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A directory for the children's reports, removed when dropped.
#[derive(Debug)]
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn create(run: u64) -> anyhow::Result<Self> {
        let path =
            std::env::temp_dir().join(format!("redlock-bench-procs-{}-{run}", std::process::id()));
        // A leftover of a crashed run with the same pid: start afresh.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(ScratchDir(path))
    }

    fn report(&self, index: usize) -> PathBuf {
        self.0.join(format!("child-{index}.txt"))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Nanoseconds since the Unix epoch on the system clock, shared by all
/// processes of the machine.
fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `instant` (of this process's monotonic clock) as [`unix_nanos`].
fn unix_nanos_at(instant: Instant) -> u64 {
    let (now, wall) = (Instant::now(), unix_nanos());
    let ahead = u64::try_from(instant.saturating_duration_since(now).as_nanos()).unwrap_or(0);
    let behind = u64::try_from(now.saturating_duration_since(instant).as_nanos()).unwrap_or(0);
    (wall + ahead).saturating_sub(behind)
}

/// [`unix_nanos`] `ns` as an instant of this process's monotonic clock.
fn instant_at(ns: u64) -> Instant {
    let (now, wall) = (Instant::now(), unix_nanos());
    if ns >= wall {
        now + Duration::from_nanos(ns - wall)
    } else {
        now.checked_sub(Duration::from_nanos(wall - ns))
            .unwrap_or(now)
    }
}

/// Counts hold intervals `[from, to)` (Unix ns) that begin before an
/// earlier-beginning one has ended: with the lock excluding, none. One
/// thread per child holds at a time, so an overlap within a child would
/// mean the clock went back; it counts too.
fn overlaps(mut holds: Vec<(u64, u64)>) -> u64 {
    holds.sort_unstable();
    let mut latest_end = 0;
    let mut overlaps = 0;
    for (from, to) in holds {
        if from < latest_end {
            overlaps += 1;
        }
        latest_end = latest_end.max(to);
    }
    overlaps
}

/// What a child writes, one line each, and its reader.
///
/// * `hold FROM_NS TO_NS WAIT_NS CYCLE_NS COUNTED WAITED`: one
///   acquisition, held from `FROM_NS` to `TO_NS` (Unix ns, until the
///   release began); `COUNTED` is 1 when the cycle started and ended inside
///   the window (`0` also when the release failed), `WAITED` when the wait
///   counts (it ended inside the window or went on at its end);
/// * `error COUNTED MESSAGE`: a failed `lock` or `release`;
/// * `end`: the last line, so a report cut short is told from a whole one.
#[derive(Debug, Default)]
struct Report {
    holds: Vec<(u64, u64)>,
    /// Latencies of the counted cycles.
    cycles: Vec<Duration>,
    /// The waits that count.
    waits: Vec<Duration>,
    /// (counted, message) of the errors.
    errors: Vec<(bool, String)>,
}

impl Report {
    fn read(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text)
    }

    fn parse(text: &str) -> anyhow::Result<Self> {
        let mut report = Report::default();
        let mut ended = false;
        for line in text.lines() {
            let mut fields = line.split(' ');
            match fields.next() {
                Some("hold") => {
                    let mut next = || -> anyhow::Result<u64> {
                        fields
                            .next()
                            .context("a short hold line")?
                            .parse()
                            .context("a number in a hold line")
                    };
                    let (from, to, wait, cycle, counted, waited) =
                        (next()?, next()?, next()?, next()?, next()?, next()?);
                    report.holds.push((from, to));
                    if counted == 1 {
                        report.cycles.push(Duration::from_nanos(cycle));
                    }
                    if waited == 1 {
                        report.waits.push(Duration::from_nanos(wait));
                    }
                }
                Some("error") => {
                    let rest = line.strip_prefix("error ").unwrap_or_default();
                    let (counted, message) = rest.split_once(' ').unwrap_or((rest, ""));
                    report.errors.push((counted == "1", message.to_owned()));
                }
                Some("end") => ended = true,
                _ => bail!("unexpected line {line:?}"),
            }
        }
        if !ended {
            bail!("the report has no end line (the child failed)");
        }
        Ok(report)
    }

    fn fold(
        self,
        index: usize,
        record: &mut Recorder,
        procs: &mut ProcsRecord,
        holds: &mut Vec<(u64, u64)>,
    ) {
        for cycle in self.cycles {
            record.ok_counted(cycle);
            procs.count(index);
        }
        for wait in self.waits {
            procs.wait(wait);
        }
        for (counted, message) in self.errors {
            record.error_counted(counted, message);
        }
        holds.extend(self.holds);
    }
}

/// The child's side: `args` are those after [`CHILD_ARG`].
pub(crate) fn child(args: impl IntoIterator<Item = String>) -> anyhow::Result<()> {
    let mut args = args.into_iter();
    let mut next = |what: &str| args.next().with_context(|| format!("missing {what}"));
    let _index: usize = next("the index")?.parse().context("the index")?;
    let start_ns: u64 = next("the start")?.parse().context("the start")?;
    let end_ns: u64 = next("the end")?.parse().context("the end")?;
    let key = next("the key")?;
    let out = PathBuf::from(next("the report path")?);
    let urls: Vec<String> = args.collect();
    let window = Window {
        start: instant_at(start_ns),
        end: instant_at(end_ns),
    };
    // The library's defaults, as an application would build it; wake-ups
    // can be turned off (REDLOCK_BENCH_WAKE_UPS=0) to compare.
    let wake_ups = std::env::var("REDLOCK_BENCH_WAKE_UPS").map_or(true, |v| v != "0");
    let locks = Redlock::builder(Vec::new())
        .wake_ups(wake_ups)
        .own_rounds(crate::ours::own_rounds())
        .poller(crate::ours::poller() != Some(false))
        .poller_from(crate::ours::poller_from())
        .connect(&urls)
        .context("building the manager")?;
    let mut lines = String::new();
    while window.open() {
        let started = Instant::now();
        match locks.lock(key.as_str(), TTL) {
            Ok(lock) => {
                let acquired = Instant::now();
                let from = unix_nanos();
                std::thread::yield_now();
                let to = unix_nanos();
                let released = lock.release();
                let ended = Instant::now();
                let counted = released.is_ok() && window.contains(started, ended);
                let waited = acquired >= window.start && started <= window.end;
                let _ = writeln!(
                    lines,
                    "hold {from} {to} {} {} {} {}",
                    (acquired - started).as_nanos(),
                    (ended - started).as_nanos(),
                    u8::from(counted),
                    u8::from(waited),
                );
                if let Err(e) = released {
                    let counted = window.contains(started, ended);
                    error_line(&mut lines, counted, &format!("release: {e}"));
                }
            }
            Err(e) => {
                let counted = window.contains(started, Instant::now());
                error_line(&mut lines, counted, &format!("lock: {e}"));
            }
        }
    }
    lines.push_str("end\n");
    let mut file =
        BufWriter::new(File::create(&out).with_context(|| format!("creating {}", out.display()))?);
    file.write_all(lines.as_bytes())?;
    file.flush()?;
    Ok(())
}

fn error_line(lines: &mut String, counted: bool, message: &str) {
    let message = message.replace(['\n', '\r'], " ");
    let _ = writeln!(lines, "error {} {message}", u8::from(counted));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disjoint_holds_do_not_overlap() {
        assert_eq!(overlaps(vec![]), 0);
        // Back to back (one released as the next acquired) is no overlap.
        assert_eq!(overlaps(vec![(30, 40), (10, 20), (20, 30)]), 0);
        // (15, 25) begins inside (10, 20); (12, 13) inside (10, 20) too.
        assert_eq!(overlaps(vec![(10, 20), (15, 25), (12, 13), (40, 50)]), 2);
    }

    #[test]
    fn a_report_round_trips() -> anyhow::Result<()> {
        let report = Report::parse(
            "hold 10 20 3000 5000 1 1\nhold 30 40 7 9 0 1\nerror 1 lock: timed out after 10 s\nend\n",
        )?;
        assert_eq!(report.holds, [(10, 20), (30, 40)]);
        assert_eq!(report.cycles, [Duration::from_nanos(5000)]);
        assert_eq!(
            report.waits,
            [Duration::from_nanos(3000), Duration::from_nanos(7)]
        );
        assert_eq!(
            report.errors,
            [(true, "lock: timed out after 10 s".to_owned())]
        );
        let mut record = Recorder::new();
        let mut procs = ProcsRecord::new(PROCS);
        let mut holds = Vec::new();
        report.fold(2, &mut record, &mut procs, &mut holds);
        assert_eq!((record.ok_count(), record.errors()), (1, 1));
        assert_eq!(procs.total(), 1);
        assert_eq!(holds.len(), 2);
        // Cut short: no end line.
        assert!(Report::parse("hold 10 20 3000 5000 1 1\n").is_err());
        assert!(Report::parse("hold 10 20 3000 5000 1\nend\n").is_err());
        assert!(Report::parse("bogus\nend\n").is_err());
        Ok(())
    }

    #[test]
    fn unix_time_and_instants_convert_both_ways() {
        let later = Instant::now() + Duration::from_secs(3);
        let back = instant_at(unix_nanos_at(later));
        assert!(back.max(later) - back.min(later) < Duration::from_millis(50));
    }
}
