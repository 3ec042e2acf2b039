//! The public entry points: run one seed, traced or observed.

use std::time::Duration;

use super::checker::GrantObserver;
use super::outcome::{Outcome, Stats, Violation, ViolationKind};
use super::scenario::Scenario;
use super::world::World;

fn simulate(
    scenario: &Scenario,
    seed: u64,
    observer: Option<&mut dyn GrantObserver>,
    text: bool,
) -> (Outcome, Vec<String>) {
    let (mut outcome, lines) = match World::new(scenario, seed, observer, text) {
        Ok(mut world) => {
            world.schedule(seed);
            world.start_watchers();
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
