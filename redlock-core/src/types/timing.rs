//! Validated settings: the TTL newtype, the retry delay and the manager's
//! settings as its builder validated them.

use std::time::Duration;

use crate::ConfigError;

/// A lock time-to-live: whole milliseconds (what Redis `PX` carries), at
/// least 1 ms and at most [`Ttl::MAX`]. Sub-millisecond parts are dropped,
/// never rounded up, so validity is never overestimated.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{ConfigError, Ttl};
/// let ttl = Ttl::new(Duration::from_micros(1_500))?;
/// assert_eq!(ttl.as_millis(), 1);
/// assert_eq!(Ttl::new(Duration::from_micros(999)), Err(ConfigError::TtlZero));
/// assert!(Ttl::new(Duration::MAX).is_err());
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ttl(Duration);

impl Ttl {
    /// The largest TTL: half of `i64::MAX` milliseconds, so that a server
    /// adding it to its clock cannot overflow.
    pub const MAX: Duration = Duration::from_millis(i64::MAX as u64 / 2);

    /// Validates `ttl`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::TtlZero`] below 1 ms, [`ConfigError::TtlTooLarge`]
    /// above [`Ttl::MAX`].
    ///
    /// # Examples
    ///
    /// ```
    /// let ttl = redlock_core::Ttl::new(std::time::Duration::from_secs(10))?;
    /// assert_eq!(ttl.as_millis(), 10_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(ttl: Duration) -> Result<Self, ConfigError> {
        if ttl > Self::MAX {
            return Err(ConfigError::TtlTooLarge {
                ttl,
                max: Self::MAX,
            });
        }
        // `ttl <= MAX` so the millisecond count fits in a u64.
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if millis == 0 {
            return Err(ConfigError::TtlZero);
        }
        Ok(Ttl(Duration::from_millis(millis)))
    }

    /// The TTL as a `Duration` (whole milliseconds).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let ttl = redlock_core::Ttl::new(Duration::from_millis(250))?;
    /// assert_eq!(ttl.as_duration(), Duration::from_millis(250));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn as_duration(self) -> Duration {
        self.0
    }

    /// The TTL in milliseconds, as sent with `PX`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(redlock_core::Ttl::new(Duration::from_secs(1))?.as_millis(), 1000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn as_millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }

    /// The TTL of `millis`, which a TTL's [`Ttl::as_millis`] gave (so it
    /// is valid already): for a TTL kept as its millisecond count.
    pub(crate) const fn of_millis(millis: u64) -> Ttl {
        Ttl(Duration::from_millis(millis))
    }
}

impl TryFrom<Duration> for Ttl {
    type Error = ConfigError;

    fn try_from(ttl: Duration) -> Result<Self, ConfigError> {
        Ttl::new(ttl)
    }
}

/// The random pause between two acquire rounds: uniform in `[min, max]`.
/// Random so that competing clients fall out of lock-step; a zero delay is
/// legal.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::RetryDelay;
/// let delay = RetryDelay::new(Duration::from_millis(10), Duration::from_millis(20))?;
/// let d = delay.pick(0xdead_beef);
/// assert!(d >= Duration::from_millis(10) && d <= Duration::from_millis(20));
/// assert_eq!(RetryDelay::new(Duration::ZERO, Duration::ZERO)?.pick(42), Duration::ZERO);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryDelay {
    min: Duration,
    max: Duration,
}

impl RetryDelay {
    /// The default range, 10 ms to 200 ms.
    pub(crate) const DEFAULT: RetryDelay = RetryDelay {
        min: Duration::from_millis(10),
        max: Duration::from_millis(200),
    };

    /// A delay range.
    ///
    /// # Errors
    ///
    /// [`ConfigError::JitterRange`] when `min > max`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlock_core::RetryDelay;
    /// assert!(RetryDelay::new(Duration::from_millis(5), Duration::from_millis(1)).is_err());
    /// ```
    pub fn new(min: Duration, max: Duration) -> Result<Self, ConfigError> {
        if min > max {
            return Err(ConfigError::JitterRange { min, max });
        }
        Ok(RetryDelay { min, max })
    }

    /// The delay chosen by the random number `random` (pure: the caller owns
    /// the random source, so simulations can replay it).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlock_core::RetryDelay;
    /// let delay = RetryDelay::new(Duration::ZERO, Duration::from_nanos(9))?;
    /// assert_eq!(delay.pick(13), Duration::from_nanos(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn pick(&self, random: u64) -> Duration {
        let span = u64::try_from((self.max - self.min).as_nanos()).unwrap_or(u64::MAX);
        let offset = match span.checked_add(1) {
            Some(buckets) => random % buckets,
            None => random,
        };
        self.min.saturating_add(Duration::from_nanos(offset))
    }

    /// The smallest delay.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let delay = redlock_core::RetryDelay::new(Duration::from_millis(1), Duration::from_millis(9))?;
    /// assert_eq!(delay.min(), Duration::from_millis(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn min(&self) -> Duration {
        self.min
    }

    /// The largest delay.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let delay = redlock_core::RetryDelay::new(Duration::from_millis(1), Duration::from_millis(9))?;
    /// assert_eq!(delay.max(), Duration::from_millis(9));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn max(&self) -> Duration {
        self.max
    }
}

/// The largest per-node timeout a [`Builder`](crate::Builder) accepts: one hour.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{BuildError, ConfigError, Redlock, MAX_NODE_TIMEOUT};
/// let too_long = Redlock::builder(redlock_mock::MockCluster::new(3).backends())
///     .node_timeout(Duration::MAX)
///     .build();
/// assert!(matches!(
///     too_long,
///     Err(BuildError::Config(ConfigError::NodeTimeoutTooLarge { max, .. })) if max == MAX_NODE_TIMEOUT
/// ));
/// ```
pub const MAX_NODE_TIMEOUT: Duration = Duration::from_secs(3600);

pub(crate) fn check_node_timeout(timeout: Duration) -> Result<(), ConfigError> {
    if timeout.is_zero() {
        return Err(ConfigError::NodeTimeoutZero);
    }
    let max = MAX_NODE_TIMEOUT;
    if timeout > max {
        return Err(ConfigError::NodeTimeoutTooLarge { timeout, max });
    }
    Ok(())
}
