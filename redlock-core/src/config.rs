//! Validated settings: the TTL newtype, the retry delay and the manager's builder.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{drift, Clock, ConfigError, Connect, ConnectError, LockBackend, Redlock, SystemClock};

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
    /// # Ok::<(), redlock_core::ConfigError>(())
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
    /// # Ok::<(), redlock_core::ConfigError>(())
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
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn as_millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
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
/// # Ok::<(), redlock_core::ConfigError>(())
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
    /// # Ok::<(), redlock_core::ConfigError>(())
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
    /// # Ok::<(), redlock_core::ConfigError>(())
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
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max(&self) -> Duration {
        self.max
    }
}

/// Validated manager settings (built by [`Builder`]).
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) node_timeout: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) retry: RetryDelay,
    pub(crate) acquire_timeout: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) jitter_seed: Option<u64>,
    pub(crate) queue_depth: usize,
    pub(crate) fencing: bool,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("node_timeout", &self.node_timeout)
            .field("drift_factor", &self.drift_factor)
            .field("retry", &self.retry)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("clock", &self.clock)
            .field("fencing", &self.fencing)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Validates a TTL for a lock request: in range and longer than its drift.
    pub(crate) fn check_ttl(&self, ttl: Duration) -> Result<Ttl, ConfigError> {
        let ttl = Ttl::new(ttl)?;
        let drift = self.drift(ttl);
        if drift >= ttl.as_duration() {
            return Err(ConfigError::TtlWithinDrift {
                ttl: ttl.as_duration(),
                drift,
            });
        }
        Ok(ttl)
    }

    pub(crate) fn drift(&self, ttl: Ttl) -> Duration {
        drift(ttl.as_duration(), self.drift_factor)
    }
}

/// Builds a [`Redlock`] manager; `build()` validates every setting.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::Redlock;
/// use redlock_mock::MockCluster;
///
/// let cluster = MockCluster::new(5);
/// let locks = Redlock::builder(cluster.backends())
///     .node_timeout(Duration::from_millis(20))
///     .drift_factor(0.01)
///     .retry_delay(Duration::from_millis(5), Duration::from_millis(50))
///     .acquire_timeout(Duration::from_secs(2))
///     .build()?;
/// assert_eq!(locks.quorum(), 3);
/// # Ok::<(), redlock_core::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until build() is called"]
pub struct Builder<B> {
    backends: Vec<B>,
    node_timeout: Duration,
    drift_factor: f64,
    retry_min: Duration,
    retry_max: Duration,
    acquire_timeout: Duration,
    clock: Arc<dyn Clock>,
    jitter_seed: Option<u64>,
    queue_depth: usize,
    fencing: bool,
}

impl<B: LockBackend> fmt::Debug for Builder<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<_> = self.backends.iter().map(LockBackend::node_id).collect();
        f.debug_struct("Builder")
            .field("nodes", &nodes)
            .field("node_timeout", &self.node_timeout)
            .field("drift_factor", &self.drift_factor)
            .field("retry", &(self.retry_min..=self.retry_max))
            .field("acquire_timeout", &self.acquire_timeout)
            .finish_non_exhaustive()
    }
}

impl<B: LockBackend + 'static> Builder<B> {
    pub(crate) fn new(backends: Vec<B>) -> Self {
        Builder {
            backends,
            node_timeout: Duration::from_millis(50),
            drift_factor: 0.01,
            retry_min: Duration::from_millis(10),
            retry_max: Duration::from_millis(200),
            acquire_timeout: Duration::from_secs(10),
            clock: Arc::new(SystemClock),
            jitter_seed: None,
            queue_depth: 1024,
            fencing: false,
        }
    }

    /// Opens one backend per address with [`Connect`], each bounded by the
    /// configured per-node timeout, and builds the manager.
    ///
    /// # Errors
    ///
    /// [`ConnectError::Address`] for an address the backend rejects,
    /// [`ConnectError::Config`] as [`Builder::build`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::Redlock;
    /// use redlock_mock::MockNode;
    /// let locks = Redlock::<MockNode>::builder([])
    ///     .node_timeout(Duration::from_millis(20))
    ///     .connect(["a", "b", "c"])?;
    /// assert_eq!(locks.quorum(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect<I>(mut self, addresses: I) -> Result<Redlock<B>, ConnectError<B::Error>>
    where
        B: Connect,
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        // Before any backend sees the timeout: a bad one is a configuration
        // error, not a bad address.
        check_node_timeout(self.node_timeout)?;
        for address in addresses {
            let backend =
                B::connect(address.as_ref(), self.node_timeout).map_err(ConnectError::Address)?;
            self.backends.push(backend);
        }
        Ok(self.build()?)
    }

    /// How long one round waits for each node's reply. Defaults to 50 ms;
    /// at most [`MAX_NODE_TIMEOUT`].
    /// Keep it small against the TTL (the specification suggests 5–50 ms
    /// for a 10 s TTL): a dead or frozen node costs at most this much.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .node_timeout(Duration::from_millis(25))
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// The clock-drift factor: drift is `ttl * factor + 2 ms`. Must lie in
    /// `[0, 0.5)`. Defaults to 0.01.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .drift_factor(0.02)
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// The range of the random pause between acquire rounds. Defaults to
    /// 10 ms to 200 ms; `min` must not exceed `max`, both may be zero.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .retry_delay(Duration::ZERO, Duration::from_millis(50))
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn retry_delay(mut self, min: Duration, max: Duration) -> Self {
        self.retry_min = min;
        self.retry_max = max;
        self
    }

    /// How long [`Redlock::lock`] keeps retrying. Defaults to 10 s.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .acquire_timeout(Duration::from_secs(30))
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// The clock for elapsed time, validity and retry pauses. Defaults to
    /// [`SystemClock`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .clock(std::sync::Arc::new(redlock_core::SystemClock))
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Seeds the retry jitter for reproducible runs. Defaults to a random seed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .jitter_seed(42)
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }

    /// Gives every lock a [`FencingToken`](crate::FencingToken)
    /// ([`Lock::fencing_token`](crate::Lock::fencing_token)). Costs a second
    /// round per acquire on more than one node. Defaults to off.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .fencing(true)
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// How many requests may wait for one node before further requests to it
    /// fail fast as [`NodeFailure::Overloaded`](crate::NodeFailure::Overloaded).
    /// Defaults to 1024; zero is raised to 1.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .queue_depth(64)
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn queue_depth(mut self, depth: usize) -> Self {
        self.queue_depth = depth.max(1);
        self
    }

    /// Validates the settings and starts one worker thread per node.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoNodes`], [`ConfigError::DuplicateNode`],
    /// [`ConfigError::DriftFactor`], [`ConfigError::JitterRange`],
    /// [`ConfigError::NodeTimeoutZero`], [`ConfigError::NodeTimeoutTooLarge`], or [`ConfigError::WorkerSpawn`]
    /// when the operating system refuses a thread.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .node_timeout(Duration::from_millis(50))
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn build(self) -> Result<Redlock<B>, ConfigError> {
        if self.backends.is_empty() {
            return Err(ConfigError::NoNodes);
        }
        let mut seen = std::collections::HashSet::new();
        for backend in &self.backends {
            if !seen.insert(backend.node_id().clone()) {
                return Err(ConfigError::DuplicateNode(backend.node_id().clone()));
            }
        }
        if !(self.drift_factor.is_finite() && (0.0..0.5).contains(&self.drift_factor)) {
            return Err(ConfigError::DriftFactor(self.drift_factor));
        }
        check_node_timeout(self.node_timeout)?;
        let config = Config {
            node_timeout: self.node_timeout,
            drift_factor: self.drift_factor,
            retry: RetryDelay::new(self.retry_min, self.retry_max)?,
            acquire_timeout: self.acquire_timeout,
            clock: self.clock,
            jitter_seed: self.jitter_seed,
            queue_depth: self.queue_depth,
            fencing: self.fencing,
        };
        Redlock::start(self.backends, config)
    }
}

/// The largest per-node timeout a [`Builder`] accepts: one hour.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{ConfigError, Redlock, MAX_NODE_TIMEOUT};
/// let too_long = Redlock::builder(redlock_mock::MockCluster::new(3).backends())
///     .node_timeout(Duration::MAX)
///     .build();
/// assert!(matches!(too_long, Err(ConfigError::NodeTimeoutTooLarge { max, .. }) if max == MAX_NODE_TIMEOUT));
/// ```
pub const MAX_NODE_TIMEOUT: Duration = Duration::from_secs(3600);

fn check_node_timeout(timeout: Duration) -> Result<(), ConfigError> {
    if timeout.is_zero() {
        return Err(ConfigError::NodeTimeoutZero);
    }
    let max = MAX_NODE_TIMEOUT;
    if timeout > max {
        return Err(ConfigError::NodeTimeoutTooLarge { timeout, max });
    }
    Ok(())
}

/// `now + after`, or the farthest instant this platform can represent
/// within that (so `Duration::MAX` means "practically never"), never a panic.
pub(crate) fn later(now: Instant, after: Duration) -> Instant {
    if let Some(at) = now.checked_add(after) {
        return at;
    }
    // Halve what is left until it fits: at most 64 steps.
    let mut step = after;
    let mut at = now;
    while !step.is_zero() {
        step /= 2;
        if let Some(next) = at.checked_add(step) {
            at = next;
        }
    }
    at
}
