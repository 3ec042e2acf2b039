//! Monotonic time, injectable so that simulated clocks can drive the same code.

use std::fmt::Debug;
use std::time::{Duration, Instant};

/// A monotonic clock: the only way the core reads time or waits.
///
/// Elapsed time and validity are always measured with this clock; wall-clock
/// time is never used. Implementations must be monotonic (`now` never goes
/// backwards).
///
/// # Examples
///
/// A clock that never advances unless told to, as a test might use:
///
/// ```
/// use std::sync::Mutex;
/// use std::time::{Duration, Instant};
/// use redlock_core::Clock;
///
/// #[derive(Debug)]
/// struct Frozen(Mutex<Instant>);
///
/// impl Clock for Frozen {
///     fn now(&self) -> Instant {
///         *self.0.lock().unwrap()
///     }
///     fn sleep(&self, duration: Duration) {
///         *self.0.lock().unwrap() += duration;
///     }
/// }
///
/// let clock = Frozen(Mutex::new(Instant::now()));
/// let t0 = clock.now();
/// clock.sleep(Duration::from_secs(5));
/// assert_eq!(clock.now() - t0, Duration::from_secs(5));
/// ```
pub trait Clock: Send + Sync + Debug {
    /// The current instant.
    fn now(&self) -> Instant;
    /// Blocks the calling thread for `duration` of this clock's time.
    fn sleep(&self, duration: Duration);
}

/// The operating system's monotonic clock ([`Instant::now`], [`std::thread::sleep`]).
///
/// # Examples
///
/// ```
/// use redlock_core::{Clock, SystemClock};
/// let before = SystemClock.now();
/// assert!(SystemClock.now() >= before);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}
