//! Testing your own code that takes locks: write it against `DynRedlock`
//! (one type whatever the nodes are), hand it Redis masters in production
//! and in-memory mock nodes in tests, and inject faults through the
//! `MockCluster`: a node down, a node frozen (its requests hang, as a
//! server stopped with SIGSTOP or cut off by a firewall).
//!
//! In your crate each `check_*` function below would be a `#[test]`; here
//! `main` runs them and fails if one does.
//!
//! Run with `cargo run --example dyn_testing` (no server needed).
#![allow(clippy::print_stdout)]

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::ensure;
use redlock_core::{DynError, DynRedlock, LockError, Redlock};
use redlock_mock::MockCluster;

// ---------------------------------------------------------------------------
// The application code: knows nothing of the mock.
// ---------------------------------------------------------------------------

/// Invoices already charged (in real life, a database table).
type Ledger = Mutex<HashSet<u64>>;

/// How long `charge_invoice` waits for the lock.
const WAIT: Duration = Duration::from_secs(1);

/// What `charge_invoice` did.
#[derive(Debug, PartialEq, Eq)]
enum Charge {
    /// Charged now.
    Charged,
    /// Someone had charged it already: nothing done.
    AlreadyCharged,
    /// Another worker is charging it right now: try later.
    Busy,
    /// Too few lock nodes answered: try later, and page someone.
    Unavailable {
        /// The nodes that failed, as the lock error names them.
        failed: Vec<String>,
    },
}

/// Charges `invoice` at most once, whichever worker of the fleet calls.
///
/// Production builds `locks` over Redis, e.g.
/// `redlock_core::connect_dyn::<redlock_redis::RedisBackend, _>(urls, timeout)`.
fn charge_invoice(
    locks: &DynRedlock,
    ledger: &Ledger,
    invoice: u64,
) -> Result<Charge, LockError<DynError>> {
    let key = format!("invoice:{invoice}");
    // Wait a little for the lock, not forever: a request handler has a budget.
    let lock = match locks.lock_timeout(key, Duration::from_secs(10), WAIT) {
        Ok(lock) => lock,
        // A timeout carries the last round's error: whether the nodes refused
        // (held by someone else) or failed (an outage), and which ones.
        Err(err) => {
            let last = match &err {
                LockError::Timeout { last, .. } => last.as_ref(),
                other => other,
            };
            return match last {
                LockError::Contended(_) => Ok(Charge::Busy),
                LockError::NoQuorum(report) => {
                    let mut failed: Vec<String> =
                        report.failed_nodes().map(|n| n.to_string()).collect();
                    failed.sort();
                    Ok(Charge::Unavailable { failed })
                }
                _ => Err(err),
            };
        }
    };
    let mut charged = ledger
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if charged.contains(&invoice) {
        return Ok(Charge::AlreadyCharged);
    }
    lock.ensure_held()?; // right before the side effect
    charged.insert(invoice); // ... call the payment provider, then record it ...
    drop(charged);
    lock.release()?;
    Ok(Charge::Charged)
}

// ---------------------------------------------------------------------------
// The tests: mock nodes, faults injected through the cluster.
// ---------------------------------------------------------------------------

/// Five in-memory nodes and a manager over them, as a test fixture. The
/// cluster keeps its own handles to the nodes, for fault injection.
fn fixture() -> anyhow::Result<(MockCluster, DynRedlock)> {
    let cluster = MockCluster::new(5);
    let locks = Redlock::builder(cluster.dyn_backends())
        // A frozen node costs at most this per round (in-memory nodes
        // answer in microseconds; the margin is for a loaded machine).
        .node_timeout(Duration::from_millis(200))
        .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
        .build()?;
    Ok((cluster, locks))
}

fn check_charges_once() -> anyhow::Result<()> {
    let (_cluster, locks) = fixture()?;
    let ledger = Ledger::default();
    ensure!(charge_invoice(&locks, &ledger, 1)? == Charge::Charged);
    ensure!(charge_invoice(&locks, &ledger, 1)? == Charge::AlreadyCharged);
    Ok(())
}

fn check_busy_while_another_worker_holds_it() -> anyhow::Result<()> {
    let (cluster, locks) = fixture()?;
    // Another process's manager over the same nodes holds the invoice.
    let other: DynRedlock = Redlock::builder(cluster.dyn_backends())
        .node_timeout(Duration::from_millis(200))
        .build()?;
    let held = other.try_lock("invoice:2", Duration::from_secs(30))?;
    let ledger = Ledger::default();
    ensure!(charge_invoice(&locks, &ledger, 2)? == Charge::Busy);
    ensure!(
        ledger.lock().is_ok_and(|l| l.is_empty()),
        "charged while busy"
    );
    held.release()?;
    ensure!(charge_invoice(&locks, &ledger, 2)? == Charge::Charged);
    Ok(())
}

fn check_one_frozen_node_changes_nothing() -> anyhow::Result<()> {
    let (cluster, locks) = fixture()?;
    cluster.node(3).freeze(); // its requests hang until thawed
    let ledger = Ledger::default();
    let started = Instant::now();
    ensure!(charge_invoice(&locks, &ledger, 3)? == Charge::Charged);
    // A round needs only a quorum's answers: the frozen node costs at most
    // one node timeout. The bound is loose on purpose (a loaded CI box).
    ensure!(started.elapsed() < Duration::from_secs(5), "too slow");
    cluster.node(3).thaw();
    Ok(())
}

fn check_a_frozen_majority_is_reported_not_hung() -> anyhow::Result<()> {
    let (cluster, locks) = fixture()?;
    for i in 0..3 {
        cluster.node(i).freeze();
    }
    let ledger = Ledger::default();
    let started = Instant::now();
    let outcome = charge_invoice(&locks, &ledger, 4)?;
    let took = started.elapsed();
    println!(
        "    3 of 5 frozen: {outcome:?} after {} ms",
        took.as_millis()
    );
    ensure!(
        outcome
            == Charge::Unavailable {
                failed: vec!["mock-0".into(), "mock-1".into(), "mock-2".into()]
            },
        "expected mock-0..2 reported, got {outcome:?}"
    );
    // Bounded by the call's 1 s budget plus a round's node timeout; loose.
    ensure!(took < Duration::from_secs(10), "hung for {took:?}");
    ensure!(
        ledger.lock().is_ok_and(|l| l.is_empty()),
        "charged without a lock"
    );

    // The nodes come back: the same call succeeds.
    for i in 0..3 {
        cluster.node(i).thaw();
    }
    ensure!(charge_invoice(&locks, &ledger, 4)? == Charge::Charged);
    Ok(())
}

type Check = fn() -> anyhow::Result<()>;

fn main() -> anyhow::Result<()> {
    let checks: [(&str, Check); 4] = [
        ("charges_once", check_charges_once),
        (
            "busy_while_another_worker_holds_it",
            check_busy_while_another_worker_holds_it,
        ),
        (
            "one_frozen_node_changes_nothing",
            check_one_frozen_node_changes_nothing,
        ),
        (
            "a_frozen_majority_is_reported_not_hung",
            check_a_frozen_majority_is_reported_not_hung,
        ),
    ];
    for (name, check) in checks {
        println!("test {name} ...");
        check().map_err(|e| e.context(format!("test {name} failed")))?;
        println!("test {name} ... ok");
    }
    println!("all {} tests passed", checks.len());
    Ok(())
}
