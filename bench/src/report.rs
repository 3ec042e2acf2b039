//! The table rows, the ratios, and the summary line.

use std::fmt::Write as _;
use std::time::Duration;

use crate::cell::{Impl, Mode, Outcome, FAIR_SIDES, PROCS, SEM_MANAGERS, SEM_PERMITS};
use crate::measure::{FairRecord, ProcsRecord, Recorder, SharedRecord, Usage};

/// One implementation in one mode, over all rounds.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) mode: Mode,
    pub(crate) imp: Impl,
    /// Total measured time (the windows of all rounds that ran).
    measured: Duration,
    rounds: usize,
    record: Recorder,
    usage: Usage,
    overlaps: Option<u64>,
    /// Fair mode: the sides' acquisitions and the hand-offs between them.
    fair: Option<FairRecord>,
    /// Procs mode: each process's acquisitions and the waits.
    procs: Option<ProcsRecord>,
    /// Semaphore and mutex4x4 modes: each manager's acquisitions, the
    /// waits, the most inside at once.
    shared: Option<SharedRecord>,
    /// Our manager's node timeouts, and those queued past their deadline.
    node_timeouts: Option<(u64, u64)>,
    /// A failure that ends the row: setup failed, a client stalled or could
    /// not go on. Later rounds skip the row.
    broken: Option<String>,
}

impl Row {
    pub(crate) fn new(mode: Mode, imp: Impl) -> Self {
        Row {
            mode,
            imp,
            measured: Duration::ZERO,
            rounds: 0,
            record: Recorder::new(),
            usage: Usage::default(),
            overlaps: None,
            fair: None,
            procs: None,
            shared: None,
            node_timeouts: None,
            broken: None,
        }
    }

    /// Adds one round: its outcome, or why it could not run.
    pub(crate) fn add(&mut self, window: Duration, result: anyhow::Result<Outcome>) {
        match result {
            Ok(outcome) => {
                self.measured += window;
                self.rounds += 1;
                if outcome.usage.stalled > 0 && self.broken.is_none() {
                    self.broken = Some(format!(
                        "stalled: {} of {} clients still blocked a grace period after the window",
                        outcome.usage.stalled,
                        self.mode.clients(),
                    ));
                }
                if let Some(fault) = outcome.record.fault_message() {
                    self.broken.get_or_insert_with(|| fault.to_owned());
                }
                self.record.merge(outcome.record);
                self.usage.add(&outcome.usage);
                if let Some(n) = outcome.overlaps {
                    *self.overlaps.get_or_insert(0) += n;
                }
                if let Some((all, queued)) = outcome.node_timeouts {
                    let sum = self.node_timeouts.get_or_insert((0, 0));
                    sum.0 += all;
                    sum.1 += queued;
                }
                if let Some(fair) = &outcome.fair {
                    self.fair
                        .get_or_insert_with(|| FairRecord::new(FAIR_SIDES))
                        .merge(fair);
                }
                if let Some(procs) = &outcome.procs {
                    self.procs
                        .get_or_insert_with(|| ProcsRecord::new(PROCS))
                        .merge(procs);
                }
                if let Some(shared) = &outcome.shared {
                    self.shared
                        .get_or_insert_with(|| SharedRecord::new(SEM_MANAGERS))
                        .merge(shared);
                }
            }
            Err(e) => {
                self.broken.get_or_insert_with(|| format!("{e:#}"));
            }
        }
    }

    /// Whether later rounds should skip this row.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// Why the row failed: broken, or no cycle completed in any window.
    pub(crate) fn failure(&self) -> Option<String> {
        if let Some(broken) = &self.broken {
            return Some(broken.clone());
        }
        (self.record.ok_count() == 0).then(|| match self.record.first_error() {
            Some(error) => format!("no cycle completed inside the window; first error: {error}"),
            None => "no cycle completed inside the window (a cycle takes longer)".to_owned(),
        })
    }

    pub(crate) fn ok_per_sec(&self) -> Option<f64> {
        (self.failure().is_none() && !self.measured.is_zero())
            .then(|| self.record.ok_count() as f64 / self.measured.as_secs_f64())
    }

    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        if self.failure().is_some() {
            return None;
        }
        self.record.quantile(q)
    }

    /// Client CPU time per cycle of a row that succeeded, in µs.
    pub(crate) fn client_cpu_per_cycle(&self) -> Option<f64> {
        let ok = self.record.ok_count();
        (self.failure().is_none() && self.rounds > 0 && ok > 0)
            .then(|| self.usage.client_cpu.as_secs_f64() * 1e6 / ok as f64)
    }

    /// Client context switches per cycle of a row that succeeded.
    pub(crate) fn context_switches_per_cycle(&self) -> Option<f64> {
        let ok = self.record.ok_count();
        (self.failure().is_none() && self.rounds > 0 && ok > 0)
            .then(|| self.usage.context_switches as f64 / ok as f64)
    }

    /// The markdown header matching [`Row::markdown`].
    pub(crate) fn header() -> String {
        "| mode | implementation | ok/s | p50 µs | p99 µs | p99.9 µs | client CPU µs/cycle | \
         server CPU µs/cycle | ctx switches/cycle | errors | overlaps | note |\n\
         |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
            .to_owned()
    }

    /// The row as one markdown table line.
    pub(crate) fn markdown(&self) -> String {
        let mut line = format!("| {} | {} |", self.mode, self.imp.name());
        let ok = self.record.ok_count();
        let per_cycle = |total: f64| (ok > 0).then(|| total / ok as f64);
        let micros = |q: f64| self.record.quantile(q).map(|d| d.as_secs_f64() * 1e6);
        let rate = (!self.measured.is_zero()).then(|| ok as f64 / self.measured.as_secs_f64());
        // (value, decimals, decimals below 10): a peer stuck on a frozen
        // node makes well under 10 cycles per second, and the ceiling costs
        // the client a few µs per cycle.
        let cells = [
            (rate, 0, 2),
            (micros(0.5), 0, 0),
            (micros(0.99), 0, 0),
            (micros(0.999), 0, 0),
            (per_cycle(self.usage.client_cpu.as_secs_f64() * 1e6), 0, 1),
            (per_cycle(self.usage.server_cpu.as_secs_f64() * 1e6), 0, 1),
            (per_cycle(self.usage.context_switches as f64), 1, 1),
        ];
        for (value, decimals, small) in cells {
            match value {
                Some(v) if self.rounds > 0 => {
                    let decimals = if v > 0.0 && v < 10.0 { small } else { decimals };
                    let _ = write!(line, " {v:.decimals$} |");
                }
                _ => line.push_str(" – |"),
            }
        }
        let _ = write!(line, " {} |", self.record.errors());
        match self.overlaps {
            Some(n) => {
                let _ = write!(line, " {n} |");
            }
            None => line.push_str(" – |"),
        }
        match self.failure() {
            Some(failure) => {
                let _ = write!(line, " FAILED: {} |", one_line(Some(&failure)));
            }
            None if self.record.errors() > 0 => {
                let _ = write!(
                    line,
                    " first error: {} |",
                    one_line(self.record.first_error())
                );
            }
            None => match self.node_timeouts {
                Some((all, queued)) if all > 0 => {
                    let _ = write!(
                        line,
                        " node timeouts: {all} ({queued} queued past the deadline) |"
                    );
                }
                _ => line.push_str(" |"),
            },
        }
        line
    }

    /// A short progress line for one round of this row.
    pub(crate) fn progress(&self) -> String {
        match self.failure() {
            Some(failure) => format!(
                "{} / {}: FAILED: {}",
                self.mode,
                self.imp.name(),
                one_line(Some(&failure))
            ),
            None => format!(
                "{} / {}: {:.0} ok/s, p50 {:.0} µs{} (so far)",
                self.mode,
                self.imp.name(),
                self.ok_per_sec().unwrap_or(0.0),
                self.quantile(0.5).map_or(0.0, |d| d.as_secs_f64() * 1e6),
                self.fair.as_ref().and_then(FairRecord::shares).map_or_else(
                    String::new,
                    |shares| format!(", shares {}", percents(&shares))
                ),
            ),
        }
    }

    /// The smaller side's share of a fair-mode row that succeeded, in
    /// percent.
    pub(crate) fn fair_min_share(&self) -> Option<f64> {
        if self.failure().is_some() {
            return None;
        }
        self.fair.as_ref().and_then(FairRecord::min_share)
    }

    /// The procs mode's wait (calling `lock` to holding it) at quantile `q`,
    /// of a row that succeeded.
    pub(crate) fn procs_wait(&self, q: f64) -> Option<Duration> {
        if self.failure().is_some() {
            return None;
        }
        self.procs.as_ref().and_then(|p| p.wait_quantile(q))
    }

    /// The largest process's share of a procs-mode row that succeeded, in
    /// percent.
    pub(crate) fn procs_max_share(&self) -> Option<f64> {
        if self.failure().is_some() {
            return None;
        }
        self.procs
            .as_ref()
            .and_then(ProcsRecord::max_min_share)
            .map(|(max, _)| max)
    }

    /// The procs mode's own figures, one line, or `None` for other rows.
    pub(crate) fn contention(&self) -> Option<String> {
        let procs = self.procs.as_ref()?;
        let mut line = format!("{} / {}: ", self.mode, self.imp.name());
        if let Some(failure) = self.failure() {
            let _ = write!(line, "FAILED: {}", one_line(Some(&failure)));
            return Some(line);
        }
        let secs = self.measured.as_secs_f64().max(f64::MIN_POSITIVE);
        let _ = write!(
            line,
            "{} acquisitions, {:.0}/s; ",
            procs.total(),
            procs.total() as f64 / secs
        );
        let millis = |q: f64| {
            procs.wait_quantile(q).map_or_else(
                || "–".to_owned(),
                |d| format!("{:.2}", d.as_secs_f64() * 1e3),
            )
        };
        let _ = write!(
            line,
            "wait (lock called to held) p50 {} ms, p99 {} ms, p99.9 {} ms, max {} ms; ",
            millis(0.5),
            millis(0.99),
            millis(0.999),
            millis(1.0),
        );
        match procs.max_min_share() {
            Some((max, min)) => {
                let _ = write!(
                    line,
                    "shares: largest {max:.1} %, smallest {min:.1} % (even: {:.1} %); ",
                    100.0 / PROCS as f64
                );
            }
            None => line.push_str("no acquisition counted; "),
        }
        let _ = write!(
            line,
            "{} errors; {} overlaps in {} hold intervals",
            self.record.errors(),
            self.overlaps.unwrap_or(0),
            procs.holds(),
        );
        Some(line)
    }

    /// The semaphore or mutex4x4 mode's wait at quantile `q`, of a row that
    /// succeeded.
    pub(crate) fn shared_wait(&self, q: f64) -> Option<Duration> {
        if self.failure().is_some() {
            return None;
        }
        self.shared
            .as_ref()
            .and_then(|s| s.by_manager.wait_quantile(q))
    }

    /// The most holders inside at once, of a semaphore or mutex4x4 row
    /// that succeeded.
    pub(crate) fn shared_peak(&self) -> Option<f64> {
        if self.failure().is_some() {
            return None;
        }
        self.shared.as_ref().map(|s| f64::from(s.peak))
    }

    /// The semaphore and mutex4x4 modes' own figures, one line, or `None`
    /// for other rows.
    pub(crate) fn shared(&self) -> Option<String> {
        let shared = self.shared.as_ref()?;
        let mut line = format!("{} / {}: ", self.mode, self.imp.name());
        if let Some(failure) = self.failure() {
            let _ = write!(line, "FAILED: {}", one_line(Some(&failure)));
            return Some(line);
        }
        let by = &shared.by_manager;
        let secs = self.measured.as_secs_f64().max(f64::MIN_POSITIVE);
        let what = if self.mode == Mode::Semaphore {
            "permits"
        } else {
            "locks"
        };
        let _ = write!(
            line,
            "{} {what} taken, {:.0}/s; ",
            by.total(),
            by.total() as f64 / secs
        );
        let millis = |q: f64| {
            by.wait_quantile(q).map_or_else(
                || "–".to_owned(),
                |d| format!("{:.2}", d.as_secs_f64() * 1e3),
            )
        };
        let _ = write!(
            line,
            "wait p50 {} ms, p99 {} ms, p99.9 {} ms, max {} ms; ",
            millis(0.5),
            millis(0.99),
            millis(0.999),
            millis(1.0),
        );
        if let Some((max, min)) = by.max_min_share() {
            let _ = write!(
                line,
                "managers' shares: largest {max:.1} %, smallest {min:.1} %; "
            );
        }
        let allowed = if self.mode == Mode::Semaphore {
            SEM_PERMITS
        } else {
            1
        };
        let _ = write!(
            line,
            "inside at once: at most {} (allowed {allowed}); {} errors; {} overlaps",
            shared.peak,
            self.record.errors(),
            self.overlaps.unwrap_or(0),
        );
        Some(line)
    }

    /// The fair mode's own figures, one line, or `None` for other rows.
    pub(crate) fn fairness(&self) -> Option<String> {
        let fair = self.fair.as_ref()?;
        let mut line = format!("{} / {}: ", self.mode, self.imp.name());
        if let Some(failure) = self.failure() {
            let _ = write!(line, "FAILED: {}", one_line(Some(&failure)));
            return Some(line);
        }
        match fair.shares() {
            Some(shares) => {
                let _ = write!(
                    line,
                    "shares of the {} acquisitions {} (manager 1 / 2), {:.0} acquisitions/s",
                    fair.total(),
                    percents(&shares),
                    fair.total() as f64 / self.measured.as_secs_f64().max(f64::MIN_POSITIVE),
                );
            }
            None => line.push_str("no acquisition counted"),
        }
        match (fair.handoff_quantile(0.5), fair.handoff_quantile(0.99)) {
            (Some(p50), Some(p99)) => {
                let _ = write!(
                    line,
                    "; {} cross-manager hand-offs, p50 {:.0} µs, p99 {:.0} µs",
                    fair.handoffs(),
                    p50.as_secs_f64() * 1e6,
                    p99.as_secs_f64() * 1e6,
                );
            }
            _ => line.push_str("; no cross-manager hand-off"),
        }
        Some(line)
    }
}

/// Shares as "50.0 % / 50.0 %".
fn percents(shares: &[f64]) -> String {
    let parts: Vec<String> = shares.iter().map(|s| format!("{s:.1} %")).collect();
    parts.join(" / ")
}

/// A message fit for a table cell.
fn one_line(text: Option<&str>) -> String {
    let text = text.unwrap_or("unknown").replace(['\n', '|'], " ");
    let mut short: String = text.chars().take(160).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// The ratios of the summary line.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub(crate) p50_vs_floor: Option<f64>,
    pub(crate) distinct8_vs_ceiling: Option<f64>,
    pub(crate) distinct32_vs_ceiling: Option<f64>,
    pub(crate) distinct8_vs_rslock: Option<f64>,
    pub(crate) distinct8_p999_vs_rslock: Option<f64>,
    pub(crate) hot_vs_rslock: Option<f64>,
    pub(crate) hot_p999_ms: Option<f64>,
    pub(crate) frozen_p50_ratio: Option<f64>,
    pub(crate) n9_vs_n3_p50: Option<f64>,
    /// The smaller manager's share of the fair mode's acquisitions, in %.
    pub(crate) fair_min_share: Option<f64>,
    /// 8x distinct ok/s while `stats()` is read every second, over without.
    pub(crate) stats8_vs_ours: Option<f64>,
    /// 8x distinct ok/s while `MetricsEvents` records, over without.
    pub(crate) metrics8_vs_ours: Option<f64>,
    /// 1×1: our client CPU per cycle over the floor's.
    pub(crate) cpu1_vs_floor: Option<f64>,
    /// 1×1: our client context switches per cycle.
    pub(crate) ctxsw1_per_cycle: Option<f64>,
    /// Procs mode: acquisitions per second, all processes.
    pub(crate) procs_okps: Option<f64>,
    /// Procs mode: the wait's p99.9, in ms.
    pub(crate) procs_p999_ms: Option<f64>,
    /// Procs mode: the largest process's share of the acquisitions, in %.
    pub(crate) procs_max_share: Option<f64>,
    /// Semaphore mode: permits taken per second, all threads.
    pub(crate) sem_okps: Option<f64>,
    /// Semaphore mode's permits per second over mutex4x4's locks per
    /// second, in the same run.
    pub(crate) sem_vs_mutex4x4: Option<f64>,
    /// Semaphore mode: the wait's p50, in ms.
    pub(crate) sem_wait_p50_ms: Option<f64>,
    /// Semaphore mode: the wait's p99, in ms.
    pub(crate) sem_wait_p99_ms: Option<f64>,
    /// Semaphore mode's wait p99 over mutex4x4's.
    pub(crate) sem_wait_p99_vs_mutex4x4: Option<f64>,
    /// Semaphore mode: the most holders inside at once.
    pub(crate) sem_peak: Option<f64>,
}

impl Summary {
    pub(crate) fn from_rows(rows: &[Row]) -> Self {
        let p50 = |mode, imp| seconds(rows, mode, imp, 0.5);
        let p999 = |imp, mode| seconds(rows, mode, imp, 0.999);
        let rate = |mode, imp| find(rows, mode, imp).and_then(Row::ok_per_sec);
        Summary {
            p50_vs_floor: ratio(p50(Mode::One, Impl::Ours), p50(Mode::One, Impl::RawFloor)),
            distinct8_vs_ceiling: ratio(
                rate(Mode::Distinct(8), Impl::Ours),
                rate(Mode::Distinct(8), Impl::RawCeiling),
            ),
            distinct32_vs_ceiling: ratio(
                rate(Mode::Distinct(32), Impl::Ours),
                rate(Mode::Distinct(32), Impl::RawCeiling),
            ),
            distinct8_vs_rslock: ratio(
                rate(Mode::Distinct(8), Impl::Ours),
                rate(Mode::Distinct(8), Impl::Rslock),
            ),
            distinct8_p999_vs_rslock: ratio(
                p999(Impl::Ours, Mode::Distinct(8)),
                p999(Impl::Rslock, Mode::Distinct(8)),
            ),
            hot_vs_rslock: ratio(rate(Mode::Hot, Impl::Ours), rate(Mode::Hot, Impl::Rslock)),
            hot_p999_ms: seconds(rows, Mode::Hot, Impl::Ours, 0.999).map(|s| s * 1e3),
            frozen_p50_ratio: ratio(p50(Mode::Frozen, Impl::Ours), p50(Mode::One, Impl::Ours)),
            // N = 5 is the 1×1 mode.
            n9_vs_n3_p50: ratio(
                p50(Mode::Nodes(9), Impl::Ours),
                p50(Mode::Nodes(3), Impl::Ours),
            ),
            fair_min_share: find(rows, Mode::Fair, Impl::Ours).and_then(Row::fair_min_share),
            stats8_vs_ours: ratio(
                rate(Mode::Distinct(8), Impl::OursStats),
                rate(Mode::Distinct(8), Impl::Ours),
            ),
            metrics8_vs_ours: ratio(
                rate(Mode::Distinct(8), Impl::OursMetrics),
                rate(Mode::Distinct(8), Impl::Ours),
            ),
            cpu1_vs_floor: ratio(
                find(rows, Mode::One, Impl::Ours).and_then(Row::client_cpu_per_cycle),
                find(rows, Mode::One, Impl::RawFloor).and_then(Row::client_cpu_per_cycle),
            ),
            ctxsw1_per_cycle: find(rows, Mode::One, Impl::Ours)
                .and_then(Row::context_switches_per_cycle),
            procs_okps: rate(Mode::Procs, Impl::Ours),
            procs_p999_ms: find(rows, Mode::Procs, Impl::Ours)
                .and_then(|r| r.procs_wait(0.999))
                .map(|d| d.as_secs_f64() * 1e3),
            procs_max_share: find(rows, Mode::Procs, Impl::Ours).and_then(Row::procs_max_share),
            sem_okps: rate(Mode::Semaphore, Impl::Ours),
            sem_vs_mutex4x4: ratio(
                rate(Mode::Semaphore, Impl::Ours),
                rate(Mode::Mutex4x4, Impl::Ours),
            ),
            sem_wait_p50_ms: shared_wait_ms(rows, Mode::Semaphore, 0.5),
            sem_wait_p99_ms: shared_wait_ms(rows, Mode::Semaphore, 0.99),
            sem_wait_p99_vs_mutex4x4: ratio(
                shared_wait_ms(rows, Mode::Semaphore, 0.99),
                shared_wait_ms(rows, Mode::Mutex4x4, 0.99),
            ),
            sem_peak: find(rows, Mode::Semaphore, Impl::Ours).and_then(Row::shared_peak),
        }
    }

    /// Context for the ratios: the same ratios for the references and the
    /// fastest peer, from the same run.
    pub(crate) fn references(rows: &[Row]) -> String {
        let p50 = |mode, imp| seconds(rows, mode, imp, 0.5);
        let rate = |mode, imp| find(rows, mode, imp).and_then(Row::ok_per_sec);
        let over_ceiling = |k, imp| {
            ratio(
                rate(Mode::Distinct(k), imp),
                rate(Mode::Distinct(k), Impl::RawCeiling),
            )
        };
        let p999_over_rslock = |imp| {
            ratio(
                seconds(rows, Mode::Distinct(8), imp, 0.999),
                seconds(rows, Mode::Distinct(8), Impl::Rslock, 0.999),
            )
        };
        let mut lines = vec![(
            "rslock p50_vs_floor".to_owned(),
            ratio(p50(Mode::One, Impl::Rslock), p50(Mode::One, Impl::RawFloor)),
        )];
        for (name, imp) in [
            ("rslock", Impl::Rslock),
            ("parked", Impl::RawParked),
            ("ceiling-ours", Impl::RawCeilingOurs),
            ("parked-ours", Impl::RawParkedOurs),
        ] {
            for k in [8, 32] {
                lines.push((
                    format!("{name} distinct{k}_vs_ceiling"),
                    over_ceiling(k, imp),
                ));
            }
        }
        for (name, imp) in [
            ("parked", Impl::RawParked),
            ("parked-ours", Impl::RawParkedOurs),
        ] {
            lines.push((
                format!("{name} distinct8_p999_vs_rslock"),
                p999_over_rslock(imp),
            ));
        }
        lines.extend([
            (
                "rslock hot_p999_ms".to_owned(),
                seconds(rows, Mode::Hot, Impl::Rslock, 0.999).map(|s| s * 1e3),
            ),
            (
                "floor n9_vs_n3_p50".to_owned(),
                ratio(
                    p50(Mode::Nodes(9), Impl::RawFloor),
                    p50(Mode::Nodes(3), Impl::RawFloor),
                ),
            ),
        ]);
        let mut out = String::new();
        for (name, value) in lines {
            let _ = writeln!(out, "  {name:<38} {:>8}", number(value));
        }
        out
    }

    /// Each ratio next to the target for it.
    pub(crate) fn targets(&self) -> String {
        let lines = [
            ("p50_vs_floor", self.p50_vs_floor, "<= 1.1"),
            ("distinct8_vs_ceiling", self.distinct8_vs_ceiling, ">= 0.8"),
            (
                "distinct32_vs_ceiling",
                self.distinct32_vs_ceiling,
                ">= 0.8",
            ),
            (
                "distinct8_vs_rslock",
                self.distinct8_vs_rslock,
                "(~1.6 at the ceiling target)",
            ),
            (
                "distinct8_p999_vs_rslock",
                self.distinct8_p999_vs_rslock,
                "<= 1.0",
            ),
            ("hot_vs_rslock", self.hot_vs_rslock, ">= 2"),
            ("hot_p999_ms", self.hot_p999_ms, "<= 20"),
            ("frozen_p50_ratio", self.frozen_p50_ratio, "<= 1.2"),
            ("n9_vs_n3_p50", self.n9_vs_n3_p50, "<= 1.5"),
            (
                "fair_min_share",
                self.fair_min_share,
                "(% of acquisitions; 50 = an even split)",
            ),
            ("stats8_vs_ours", self.stats8_vs_ours, ">= 0.97"),
            ("metrics8_vs_ours", self.metrics8_vs_ours, ">= 0.97"),
            (
                "cpu1_vs_floor",
                self.cpu1_vs_floor,
                "(1×1 client CPU per cycle, ours / floor)",
            ),
            (
                "ctxsw1_per_cycle",
                self.ctxsw1_per_cycle,
                "(1×1 context switches per cycle, ours)",
            ),
            (
                "procs_okps",
                self.procs_okps,
                "(acquisitions/s of 8 processes; a later change: 3×)",
            ),
            ("procs_p999_ms", self.procs_p999_ms, "<= 20 (wait)"),
            (
                "procs_max_share",
                self.procs_max_share,
                "<= 20 (% of acquisitions; 12.5 = even)",
            ),
            (
                "sem_okps",
                self.sem_okps,
                "(permits/s, 16 threads over 4 managers, 4 permits)",
            ),
            (
                "sem_vs_mutex4x4",
                self.sem_vs_mutex4x4,
                "(permits/s over the same layout's locks/s)",
            ),
            (
                "sem_wait_p50_ms",
                self.sem_wait_p50_ms,
                "(wait for a permit)",
            ),
            (
                "sem_wait_p99_ms",
                self.sem_wait_p99_ms,
                "(wait for a permit)",
            ),
            (
                "sem_wait_p99_vs_mutex4x4",
                self.sem_wait_p99_vs_mutex4x4,
                "(wait p99, semaphore / mutex)",
            ),
            ("sem_peak", self.sem_peak, "<= 4 (holders inside at once)"),
        ];
        let mut out = String::new();
        for (name, value, target) in lines {
            let _ = writeln!(out, "  {name:<30} {:>8}   target {target}", number(value));
        }
        out
    }

    /// The last line the benchmark prints.
    pub(crate) fn line(&self) -> String {
        format!(
            "bench p50_vs_floor={} distinct8_vs_ceiling={} distinct32_vs_ceiling={} \
             distinct8_vs_rslock={} distinct8_p999_vs_rslock={} hot_vs_rslock={} hot_p999_ms={} \
             frozen_p50_ratio={} \
             n9_vs_n3_p50={} fair_min_share={} stats8_vs_ours={} metrics8_vs_ours={} \
             cpu1_vs_floor={} ctxsw1_per_cycle={} procs_okps={} procs_p999_ms={} procs_max_share={} \
             sem_okps={} sem_vs_mutex4x4={} sem_wait_p50_ms={} sem_wait_p99_ms={} \
             sem_wait_p99_vs_mutex4x4={} sem_peak={}",
            number(self.p50_vs_floor),
            number(self.distinct8_vs_ceiling),
            number(self.distinct32_vs_ceiling),
            number(self.distinct8_vs_rslock),
            number(self.distinct8_p999_vs_rslock),
            number(self.hot_vs_rslock),
            number(self.hot_p999_ms),
            number(self.frozen_p50_ratio),
            number(self.n9_vs_n3_p50),
            number(self.fair_min_share),
            number(self.stats8_vs_ours),
            number(self.metrics8_vs_ours),
            number(self.cpu1_vs_floor),
            number(self.ctxsw1_per_cycle),
            number(self.procs_okps),
            number(self.procs_p999_ms),
            number(self.procs_max_share),
            number(self.sem_okps),
            number(self.sem_vs_mutex4x4),
            number(self.sem_wait_p50_ms),
            number(self.sem_wait_p99_ms),
            number(self.sem_wait_p99_vs_mutex4x4),
            number(self.sem_peak),
        )
    }
}

/// The semaphore or mutex4x4 mode's wait at quantile `q`, in ms.
fn shared_wait_ms(rows: &[Row], mode: Mode, q: f64) -> Option<f64> {
    find(rows, mode, Impl::Ours)
        .and_then(|r| r.shared_wait(q))
        .map(|d| d.as_secs_f64() * 1e3)
}

fn find(rows: &[Row], mode: Mode, imp: Impl) -> Option<&Row> {
    rows.iter().find(|r| r.mode == mode && r.imp == imp)
}

/// A latency quantile of a row that succeeded, in seconds.
fn seconds(rows: &[Row], mode: Mode, imp: Impl, q: f64) -> Option<f64> {
    find(rows, mode, imp)
        .and_then(|r| r.quantile(q))
        .map(|d| d.as_secs_f64())
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn number(value: Option<f64>) -> String {
    value.map_or_else(|| "nan".to_owned(), |v| format!("{v:.2}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_min_share_is_the_smaller_managers_percent() {
        use std::time::Instant;

        use crate::measure::Window;

        let start = Instant::now();
        let window = Window {
            start,
            end: start + Duration::from_secs(1),
        };
        let mut record = Recorder::new();
        record.ok_at(&window, start, start + Duration::from_millis(1), 40);
        let mut fair = FairRecord::new(2);
        for side in std::iter::repeat_n(0, 39).chain([1]) {
            fair.count(side);
        }
        let mut row = Row::new(Mode::Fair, Impl::Ours);
        row.add(
            Duration::from_secs(1),
            Ok(Outcome {
                record,
                usage: Usage::default(),
                overlaps: Some(0),
                fair: Some(fair),
                procs: None,
                shared: None,
                node_timeouts: None,
            }),
        );
        let summary = Summary::from_rows(&[row]);
        assert_eq!(summary.fair_min_share, Some(2.5));
        assert!(
            summary.line().contains(" fair_min_share=2.50 "),
            "{}",
            summary.line()
        );
    }

    fn outcome(ok: u64, usage: Usage, procs: Option<ProcsRecord>) -> Outcome {
        use std::time::Instant;

        use crate::measure::Window;

        let start = Instant::now();
        let window = Window {
            start,
            end: start + Duration::from_secs(1),
        };
        let mut record = Recorder::new();
        record.ok_at(&window, start, start + Duration::from_millis(1), ok);
        Outcome {
            record,
            usage,
            overlaps: procs.as_ref().map(|_| 0),
            fair: None,
            procs,
            shared: None,
            node_timeouts: None,
        }
    }

    #[test]
    fn procs_figures_and_one_by_one_costs_reach_the_summary() {
        let mut procs = ProcsRecord::new(PROCS);
        for index in [0, 0, 0, 1] {
            procs.count(index);
            procs.wait(Duration::from_millis(1));
        }
        procs.wait(Duration::from_millis(300));
        let mut row = Row::new(Mode::Procs, Impl::Ours);
        row.add(
            Duration::from_secs(2),
            Ok(outcome(4, Usage::default(), Some(procs))),
        );
        let usage = |cpu_ms, switches| Usage {
            client_cpu: Duration::from_millis(cpu_ms),
            context_switches: switches,
            ..Usage::default()
        };
        let mut ours = Row::new(Mode::One, Impl::Ours);
        ours.add(
            Duration::from_secs(1),
            Ok(outcome(100, usage(30, 250), None)),
        );
        let mut floor = Row::new(Mode::One, Impl::RawFloor);
        floor.add(
            Duration::from_secs(1),
            Ok(outcome(100, usage(20, 100), None)),
        );
        let summary = Summary::from_rows(&[row, ours, floor]);
        assert_eq!(summary.procs_okps, Some(2.0));
        assert_eq!(summary.procs_max_share, Some(75.0));
        let p999 = summary.procs_p999_ms.expect("a wait");
        assert!((p999 - 300.0).abs() < 1.0, "{p999}");
        assert_eq!(summary.cpu1_vs_floor, Some(1.5));
        assert_eq!(summary.ctxsw1_per_cycle, Some(2.5));
        let line = summary.line();
        assert!(
            line.ends_with(
                " cpu1_vs_floor=1.50 ctxsw1_per_cycle=2.50 procs_okps=2.00 \
                 procs_p999_ms=300.15 procs_max_share=75.00 sem_okps=nan sem_vs_mutex4x4=nan \
                 sem_wait_p50_ms=nan sem_wait_p99_ms=nan sem_wait_p99_vs_mutex4x4=nan sem_peak=nan"
            ),
            "{line}"
        );
    }

    #[test]
    fn semaphore_figures_reach_the_summary_next_to_the_mutex_and_an_overlap_fails_the_row() {
        let shared = |waits_ms: &[u64], peak| {
            let mut shared = SharedRecord::new(SEM_MANAGERS);
            for (i, &wait) in waits_ms.iter().enumerate() {
                shared.by_manager.count(i % SEM_MANAGERS);
                shared.by_manager.wait(Duration::from_millis(wait));
            }
            shared.peak = peak;
            shared
        };
        let mut sem = Row::new(Mode::Semaphore, Impl::Ours);
        sem.add(
            Duration::from_secs(1),
            Ok(Outcome {
                shared: Some(shared(&[1, 1, 1, 2], 4)),
                node_timeouts: None,
                ..outcome(400, Usage::default(), None)
            }),
        );
        let mut mutex = Row::new(Mode::Mutex4x4, Impl::Ours);
        mutex.add(
            Duration::from_secs(1),
            Ok(Outcome {
                shared: Some(shared(&[4, 4, 4, 8], 1)),
                node_timeouts: None,
                ..outcome(100, Usage::default(), None)
            }),
        );
        assert!(
            sem.shared()
                .is_some_and(|l| l.contains("at most 4 (allowed 4)")),
            "{:?}",
            sem.shared()
        );
        let summary = Summary::from_rows(&[sem, mutex]);
        assert_eq!(summary.sem_okps, Some(400.0));
        assert_eq!(summary.sem_vs_mutex4x4, Some(4.0));
        assert_eq!(summary.sem_peak, Some(4.0));
        let p99 = summary.sem_wait_p99_vs_mutex4x4.expect("both waits");
        assert!((p99 - 0.25).abs() < 0.01, "{p99}");
        assert!(
            summary.line().contains(" sem_vs_mutex4x4=4.00 "),
            "{}",
            summary.line()
        );

        // The benchmark found five inside: the row fails, its figures go.
        let mut bad = Row::new(Mode::Semaphore, Impl::Ours);
        let mut failed = Outcome {
            shared: Some(shared(&[1], 5)),
            node_timeouts: None,
            ..outcome(400, Usage::default(), None)
        };
        failed
            .record
            .fault("1 entries while 4 holder(s) were inside");
        bad.add(Duration::from_secs(1), Ok(failed));
        assert!(bad.shared().is_some_and(|l| l.contains("FAILED")));
        let summary = Summary::from_rows(&[bad]);
        assert_eq!((summary.sem_okps, summary.sem_peak), (None, None));
    }

    #[test]
    fn missing_ratios_print_as_nan() {
        let line = Summary::from_rows(&[]).line();
        assert_eq!(
            line,
            "bench p50_vs_floor=nan distinct8_vs_ceiling=nan distinct32_vs_ceiling=nan \
             distinct8_vs_rslock=nan distinct8_p999_vs_rslock=nan hot_vs_rslock=nan hot_p999_ms=nan \
             frozen_p50_ratio=nan \
             n9_vs_n3_p50=nan fair_min_share=nan stats8_vs_ours=nan metrics8_vs_ours=nan \
             cpu1_vs_floor=nan ctxsw1_per_cycle=nan procs_okps=nan procs_p999_ms=nan procs_max_share=nan \
             sem_okps=nan sem_vs_mutex4x4=nan sem_wait_p50_ms=nan sem_wait_p99_ms=nan \
             sem_wait_p99_vs_mutex4x4=nan sem_peak=nan"
        );
    }
}
