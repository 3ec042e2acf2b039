//! The peers from crates.io, each with its default settings: `rslock`
//! (async, one multiplexed connection per node, on a tokio multi-thread
//! runtime) and `redlock` (sync, a new connection per command).
//!
//! Both retry 3 times with a random pause of 0–200 ms before giving up. In
//! the hot-key mode a client calls `lock` again until it gets the lock (what
//! `rslock::LockManager::acquire` does), and the cycle's latency runs from
//! the first call to the confirmed release.

use std::sync::Arc;
use std::time::Instant;

use crate::cell::{Cell, Outcome, TTL};
use crate::measure::{OverlapDetector, Recorder};
use crate::runner;

/// `rslock`: `lock` (3 tries), then `unlock`, which awaits every node.
pub(crate) fn rslock(cell: &Cell<'_>) -> anyhow::Result<Outcome> {
    let manager = rslock::LockManager::new(cell.urls.clone());
    let hot = cell.mode.is_hot();
    let detector = hot.then(|| Arc::new(OverlapDetector::default()));
    let (record, usage) = runner::tasks(&cell.setup, cell.clients(), |client, window| {
        let manager = manager.clone();
        let key = cell.key(client);
        let detector = detector.clone();
        async move {
            let mut rec = Recorder::new();
            while window.open() {
                let started = Instant::now();
                let lock = loop {
                    match manager.lock(key.as_str(), TTL).await {
                        Ok(lock) => break Some(lock),
                        Err(rslock::LockError::Unavailable) if hot && window.open() => {}
                        Err(e) => {
                            rec.error(&window, started, format!("lock: {e}"));
                            break None;
                        }
                    }
                };
                if let Some(lock) = lock {
                    if let Some(detector) = &detector {
                        detector.enter();
                        tokio::task::yield_now().await;
                        detector.leave();
                    }
                    manager.unlock(&lock).await;
                    rec.ok(&window, started);
                }
            }
            rec
        }
    })?;
    Ok(Outcome {
        record,
        usage,
        overlaps: detector.map(|d| d.overlaps()),
        fair: None,
        procs: None,
        shared: None,
        node_timeouts: None,
    })
}

/// `redlock`: `lock` (3 tries; `Ok(None)` when not acquired), then
/// `unlock`, which visits every node in turn.
pub(crate) fn redlock(cell: &Cell<'_>) -> anyhow::Result<Outcome> {
    let manager = redlock::RedLock::new(cell.urls.clone());
    let ttl_ms = usize::try_from(TTL.as_millis())?;
    let hot = cell.mode.is_hot();
    let detector = hot.then(OverlapDetector::default);
    let (record, usage) = runner::threads(&cell.setup, cell.clients(), |client, window, rec| {
        let key = cell.key(client);
        while window.open() {
            let started = Instant::now();
            let lock = loop {
                match manager.lock(key.as_bytes(), ttl_ms) {
                    Ok(Some(lock)) => break Some(lock),
                    Ok(None) if hot && window.open() => {}
                    Ok(None) => {
                        rec.error(window, started, "lock: not acquired in 3 tries");
                        break None;
                    }
                    Err(e) => {
                        rec.error(window, started, format!("lock: {e}"));
                        break None;
                    }
                }
            };
            if let Some(lock) = lock {
                if let Some(detector) = &detector {
                    detector.enter();
                    std::thread::yield_now();
                    detector.leave();
                }
                manager.unlock(&lock);
                rec.ok(window, started);
            }
        }
    })?;
    Ok(Outcome {
        record,
        usage,
        overlaps: detector.map(|d| d.overlaps()),
        fair: None,
        procs: None,
        shared: None,
        node_timeouts: None,
    })
}
