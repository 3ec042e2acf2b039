//! A counting semaphore: at most K jobs at once, fleet-wide. Three managers
//! (standing in for three processes) run jobs from several threads each
//! against a partner API that allows K concurrent calls; the number of jobs
//! inside is counted and never exceeds K.
//!
//! Run with `cargo run --example semaphore` (no server needed).
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use redlock_core::{LockError, Redlock};
use redlock_mock::{MockCluster, MockNode};

/// How many jobs may call the partner API at once.
const K: u32 = 3;
const MANAGERS: usize = 3;
const THREADS_PER_MANAGER: usize = 3;
const JOBS_PER_THREAD: usize = 4;
/// A permit is a lock: it expires after its TTL unless released or kept alive.
const TTL: Duration = Duration::from_secs(10);

fn main() -> anyhow::Result<()> {
    let cluster = MockCluster::new(5);
    // One manager per process is the intended shape; several here stand in
    // for several processes sharing the same nodes.
    let managers = (0..MANAGERS)
        .map(|_| {
            Redlock::builder(cluster.backends())
                // In-memory nodes answer in microseconds; the margin is for
                // a loaded machine, where a thread may wait to be scheduled.
                .node_timeout(Duration::from_millis(500))
                .retry_delay(Duration::from_millis(1), Duration::from_millis(10))
                // Generous: waiting callers poll, and a loaded CI box is slow.
                .acquire_timeout(Duration::from_secs(60))
                .build()
        })
        .collect::<Result<Vec<Redlock<MockNode>>, _>>()?;

    // Every process must use the same number of permits for one name: the
    // nodes do not store it.
    let semaphores = managers
        .iter()
        .map(|locks| locks.semaphore("partner-api", K))
        .collect::<Result<Vec<_>, _>>()?;
    println!(
        "semaphore {:?} with {K} permits over {} in-memory nodes, used by {MANAGERS} managers",
        semaphores[0].name(),
        cluster.len()
    );

    // 1. A non-blocking `try_acquire` takes a free permit, or says all are taken.
    let held: Vec<_> = (0..K)
        .map(|_| semaphores[0].try_acquire(TTL))
        .collect::<Result<_, _>>()?;
    let slots: Vec<u32> = held.iter().map(|permit| permit.slot()).collect();
    println!("took all {K} permits with try_acquire: slots {slots:?}");
    match semaphores[1].try_acquire(TTL) {
        Err(LockError::Contended(_)) => {
            println!("a fourth try_acquire, from another manager: refused, all permits are held")
        }
        other => bail!("expected the fourth permit to be refused, got {other:?}"),
    }
    for permit in held {
        permit.release()?;
    }

    // 2. Many jobs, each waiting for a permit with `acquire`; count how many
    //    are inside at once.
    let inside = AtomicUsize::new(0);
    let most_inside = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let mut workers = Vec::new();
        for semaphore in &semaphores {
            for _ in 0..THREADS_PER_MANAGER {
                let (inside, most_inside, done) = (&inside, &most_inside, &done);
                workers.push(scope.spawn(move || -> anyhow::Result<()> {
                    for _ in 0..JOBS_PER_THREAD {
                        let permit = semaphore.acquire(TTL).context("acquire a permit")?;
                        let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most_inside.fetch_max(now_inside, Ordering::SeqCst);
                        permit.ensure_held()?; // right before the protected call
                        std::thread::sleep(Duration::from_millis(15)); // the partner API call
                        inside.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                        permit.release().context("release the permit")?;
                    }
                    Ok(())
                }));
            }
        }
        for worker in workers {
            worker
                .join()
                .map_err(|_| anyhow::anyhow!("a worker panicked"))??;
        }
        Ok(())
    })?;

    let jobs = done.load(Ordering::SeqCst);
    let most = most_inside.load(Ordering::SeqCst);
    println!(
        "{jobs} jobs from {} threads in {} ms; at most {most} inside at once (limit {K})",
        MANAGERS * THREADS_PER_MANAGER,
        started.elapsed().as_millis()
    );
    ensure!(
        jobs == MANAGERS * THREADS_PER_MANAGER * JOBS_PER_THREAD,
        "some jobs did not run"
    );
    ensure!(
        most <= K as usize,
        "{most} jobs were inside at once, more than {K}"
    );
    ensure!(most >= 1, "no job ran");

    // 3. `with_permit` holds a permit (kept alive) while a closure runs.
    let slot = semaphores[2].with_permit(TTL, |permit| {
        permit.ensure_held()?;
        Ok::<_, LockError<_>>(permit.slot())
    })??;
    println!("with_permit ran a job on slot {slot}");
    ensure!(slot < K, "slot {slot} out of range");
    Ok(())
}
