//! Leader election: three instances (each with a manager of its own, as
//! separate processes would have) campaign to run a scheduler; one leads
//! at a time, each leader's term is larger than the last, and a watcher
//! sees who leads.
//!
//! Run with `cargo run --example election` (no server needed).
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, ensure};
use redlock_core::election::Observed;
use redlock_core::{Identity, Redlock};
use redlock_mock::{MockCluster, MockNode};

const TTL: Duration = Duration::from_secs(2);

fn instance(cluster: &MockCluster, name: &str) -> anyhow::Result<Redlock<MockNode>> {
    Ok(Redlock::builder(cluster.backends())
        .fencing(true)
        .identity(Identity::new(name)?)
        .build()?)
}

fn main() -> anyhow::Result<()> {
    let cluster = MockCluster::new(5);
    let leading = AtomicUsize::new(0);
    let terms = Mutex::new(Vec::new());

    // A watcher on a manager of its own: who leads, as the nodes see it.
    let watcher = Redlock::builder(cluster.backends()).fencing(true).build()?;
    let watched = watcher
        .election("scheduler", TTL)?
        .poll_interval(Duration::from_millis(5));
    let mut observer = watched.observe();
    ensure!(observer.next_timeout(Duration::from_secs(1))? == Some(Observed::Vacant));

    std::thread::scope(|s| -> anyhow::Result<()> {
        let mut handles = Vec::new();
        for i in 0..3 {
            let (cluster, leading, terms) = (&cluster, &leading, &terms);
            handles.push(s.spawn(move || -> anyhow::Result<()> {
                let locks = instance(cluster, &format!("scheduler-{i}"))?;
                let election = locks.election("scheduler", TTL)?;
                let leadership = election.campaign()?;
                if leading.fetch_add(1, Ordering::SeqCst) != 0 {
                    bail!("two leaders at once");
                }
                println!("scheduler-{i} leads, term {}", leadership.term());
                for _job in 0..3 {
                    // Before each side effect: still the leader?
                    leadership.ensure_held()?;
                    std::thread::sleep(Duration::from_millis(100));
                }
                terms
                    .lock()
                    .map_err(|_| anyhow::anyhow!("poisoned"))?
                    .push(leadership.term());
                leading.fetch_sub(1, Ordering::SeqCst);
                leadership.resign()?;
                Ok(())
            }));
        }
        // Meanwhile: each change of leader, in order.
        let mut seen = 0;
        while seen < 3 {
            match observer.next_timeout(Duration::from_secs(10))? {
                Some(Observed::Leader(leader)) => {
                    seen += 1;
                    println!(
                        "  the watcher sees {} leading, term {}",
                        leader.identity().map_or("?", Identity::as_str),
                        leader.term()
                    );
                }
                Some(Observed::Vacant) => println!("  the watcher sees nobody leading"),
                None => bail!("no change of leader within 10 s"),
            }
        }
        for handle in handles {
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("a candidate panicked"))??;
        }
        Ok(())
    })?;

    let terms = terms
        .into_inner()
        .map_err(|_| anyhow::anyhow!("poisoned"))?;
    ensure!(
        terms.windows(2).all(|w| w[0] < w[1]),
        "terms went back: {terms:?}"
    );
    println!("three leaders one after another, terms {terms:?}");
    Ok(())
}
