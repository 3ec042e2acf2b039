//! Deterministic simulation of the semaphore and the read-write lock: the
//! simulated clients run the core's own acquisitions of them
//! (`redlock_core::engine::Slots`, `Acquire::read`), and the checker checks
//! their promises (at most k permit holders; no writer with anyone) under
//! the in-model faults; a wrong design of each is caught.
//!
//! `REDLOCK_SIM_SEEDS=N` changes the sweep size of the zero-violation
//! scenarios, as in `sim.rs`.

use redlock_mock::sim::{run, Primitive, Scenario, Stats, ViolationKind};

use super::sim::{expect_broken, expect_safe, scenario};

/// What `seeds` runs of `scenario` did, summed (the most holders: the
/// largest), and how many runs had at least `crowd` holders at once.
fn totals(scenario: &Scenario, seeds: std::ops::Range<u64>, crowd: u64) -> (Stats, u64) {
    assert_ne!(scenario.primitive, Primitive::Mutex, "{}", scenario.name);
    let mut crowded = 0;
    let totals = crate::sim::totals_with(scenario, seeds, |s| {
        crowded += u64::from(s.most_holders >= crowd);
    });
    (totals, crowded)
}

#[test]
fn semaphore_never_has_more_holders_than_permits_under_in_model_faults() {
    let report = expect_safe("semaphore", 10_000);
    assert_eq!(report.runs_with(ViolationKind::TooManyHolders), 0);
    // The scenario exercises the semaphore: all three permits held at
    // once, often (a semaphore that behaved as a mutex would show 1), under
    // the faults.
    let semaphore = scenario("semaphore");
    assert_eq!(semaphore.keys, 3);
    let (totals, full) = totals(&semaphore, 0..300, 3);
    println!("{totals:?}; runs with three holders at once: {full}");
    assert_eq!(totals.most_holders, 3);
    assert!(
        full > 100,
        "three permits held together in only {full} of 300 runs"
    );
    assert!(totals.acquired > 3_000 && totals.extended > 100 && totals.gave_up > 0);
    assert!(totals.node_crashes > 50 && totals.client_crashes > 50 && totals.pauses > 100);
    assert!(totals.lost_messages > 1_000);
}

#[test]
fn rwlock_never_shares_a_writer_under_in_model_faults() {
    let report = expect_safe("rwlock", 10_000);
    assert_eq!(report.runs_with(ViolationKind::WriterShared), 0);
    assert_eq!(report.runs_with(ViolationKind::TooManyHolders), 0);
    // Both sides are exercised: several readers at once, and writers.
    let rwlock = scenario("rwlock");
    let (totals, crowded) = totals(&rwlock, 0..300, 3);
    println!("{totals:?}; runs with three readers at once: {crowded}");
    assert!(
        totals.most_holders >= 4,
        "at most {} readers at once",
        totals.most_holders
    );
    assert!(
        crowded > 30,
        "three readers together in only {crowded} of 300 runs"
    );
    assert!(totals.writers > 300, "{} writes acquired", totals.writers);
    assert!(totals.acquired > totals.writers + 1_000, "reads acquired");
    assert!(totals.node_crashes > 50 && totals.client_crashes > 50 && totals.pauses > 100);
}

#[test]
fn semaphore_kept_as_holder_sets_on_each_node_admits_one_holder_too_many() {
    let report = expect_broken(
        &scenario("semaphore-holder-sets"),
        &[ViolationKind::TooManyHolders],
    );
    // The same clients on nodes that keep permit keys are safe (see above):
    // the node-side design is what breaks.
    assert!(report.runs_with(ViolationKind::TooManyHolders) > 0);
}

#[test]
fn rwlock_on_nodes_whose_reads_ignore_the_writer_shares_a_writer_with_a_reader() {
    let report = expect_broken(
        &scenario("rwlock-blind-readers"),
        &[ViolationKind::WriterShared],
    );
    assert!(report.runs_with(ViolationKind::WriterShared) > 0);
    // Nodes that refuse a read under a writer are all it takes.
    let seeing = scenario("rwlock-blind-readers").with(|s| {
        s.primitive = Primitive::RwLock {
            write: 0.3,
            blind_readers: false,
        }
    });
    let fixed = redlock_mock::sim::sweep(&seeing, 0..300, super::sim::THREADS);
    assert_eq!(fixed.violations, 0, "{fixed:?}");
}

/// A semaphore needs one caller per process; a read-write lock may have
/// several (its readers wait for their process's earlier writers,
/// `rwlock-local`), but neither may exit.
#[test]
fn semaphores_need_one_caller_per_process() {
    let lined = Scenario::semaphore().with(|s| s.callers_per_process = 2);
    assert!(lined.validate().is_err());
    let outcome = run(&lined, 0);
    assert_eq!(outcome.violations[0].kind, ViolationKind::InvalidScenario);
    let lined = Scenario::rwlock().with(|s| s.callers_per_process = 2);
    assert!(lined.validate().is_ok());
    let exiting = lined.with(|s| s.exit = true);
    assert!(exiting.validate().is_err());
}
