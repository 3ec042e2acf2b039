//! Seed sweeps over both cores, seed selection from the environment, and
//! the one-line report.

use std::fmt;
use std::ops::Range;

use super::outcome::Outcome;
use super::outcome::ViolationKind;
use super::run::run;
use super::scenario::Scenario;

/// The result of running one scenario over a range of seeds. Independent of
/// the number of threads: per-seed results are combined in seed order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// The scenario's name.
    pub scenario: String,
    /// The first seed run.
    pub first_seed: u64,
    /// Seeds run.
    pub runs: u64,
    /// Runs with at least one violation.
    pub violations: u64,
    /// The smallest seed with a violation.
    pub first_violation_seed: Option<u64>,
    /// The trace hash of the last seed's run.
    pub trace_hash: u64,
    /// Violating runs per kind, indexed as [`ViolationKind::ALL`].
    pub by_kind: [u64; ViolationKind::ALL.len()],
    /// Successful acquires over all runs (shows the sweep did something).
    pub acquired: u64,
    /// Accesses the fenced resource rejected over all runs
    /// ([`Stats::fenced_off`](super::Stats::fenced_off)).
    pub fenced_off: u64,
    /// Leaders election observers reported, over all runs
    /// ([`Stats::observed_leaders`](super::Stats::observed_leaders)); of
    /// them, with a term not yet raised
    /// ([`Stats::observed_early`](super::Stats::observed_early)), and that
    /// never led ([`Stats::observed_phantoms`](super::Stats::observed_phantoms)).
    pub observed: [u64; 3],
}

impl SweepReport {
    /// Violating runs that found `kind`.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario, ViolationKind};
    /// let report = sweep(&Scenario::in_model(), 0..4, 1);
    /// assert_eq!(report.runs_with(ViolationKind::MutualExclusion), 0);
    /// ```
    #[must_use]
    pub fn runs_with(&self, kind: ViolationKind) -> u64 {
        self.by_kind[kind.index()]
    }

    fn add(&mut self, outcome: &Outcome) {
        self.runs += 1;
        self.acquired += outcome.stats.acquired;
        self.fenced_off += outcome.stats.fenced_off;
        let st = &outcome.stats;
        for (sum, n) in self.observed.iter_mut().zip([
            st.observed_leaders,
            st.observed_early,
            st.observed_phantoms,
        ]) {
            *sum += n;
        }
        if !outcome.is_clean() {
            self.violations += 1;
            self.first_violation_seed = Some(match self.first_violation_seed {
                Some(seed) => seed.min(outcome.seed),
                None => outcome.seed,
            });
            for kind in ViolationKind::ALL {
                if outcome.violations.iter().any(|v| v.kind == kind) {
                    self.by_kind[kind.index()] += 1;
                }
            }
        }
    }

    fn merge(&mut self, other: &SweepReport) {
        self.runs += other.runs;
        self.violations += other.violations;
        self.acquired += other.acquired;
        self.fenced_off += other.fenced_off;
        for (sum, n) in self.observed.iter_mut().zip(other.observed) {
            *sum += n;
        }
        self.first_violation_seed = match (self.first_violation_seed, other.first_violation_seed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (mine, theirs) in self.by_kind.iter_mut().zip(other.by_kind) {
            *mine += theirs;
        }
    }
}

impl fmt::Display for SweepReport {
    /// `scenario=NAME runs=N violations=V first_violation_seed=S trace_hash=H`
    /// (`S` is `none` when no run violated; `H` is 16 hex digits).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = match self.first_violation_seed {
            Some(seed) => seed.to_string(),
            None => "none".into(),
        };
        write!(
            f,
            "scenario={} runs={} violations={} first_violation_seed={first} trace_hash={:016x}",
            self.scenario, self.runs, self.violations, self.trace_hash
        )
    }
}

/// Runs `scenario` for every seed in `seeds`, on `threads` threads (at least
/// one). The report does not depend on `threads`.
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{sweep, Scenario};
/// let one = sweep(&Scenario::in_model(), 10..20, 1);
/// let two = sweep(&Scenario::in_model(), 10..20, 2);
/// assert_eq!(one, two);
/// assert_eq!(one.violations, 0);
/// assert!(one.to_string().starts_with("scenario=in-model runs=10 violations=0 first_violation_seed=none"));
/// ```
#[must_use]
pub fn sweep(scenario: &Scenario, seeds: Range<u64>, threads: usize) -> SweepReport {
    let threads = threads.clamp(1, 64) as u64;
    let empty = SweepReport {
        scenario: scenario.name.clone(),
        first_seed: seeds.start,
        runs: 0,
        violations: 0,
        first_violation_seed: None,
        trace_hash: 0,
        by_kind: [0; ViolationKind::ALL.len()],
        acquired: 0,
        fenced_off: 0,
        observed: [0; 3],
    };
    let part = |k: u64| {
        let mut report = empty.clone();
        let mut seed = seeds.start + k;
        while seed < seeds.end {
            report.add(&run(scenario, seed));
            seed += threads;
        }
        report
    };
    let parts: Vec<SweepReport> = if threads == 1 {
        vec![part(0)]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|k| scope.spawn(move || part(k))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    let mut report = empty;
    for p in &parts {
        report.merge(p);
    }
    if let Some(last) = seeds.end.checked_sub(1).filter(|&l| l >= seeds.start) {
        report.trace_hash = run(scenario, last).trace_hash;
    }
    report
}

/// Which seeds to run, from the environment: `REDLOCK_SIM_SEED=S` runs seed
/// `S` alone, `REDLOCK_SIM_SEEDS=N` sweeps seeds `0..N`; otherwise the
/// caller's default count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedPlan {
    /// Run one seed (a replay).
    One(u64),
    /// Sweep seeds `0..count`.
    Sweep(u64),
}

impl SeedPlan {
    /// Reads the plan from `REDLOCK_SIM_SEED` / `REDLOCK_SIM_SEEDS`.
    ///
    /// # Errors
    ///
    /// A message naming a variable that is set but not a number.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::SeedPlan;
    /// // With neither variable set:
    /// # if std::env::var_os("REDLOCK_SIM_SEED").is_none() && std::env::var_os("REDLOCK_SIM_SEEDS").is_none() {
    /// assert_eq!(SeedPlan::from_env(100)?, SeedPlan::Sweep(100));
    /// # }
    /// # Ok::<(), String>(())
    /// ```
    pub fn from_env(default_count: u64) -> Result<SeedPlan, String> {
        let read = |name: &str| -> Result<Option<u64>, String> {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("{name}={v:?} is not a number")),
                Err(_) => Ok(None),
            }
        };
        if let Some(seed) = read("REDLOCK_SIM_SEED")? {
            return Ok(SeedPlan::One(seed));
        }
        Ok(SeedPlan::Sweep(
            read("REDLOCK_SIM_SEEDS")?.unwrap_or(default_count),
        ))
    }

    /// The seeds of the plan.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::SeedPlan;
    /// assert_eq!(SeedPlan::One(7).seeds(), 7..8);
    /// assert_eq!(SeedPlan::Sweep(3).seeds(), 0..3);
    /// ```
    #[must_use]
    pub fn seeds(self) -> Range<u64> {
        match self {
            SeedPlan::One(seed) => seed..seed.saturating_add(1),
            SeedPlan::Sweep(count) => 0..count,
        }
    }
}
