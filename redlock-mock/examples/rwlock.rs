//! A read-write lock: services read a shared configuration together, and an
//! operator's writer replaces it alone. Readers share the lock; the writer
//! excludes them (and other writers).
//!
//! Run with `cargo run --example rwlock` (no server needed).
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use redlock_core::{LockError, Redlock};
use redlock_mock::{MockCluster, MockNode};

const TTL: Duration = Duration::from_secs(10);
const READERS: usize = 4;
const READS_EACH: usize = 10;
const VERSIONS: u64 = 5;

/// The configuration the lock protects (in real life a file, a row, an
/// object in a bucket): its version and what readers and the writer see.
#[derive(Default)]
struct Config {
    version: u64,
}

/// Who is inside right now; flags any reader inside with a writer.
#[derive(Default)]
struct Inside {
    readers: AtomicUsize,
    writers: AtomicUsize,
    most_readers: AtomicUsize,
    broken: AtomicBool,
}

impl Inside {
    fn enter_read(&self) {
        let readers = self.readers.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_readers.fetch_max(readers, Ordering::SeqCst);
        if self.writers.load(Ordering::SeqCst) != 0 {
            self.broken.store(true, Ordering::SeqCst);
        }
    }
    fn leave_read(&self) {
        self.readers.fetch_sub(1, Ordering::SeqCst);
    }
    fn enter_write(&self) {
        if self.writers.fetch_add(1, Ordering::SeqCst) != 0
            || self.readers.load(Ordering::SeqCst) != 0
        {
            self.broken.store(true, Ordering::SeqCst);
        }
    }
    fn leave_write(&self) {
        self.writers.fetch_sub(1, Ordering::SeqCst);
    }
}

fn manager(cluster: &MockCluster) -> anyhow::Result<Redlock<MockNode>> {
    Ok(Redlock::builder(cluster.backends())
        .node_timeout(Duration::from_millis(500)) // margin for a loaded machine
        .retry_delay(Duration::from_millis(1), Duration::from_millis(10))
        .acquire_timeout(Duration::from_secs(60)) // generous for a loaded machine
        .build()?)
}

fn main() -> anyhow::Result<()> {
    let cluster = MockCluster::new(5);
    // Two managers stand in for two processes (a service and an operator's tool).
    let (service, operator) = (manager(&cluster)?, manager(&cluster)?);
    let config_for_service = service.rwlock("config")?;
    let config_for_operator = operator.rwlock("config")?;

    // 1. Readers share: two reads at once, from two managers.
    let a = config_for_service.try_read(TTL)?;
    let b = config_for_operator.try_read(TTL)?;
    println!("two readers hold \"config\" at once (one per manager)");
    match config_for_operator.try_write(TTL) {
        Err(LockError::Contended(_)) => println!("a writer is refused while they read"),
        other => bail!("expected the writer to be refused during the reads, got {other:?}"),
    }
    a.release()?;
    b.release()?;

    // 2. The writer excludes readers.
    let write = config_for_operator.try_write(TTL)?;
    println!("the writer holds \"config\"");
    match config_for_service.try_read(TTL) {
        Err(LockError::Contended(_)) => println!("a reader is refused while it writes"),
        other => bail!("expected the reader to be refused during the write, got {other:?}"),
    }
    write.release()?;

    // 3. Both at work: reader threads keep reading while the writer
    //    publishes new versions. A waiting writer is served in arrival
    //    order, so a stream of readers cannot starve it.
    let config = Mutex::new(Config::default());
    let inside = Inside::default();
    let reads = AtomicUsize::new(0);
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let mut threads = Vec::new();
        for i in 0..READERS {
            let lock = if i % 2 == 0 {
                &config_for_service
            } else {
                &config_for_operator
            };
            let (config, inside, reads) = (&config, &inside, &reads);
            threads.push(scope.spawn(move || -> anyhow::Result<()> {
                let mut last_seen = 0;
                for _ in 0..READS_EACH {
                    let read = lock.read(TTL).context("read")?;
                    inside.enter_read();
                    let version = config
                        .lock()
                        .map_err(|_| anyhow::anyhow!("poisoned"))?
                        .version;
                    ensure!(version >= last_seen, "a reader saw the version go back");
                    last_seen = version;
                    std::thread::sleep(Duration::from_millis(3)); // use the config
                    inside.leave_read();
                    reads.fetch_add(1, Ordering::SeqCst);
                    read.release().context("release the read")?;
                }
                Ok(())
            }));
        }
        let (config, inside) = (&config, &inside);
        let writer = &config_for_operator;
        threads.push(scope.spawn(move || -> anyhow::Result<()> {
            for _ in 0..VERSIONS {
                // `with_write` keeps the write alive while the closure runs
                // and releases it after.
                writer.with_write(TTL, |write| -> anyhow::Result<()> {
                    inside.enter_write();
                    write.ensure_held()?; // right before publishing
                    config
                        .lock()
                        .map_err(|_| anyhow::anyhow!("poisoned"))?
                        .version += 1;
                    std::thread::sleep(Duration::from_millis(5));
                    inside.leave_write();
                    Ok(())
                })??;
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(())
        }));
        for thread in threads {
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("a thread panicked"))??;
        }
        Ok(())
    })?;

    let version = config
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .version;
    println!(
        "{} reads by {READERS} readers (at most {} at once) and {version} writes; \
         no reader ever inside with the writer",
        reads.load(Ordering::SeqCst),
        inside.most_readers.load(Ordering::SeqCst),
    );
    ensure!(
        !inside.broken.load(Ordering::SeqCst),
        "a reader and the writer (or two writers) were inside at once"
    );
    ensure!(
        version == VERSIONS,
        "the writer published {version} versions"
    );
    ensure!(
        reads.load(Ordering::SeqCst) == READERS * READS_EACH,
        "reads missing"
    );
    Ok(())
}
