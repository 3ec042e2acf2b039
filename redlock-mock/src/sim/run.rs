//! The public entry points: run one seed, traced or observed.

use std::time::Duration;

use super::checker::{GrantObserver, Violation, ViolationKind};
use super::scenario::Scenario;
use super::world::World;

/// Counters of what a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Events processed.
    pub events: u64,
    /// Rounds started (acquire, extend, release).
    pub rounds: u64,
    /// Acquires that ended `Held`.
    pub acquired: u64,
    /// Extends that ended `Held`.
    pub extended: u64,
    /// Acquire calls that timed out (gave up after retrying).
    pub gave_up: u64,
    /// Writes to the protected resource.
    pub writes: u64,
    /// Writes skipped because the validity had run out.
    pub skipped_writes: u64,
    /// Fence-raising rounds started (fenced acquires on several nodes).
    pub raises: u64,
    /// Fence-raising rounds that failed (the acquire was then abandoned).
    pub raise_failed: u64,
    /// Accesses (reads or writes) the fenced resource rejected for carrying
    /// a lower fencing token than one it had seen.
    pub fenced_off: u64,
    /// Node crashes.
    pub node_crashes: u64,
    /// Failovers to a replica.
    pub failovers: u64,
    /// Node clock steps.
    pub clock_jumps: u64,
    /// Lock-key evictions (FLUSH).
    pub flushes: u64,
    /// Client crashes.
    pub client_crashes: u64,
    /// Client pauses.
    pub pauses: u64,
    /// Messages lost (loss, partition, refused).
    pub lost_messages: u64,
    /// Simulated time at the end of the run.
    pub end: Duration,
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Hash of every event processed: equal seeds give equal hashes.
    pub trace_hash: u64,
    /// Violations found (the first 16; see `violation_count`).
    pub violations: Vec<Violation>,
    /// Violations found in all.
    pub violation_count: u64,
    /// What the run did.
    pub stats: Stats,
}

impl Outcome {
    /// Whether the run found no violation.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.violation_count == 0
    }
}

fn simulate(
    scenario: &Scenario,
    seed: u64,
    observer: Option<&mut dyn GrantObserver>,
    text: bool,
) -> (Outcome, Vec<String>) {
    let (mut outcome, lines) = match World::new(scenario, seed, observer, text) {
        Ok(mut world) => {
            world.schedule(seed);
            world.run();
            world.finish()
        }
        Err(problem) => (
            Outcome {
                seed,
                trace_hash: 0,
                violations: vec![Violation {
                    kind: ViolationKind::InvalidScenario,
                    at: Duration::ZERO,
                    detail: problem,
                }],
                violation_count: 1,
                stats: Stats::default(),
            },
            Vec::new(),
        ),
    };
    outcome.seed = seed;
    (outcome, lines)
}

/// Runs `scenario` with `seed`. Deterministic: the same scenario and seed
/// give the same [`Outcome`], trace hash included. An invalid scenario gives
/// one [`ViolationKind::InvalidScenario`] violation.
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{run, Scenario};
/// let outcome = run(&Scenario::in_model(), 1);
/// assert!(outcome.is_clean(), "{:?}", outcome.violations);
/// assert!(outcome.stats.acquired > 0);
/// ```
#[must_use]
pub fn run(scenario: &Scenario, seed: u64) -> Outcome {
    simulate(scenario, seed, None, false).0
}

/// Runs `scenario` with `seed` and also returns the text of every event,
/// one line each (for printing a failing seed). Same hash as [`run`].
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{run, run_traced, Scenario};
/// let (outcome, lines) = run_traced(&Scenario::in_model(), 1);
/// assert_eq!(outcome.trace_hash, run(&Scenario::in_model(), 1).trace_hash);
/// assert!(!lines.is_empty());
/// ```
#[must_use]
pub fn run_traced(scenario: &Scenario, seed: u64) -> (Outcome, Vec<String>) {
    simulate(scenario, seed, None, true)
}

/// Runs `scenario` with `seed`, handing each successful acquire to
/// `observer` (a fencing check, say); its errors become violations.
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{run_observed, Grant, GrantObserver, Scenario};
/// struct Count(u32);
/// impl GrantObserver for Count {
///     fn on_grant(&mut self, _: &Grant<'_>) -> Result<(), String> {
///         self.0 += 1;
///         Ok(())
///     }
/// }
/// let mut count = Count(0);
/// let outcome = run_observed(&Scenario::in_model(), 5, &mut count);
/// assert_eq!(u64::from(count.0), outcome.stats.acquired);
/// ```
pub fn run_observed(scenario: &Scenario, seed: u64, observer: &mut dyn GrantObserver) -> Outcome {
    simulate(scenario, seed, Some(observer), false).0
}
