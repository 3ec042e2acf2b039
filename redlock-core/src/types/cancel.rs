//! Cancelling a waiting [`Redlock::lock_cancellable`] call from another
//! thread (a signal handler's thread, a shutdown hook).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::Clock;

/// The longest slice a cancellable pause between rounds sleeps before it
/// looks at its handle again: how late a cancellation is noticed at most
/// (on the configured clock).
const SLICE: Duration = Duration::from_millis(10);

/// A handle that stops waiting [`Redlock::lock_cancellable`](crate::Redlock::lock_cancellable) calls
/// (and [`Semaphore::acquire_cancellable`](crate::Semaphore::acquire_cancellable) calls) from any
/// thread.
///
/// Clones share one state: cancelling any of them cancels every call made
/// with any of them, now and later (a handle does not reset). A cancelled
/// call returns [`LockError::Cancelled`](crate::LockError::Cancelled)
/// promptly: a caller waiting in the manager's local line leaves it at
/// once, one pausing between rounds stops its pause (within about 10 ms),
/// and one whose round is on its way to the nodes waits for that round (at
/// most one per-node timeout, plus one to release it if it was won). It
/// leaves no key behind: a failed round is released as always, and a lock
/// won by a round that was under way when the cancellation came is
/// released before the call returns.
///
/// # Examples
///
/// A `lock` call that another thread stops while it waits:
///
/// ```
/// use std::time::{Duration, Instant};
/// use redlock_core::{Cancel, LockError, Redlock};
/// use redlock_mock::MockCluster;
///
/// let cluster = MockCluster::new(3);
/// let locks = Redlock::new(cluster.backends())?;
/// let held = locks.try_lock("job", Duration::from_secs(30))?;
///
/// let cancel = Cancel::new();
/// let stopper = cancel.clone();
/// let waiter = std::thread::spawn(move || {
///     // No deadline: waits until the lock is free or the call is cancelled.
///     locks.lock_cancellable("job", Duration::from_secs(30), None, &cancel)
/// });
/// std::thread::sleep(Duration::from_millis(50));
/// let asked = Instant::now();
/// stopper.cancel();
/// let result = waiter.join().expect("no panic");
/// assert!(matches!(result, Err(LockError::Cancelled)));
/// assert!(asked.elapsed() < Duration::from_secs(2));
/// drop(held);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    next_id: AtomicU64,
    /// The threads of the calls under way, woken on cancellation.
    parked: Mutex<Vec<(u64, Thread)>>,
}

impl Cancel {
    /// A handle that is not cancelled.
    ///
    /// # Examples
    ///
    /// ```
    /// let cancel = redlock_core::Cancel::new();
    /// assert!(!cancel.is_cancelled());
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every call made with this handle or its clones, and every
    /// later one. Returns at once; safe to call from any thread, any number
    /// of times.
    ///
    /// # Examples
    ///
    /// ```
    /// let cancel = redlock_core::Cancel::new();
    /// let other = cancel.clone();
    /// other.cancel();
    /// assert!(cancel.is_cancelled());
    /// ```
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::Release);
        for (_, thread) in self.inner.parked.lock().iter() {
            thread.unpark();
        }
    }

    /// Whether [`Cancel::cancel`] was called on this handle or a clone.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!redlock_core::Cancel::new().is_cancelled());
    /// ```
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Registers the calling thread to be woken on cancellation, until the
    /// returned guard is dropped.
    pub(crate) fn watch(&self) -> Watch<'_> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        self.inner.parked.lock().push((id, thread::current()));
        Watch { cancel: self, id }
    }

    /// Sleeps on `clock` until `at`, in slices, looking at the handle
    /// between them; returns `false` when cancelled first.
    pub(crate) fn sleep_until(&self, clock: &dyn Clock, at: Instant) -> bool {
        loop {
            if self.is_cancelled() {
                return false;
            }
            let now = clock.now();
            if now >= at {
                return true;
            }
            clock.sleep((at - now).min(SLICE));
        }
    }
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// A thread registered with a [`Cancel`], unregistered on drop.
pub(crate) struct Watch<'a> {
    cancel: &'a Cancel,
    id: u64,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        self.cancel
            .inner
            .parked
            .lock()
            .retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SystemClock;

    #[test]
    fn a_sleep_stops_when_cancelled_and_runs_out_otherwise() {
        let cancel = Cancel::new();
        let start = Instant::now();
        assert!(cancel.sleep_until(&SystemClock, start + Duration::from_millis(20)));
        assert!(start.elapsed() >= Duration::from_millis(20));
        cancel.cancel();
        let start = Instant::now();
        assert!(!cancel.sleep_until(&SystemClock, start + Duration::from_secs(60)));
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn watches_unregister_on_drop() {
        let cancel = Cancel::new();
        {
            let _a = cancel.watch();
            let _b = cancel.watch();
            assert_eq!(cancel.inner.parked.lock().len(), 2);
        }
        assert!(cancel.inner.parked.lock().is_empty());
    }
}
