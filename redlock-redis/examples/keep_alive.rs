//! A long job kept alive on Redis, and the lost-lock signal.
//!
//! 1. A job that runs three times its TTL: the manager's keeper thread
//!    extends the lock while it runs, and the job checks the lock right
//!    before committing.
//! 2. The lock is lost mid-job (here its keys are deleted from every master,
//!    as masters restarted without persistence would lose them): the
//!    keeper's next extension fails, the `on_lost` callback fires, the job
//!    sees it and skips its commit, and the call returns `LockError::Lost`.
//!
//! The masters come from `REDLOCK_SERVERS`, comma-separated:
//!
//! ```text
//! REDLOCK_SERVERS=redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 \
//!   cargo run -p redlock-redis --example keep_alive
//! ```
//!
//! Without it, the example says how to start throwaway servers and exits
//! with 64 (`EX_USAGE`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use redlock_redis::{KeepAlive, LockError, LostReason, Redlock};

mod common;
use common::{servers, EX_USAGE};

const RESOURCE: &str = "redlock-example:nightly-export";
const TTL: Duration = Duration::from_secs(2);

fn main() -> anyhow::Result<ExitCode> {
    let urls = match servers("keep_alive") {
        Ok(urls) => urls,
        Err(message) => {
            eprintln!("{message}");
            return Ok(ExitCode::from(EX_USAGE));
        }
    };
    let locks = Redlock::builder([])
        // Generous for a loaded machine; on a LAN tens of milliseconds do.
        .node_timeout(Duration::from_millis(500))
        .acquire_timeout(Duration::from_secs(30))
        .connect(&urls)
        .context("connect to the masters")?;
    println!(
        "connected to {} masters, quorum {}",
        urls.len(),
        locks.quorum()
    );

    // 1. A job three times as long as the TTL, kept alive throughout.
    let (lost_tx, lost_rx) = mpsc::channel();
    let policy = KeepAlive::new()
        // A bound, so that a job that hangs cannot hold the lock forever.
        .max_hold(Duration::from_secs(60))
        .on_lost(move |reason| {
            let _ = lost_tx.send(reason);
        });
    let started = Instant::now();
    let rows = locks
        .with_lock_kept(RESOURCE, TTL, policy, |lock| {
            std::thread::sleep(TTL * 3); // the work
            lock.ensure_held()?; // right before the commit
            Ok::<_, LockError>(1_204) // ... commit: write the export ...
        })
        .context("the kept-alive job")??;
    println!(
        "job 1: ran {} ms with a {} ms TTL, kept alive ({} extensions), committed {rows} rows",
        started.elapsed().as_millis(),
        TTL.as_millis(),
        locks.stats().manager.extended
    );
    ensure!(
        lost_rx.try_recv().is_err(),
        "job 1's lock was reported lost"
    );
    ensure!(
        locks.stats().manager.extended >= 1,
        "the keeper never extended the lock"
    );

    // 2. The lock is lost mid-job: the signal, and a job that stops.
    let (lost_tx, lost_rx) = mpsc::channel();
    let policy = KeepAlive::new().on_lost(move |reason| {
        let _ = lost_tx.send(reason); // e.g. stop the job's workers, alert
    });
    let outcome = locks.with_lock_kept(RESOURCE, TTL, policy, |lock| -> anyhow::Result<()> {
        delete_everywhere(&urls, RESOURCE)?;
        println!("job 2: its key was deleted from every master mid-job");
        // The job works in steps and checks the lock between them.
        let give_up = Instant::now() + Duration::from_secs(30);
        while lock.ensure_held().is_ok() {
            ensure!(Instant::now() < give_up, "the lock was never seen lost");
            std::thread::sleep(Duration::from_millis(20)); // a step of work
        }
        println!("job 2: ensure_held() failed: it stops before committing");
        Ok(())
    });
    match outcome {
        Err(LockError::Lost { reason, .. }) => {
            println!("job 2: with_lock_kept returned Lost ({reason})");
            // The extension found the token gone (`Expired` when the
            // validity ran out before the keeper's turn, on a slow machine).
            ensure!(
                matches!(reason, LostReason::ExtendFailed | LostReason::Expired),
                "lost for another reason: {reason}"
            );
        }
        Ok(Err(err)) => return Err(err),
        other => bail!("expected the lock lost, got {other:?}"),
    }
    let reason = lost_rx
        .recv_timeout(Duration::from_secs(10))
        .context("the on_lost callback did not run")?;
    println!("job 2: the on_lost callback said: {reason}");
    ensure!(locks.stats().manager.lost >= 1, "the loss was not counted");
    println!("done");
    Ok(ExitCode::SUCCESS)
}

/// Deletes `key` on every master: what a master restarted without
/// persistence (or an operator's `FLUSHALL`) does to a lock.
fn delete_everywhere(urls: &[String], key: &str) -> anyhow::Result<()> {
    for url in urls {
        let mut connection = redis::Client::open(url.as_str())?
            .get_connection_with_timeout(Duration::from_secs(5))
            .with_context(|| format!("connect to {url}"))?;
        redis::cmd("DEL").arg(key).exec(&mut connection)?;
    }
    Ok(())
}
