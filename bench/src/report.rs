//! The table rows, the ratios, and the summary line.

use std::fmt::Write as _;
use std::time::Duration;

use crate::cell::{Impl, Mode, Outcome, FAIR_SIDES};
use crate::measure::{FairRecord, Recorder, Usage};

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
                if let Some(fair) = &outcome.fair {
                    self.fair
                        .get_or_insert_with(|| FairRecord::new(FAIR_SIDES))
                        .merge(fair);
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
            None => line.push_str(" |"),
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
    pub(crate) hot_vs_rslock: Option<f64>,
    pub(crate) hot_p999_ms: Option<f64>,
    pub(crate) frozen_p50_ratio: Option<f64>,
    pub(crate) n9_vs_n3_p50: Option<f64>,
    /// The smaller manager's share of the fair mode's acquisitions, in %.
    pub(crate) fair_min_share: Option<f64>,
    /// 8x distinct ok/s while `stats()` is read every second, over without.
    pub(crate) stats8_vs_ours: Option<f64>,
}

impl Summary {
    pub(crate) fn from_rows(rows: &[Row]) -> Self {
        let p50 = |mode, imp| seconds(rows, mode, imp, 0.5);
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
        }
    }

    /// Context for the ratios: the same ratios for the references and the
    /// fastest peer, from the same run.
    pub(crate) fn references(rows: &[Row]) -> String {
        let p50 = |mode, imp| seconds(rows, mode, imp, 0.5);
        let rate = |mode, imp| find(rows, mode, imp).and_then(Row::ok_per_sec);
        let lines = [
            (
                "rslock p50_vs_floor",
                ratio(p50(Mode::One, Impl::Rslock), p50(Mode::One, Impl::RawFloor)),
            ),
            (
                "rslock distinct8_vs_ceiling",
                ratio(
                    rate(Mode::Distinct(8), Impl::Rslock),
                    rate(Mode::Distinct(8), Impl::RawCeiling),
                ),
            ),
            (
                "rslock distinct32_vs_ceiling",
                ratio(
                    rate(Mode::Distinct(32), Impl::Rslock),
                    rate(Mode::Distinct(32), Impl::RawCeiling),
                ),
            ),
            (
                "rslock hot_p999_ms",
                seconds(rows, Mode::Hot, Impl::Rslock, 0.999).map(|s| s * 1e3),
            ),
            (
                "floor n9_vs_n3_p50",
                ratio(
                    p50(Mode::Nodes(9), Impl::RawFloor),
                    p50(Mode::Nodes(3), Impl::RawFloor),
                ),
            ),
        ];
        let mut out = String::new();
        for (name, value) in lines {
            let _ = writeln!(out, "  {name:<30} {:>8}", number(value));
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
             distinct8_vs_rslock={} hot_vs_rslock={} hot_p999_ms={} frozen_p50_ratio={} \
             n9_vs_n3_p50={} fair_min_share={} stats8_vs_ours={}",
            number(self.p50_vs_floor),
            number(self.distinct8_vs_ceiling),
            number(self.distinct32_vs_ceiling),
            number(self.distinct8_vs_rslock),
            number(self.hot_vs_rslock),
            number(self.hot_p999_ms),
            number(self.frozen_p50_ratio),
            number(self.n9_vs_n3_p50),
            number(self.fair_min_share),
            number(self.stats8_vs_ours),
        )
    }
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

    #[test]
    fn missing_ratios_print_as_nan() {
        let line = Summary::from_rows(&[]).line();
        assert_eq!(
            line,
            "bench p50_vs_floor=nan distinct8_vs_ceiling=nan distinct32_vs_ceiling=nan \
             distinct8_vs_rslock=nan hot_vs_rslock=nan hot_p999_ms=nan frozen_p50_ratio=nan \
             n9_vs_n3_p50=nan fair_min_share=nan stats8_vs_ours=nan"
        );
    }
}
