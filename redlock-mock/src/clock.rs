//! A simulated monotonic clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redlock_core::Clock;

/// A monotonic clock that moves only when told to: [`ManualClock::advance`],
/// or [`Clock::sleep`], which advances it by the slept duration at once.
///
/// Share it (it is an `Arc` inside) between a [`MockCluster`](crate::MockCluster)
/// and a manager's builder to test expiry and validity without waiting.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::Clock;
/// use redlock_mock::ManualClock;
///
/// let clock = ManualClock::new();
/// let t0 = clock.now();
/// clock.advance(Duration::from_secs(60));
/// clock.sleep(Duration::from_secs(1));
/// assert_eq!(clock.now() - t0, Duration::from_secs(61));
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<Instant>>);

impl ManualClock {
    /// A clock starting at the current real instant.
    ///
    /// # Examples
    ///
    /// ```
    /// let clock = redlock_mock::ManualClock::new();
    /// ```
    #[must_use]
    pub fn new() -> Self {
        ManualClock(Arc::new(Mutex::new(Instant::now())))
    }

    /// Moves the clock forward by `by`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlock_core::Clock;
    /// let clock = redlock_mock::ManualClock::new();
    /// let t0 = clock.now();
    /// clock.advance(Duration::from_millis(5));
    /// assert_eq!(clock.now() - t0, Duration::from_millis(5));
    /// ```
    pub fn advance(&self, by: Duration) {
        let mut now = self.0.lock();
        *now = now.checked_add(by).unwrap_or(*now);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.0.lock()
    }

    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}
