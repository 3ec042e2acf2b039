//! The semaphore mode and its mutex twin: [`SEM_MANAGERS`] managers built
//! separately (each with its own backends and node workers, as that many
//! processes would build them), each driving [`SEM_THREADS`] threads that
//! loop acquire → a short critical section → release, on one semaphore of
//! [`SEM_PERMITS`] permits (`semaphore`) or on one key (`mutex4x4`): the
//! same layout, so the two rows of one run compare the semaphore with the
//! mutex.
//!
//! Besides the cycles, each mode records each manager's acquisitions, the
//! wait (from calling acquire to holding the permit or lock), and how many
//! holders were inside at once: a counter every thread raises after
//! acquiring and lowers before releasing. Entering while the permits (or
//! the lock) are all taken by others counts as an overlap and fails the
//! row; the most seen at once shows that the semaphore did admit more than
//! one.
//!
//! Waits count when they end inside the window; so does a wait cut by the
//! window's end (each call's deadline is the window's end at the latest, so
//! that a starved thread stops with the window instead of stalling the
//! cell), with its whole length.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redlock_redis::LockError;

use crate::cell::{Cell, Mode, Outcome, SEM_MANAGERS, SEM_PERMITS, SEM_THREADS, TTL};
use crate::measure::{OverlapDetector, Recorder, SharedRecord, Window};
use crate::{ours, runner};

/// How long one acquire call may wait, at most (and never past the
/// window's end).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Distinguishes the rounds of one benchmark process: each uses a name of
/// its own, so nothing a round left behind can hold up the next.
static RUN: AtomicU64 = AtomicU64::new(0);

/// What the threads of one cell share.
#[derive(Debug)]
struct Tally(Mutex<SharedRecord>);

impl Tally {
    fn with(&self, f: impl FnOnce(&mut SharedRecord)) {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// Runs one round of the semaphore mode or of the mutex4x4 mode.
pub(crate) fn run(cell: &Cell<'_>, retry: (Duration, Duration)) -> anyhow::Result<Outcome> {
    let semaphore = cell.mode == Mode::Semaphore;
    let capacity = if semaphore { SEM_PERMITS } else { 1 };
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let name = format!("{}:{}:{run}", cell.key(0), std::process::id());
    let managers = (0..SEM_MANAGERS)
        .map(|_| ours::manager(&cell.urls, Some(retry)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let semaphores = if semaphore {
        managers
            .iter()
            .map(|locks| locks.semaphore(&name, SEM_PERMITS))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let detector = OverlapDetector::with_capacity(capacity);
    let tally = Tally(Mutex::new(SharedRecord::new(SEM_MANAGERS)));
    let (mut record, usage) =
        runner::threads(&cell.setup, cell.clients(), |client, window, rec| {
            let side = client / SEM_THREADS;
            let Some(locks) = managers.get(side) else {
                rec.fault(format!("client {client} has no manager"));
                return;
            };
            while window.open() {
                let started = Instant::now();
                let timeout = ACQUIRE_TIMEOUT.min(window.end.saturating_duration_since(started));
                // A permit derefs to its lock: the rest of the cycle is
                // the mutex's.
                let acquired = match semaphores.get(side) {
                    Some(s) => s.acquire_timeout(TTL, timeout).map(|p| p.into_lock()),
                    None => locks.lock_timeout(name.as_str(), TTL, timeout),
                };
                match acquired {
                    Ok(lock) => {
                        let held = Instant::now();
                        detector.enter();
                        std::thread::yield_now();
                        detector.leave();
                        let released = lock.release();
                        let ended = Instant::now();
                        tally.with(|t| {
                            if waited(window, started, held) {
                                t.by_manager.wait(held - started);
                            }
                            if released.is_ok() && window.contains(started, ended) {
                                t.by_manager.count(side);
                            }
                        });
                        match released {
                            Ok(()) => rec.ok_at(window, started, ended, 1),
                            Err(e) => rec.error(window, started, format!("release: {e}")),
                        }
                    }
                    Err(e) => cut_or_failed(window, started, e, rec, &tally),
                }
            }
        })?;
    let overlaps = detector.overlaps();
    if overlaps > 0 {
        record.fault(format!(
            "{overlaps} entries while {capacity} holder(s) were inside (at most {capacity} allowed)"
        ));
    }
    let mut shared = tally.0.into_inner().unwrap_or_else(PoisonError::into_inner);
    shared.peak = detector.peak();
    Ok(Outcome {
        record,
        usage,
        overlaps: Some(overlaps),
        fair: None,
        procs: None,
        shared: Some(shared),
        node_timeouts: None,
    })
}

/// Whether a wait `started..held` counts: it ended inside the window.
fn waited(window: &Window, started: Instant, held: Instant) -> bool {
    held >= window.start && held <= window.end && started <= window.end
}

/// A call that did not acquire: a wait the window's end cut short counts
/// in the waits' tail (not as an error); anything else is an error.
fn cut_or_failed(
    window: &Window,
    started: Instant,
    error: LockError,
    rec: &mut Recorder,
    tally: &Tally,
) {
    let now = Instant::now();
    let cut = matches!(error, LockError::Timeout { .. }) && now >= window.end;
    if cut {
        if started >= window.start {
            tally.with(|t| t.by_manager.wait(now - started));
        }
    } else {
        rec.error(window, started, format!("acquire: {error}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_count_when_they_end_inside_the_window() {
        let start = Instant::now();
        let window = Window {
            start,
            end: start + Duration::from_secs(10),
        };
        let ms = |n| start + Duration::from_millis(n);
        assert!(waited(&window, ms(1), ms(2)));
        // Began in the warm-up, ended inside: counts, whole.
        assert!(waited(&window, start, ms(5)));
        // Ended after the window.
        assert!(!waited(&window, ms(9_999), ms(10_001)));
    }

    #[test]
    fn a_detector_for_four_counts_the_fifth_inside() {
        let detector = OverlapDetector::with_capacity(4);
        for _ in 0..4 {
            detector.enter();
        }
        assert_eq!((detector.overlaps(), detector.peak()), (0, 4));
        detector.enter();
        assert_eq!((detector.overlaps(), detector.peak()), (1, 5));
        for _ in 0..5 {
            detector.leave();
        }
        detector.enter();
        assert_eq!((detector.overlaps(), detector.peak()), (1, 5));
        // The default is a mutex's: the second inside is an overlap.
        let mutex = OverlapDetector::default();
        mutex.enter();
        mutex.enter();
        assert_eq!(mutex.overlaps(), 1);
    }
}
