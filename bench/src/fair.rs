//! The fair mode: does one process's manager starve another's on a shared
//! key?
//!
//! Two managers are built separately, each with its own backends and node
//! workers, as two processes would build them; each drives
//! [`FAIR_THREADS`] threads that loop acquire + release on one shared
//! key. Besides the cycles, the mode records each side's share of the
//! acquisitions and the cross-side hand-off latency: from the moment one
//! side starts releasing to the moment the other side's next acquire
//! returns, both read on this process's monotonic clock (`Instant`).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::cell::{Cell, Outcome, FAIR_SIDES, FAIR_THREADS, TTL};
use crate::measure::{FairRecord, OverlapDetector, Window};
use crate::{ours, runner};

/// The lock's path between the sides, shared by all threads of both.
#[derive(Debug)]
struct Baton {
    /// The side that last started a release, and when.
    last_release: Option<(usize, Instant)>,
    record: FairRecord,
}

#[derive(Debug)]
struct Tracker(Mutex<Baton>);

impl Tracker {
    fn new() -> Self {
        Tracker(Mutex::new(Baton {
            last_release: None,
            record: FairRecord::new(FAIR_SIDES),
        }))
    }

    fn baton(&self) -> std::sync::MutexGuard<'_, Baton> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `side` holds the lock since `at`. While the lock excludes, the last
    /// release recorded is its previous holder's, recorded before that
    /// holder's release could free the key.
    fn acquired(&self, side: usize, at: Instant, window: &Window) {
        let mut baton = self.baton();
        if let Some((from, released)) = baton.last_release {
            if from != side && window.contains(released, at) {
                baton.record.handoff(at.saturating_duration_since(released));
            }
        }
    }

    /// `side` starts releasing now.
    fn releasing(&self, side: usize) {
        self.baton().last_release = Some((side, Instant::now()));
    }

    /// A cycle of `side` counted.
    fn counted(&self, side: usize) {
        self.baton().record.count(side);
    }

    fn into_record(self) -> FairRecord {
        self.0
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .record
    }
}

/// Cycles of `lock_deadline(key, TTL, window end)` + confirmed `release`,
/// client `i` on manager `i / FAIR_THREADS`, with `retry` pauses.
///
/// The deadline is the window's end rather than the acquire timeout of
/// `lock`: a side that is starved then stops with the window instead of
/// blocking past the grace period, which would fail the cell as stalled and
/// lose exactly the figures this mode is for.
pub(crate) fn run(cell: &Cell<'_>, retry: (Duration, Duration)) -> anyhow::Result<Outcome> {
    let managers = (0..FAIR_SIDES)
        .map(|_| ours::manager(&cell.urls, Some(retry)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let detector = OverlapDetector::default();
    let tracker = Tracker::new();
    let (record, usage) = runner::threads(&cell.setup, cell.clients(), |client, window, rec| {
        let side = client / FAIR_THREADS;
        let Some(locks) = managers.get(side) else {
            rec.fault(format!("client {client} has no manager"));
            return;
        };
        let key = cell.key(client);
        while window.open() {
            let started = Instant::now();
            match locks.lock_deadline(key.as_str(), TTL, window.end) {
                Ok(lock) => {
                    tracker.acquired(side, Instant::now(), window);
                    detector.enter();
                    std::thread::yield_now();
                    detector.leave();
                    tracker.releasing(side);
                    match lock.release() {
                        Ok(()) => {
                            let ended = Instant::now();
                            rec.ok_at(window, started, ended, 1);
                            if window.contains(started, ended) {
                                tracker.counted(side);
                            }
                        }
                        Err(e) => rec.error(window, started, format!("release: {e}")),
                    }
                }
                Err(e) => rec.error(window, started, format!("lock: {e}")),
            }
        }
    })?;
    Ok(Outcome {
        record,
        usage,
        overlaps: Some(detector.overlaps()),
        fair: Some(tracker.into_record()),
        procs: None,
        shared: None,
        node_timeouts: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cross_side_handoffs_inside_the_window_count() {
        let start = Instant::now();
        let window = Window {
            start,
            end: start + Duration::from_secs(10),
        };
        let tracker = Tracker::new();
        // The first acquisition has no previous release.
        tracker.acquired(0, start + Duration::from_millis(1), &window);
        tracker.releasing(0);
        // Same side: a local hand-off, not counted.
        tracker.acquired(0, Instant::now(), &window);
        tracker.releasing(0);
        // The other side: counted.
        tracker.acquired(1, Instant::now() + Duration::from_millis(2), &window);
        tracker.releasing(1);
        // After the window: not counted.
        tracker.acquired(0, start + Duration::from_secs(11), &window);
        let record = tracker.into_record();
        assert_eq!(record.handoffs(), 1);
        let p50 = record.handoff_quantile(0.5).expect("one hand-off");
        assert!(p50 >= Duration::from_millis(2), "{p50:?}");
    }
}
