//! The manager's builder and constructors: settings, their validation,
//! and the start of the workers.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::Fencing;
use crate::engine::Settings;
use crate::events::EventHandler;
use crate::runtime::config::Config;
use crate::runtime::manager::Manager;
use crate::types::timing::check_node_timeout;
use crate::{
    BuildError, Clock, ConfigError, Connect, ConnectError, Identity, LockBackend, Redlock,
    RetryDelay, SystemClock,
};

/// The default of [`Builder::poller_from`]: rounds go through the poller
/// while five callers or more of a manager are driving rounds. Four callers
/// on a semaphore or a mutex per manager keep the workers' rate; eight and
/// thirty-two on distinct keys gain the poller's (docs/benchmarks.md).
///
/// # Examples
///
/// ```
/// assert_eq!(redlock_core::POLLER_FROM, 5);
/// ```
pub const POLLER_FROM: usize = 5;

impl<B: LockBackend + 'static> Redlock<B> {
    /// A manager over `backends` with the default settings (see [`Builder`]).
    ///
    /// # Errors
    ///
    /// [`BuildError::Config`] with [`ConfigError::NoNodes`] or
    /// [`ConfigError::DuplicateNode`]; [`BuildError::Spawn`].
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{BuildError, ConfigError, Redlock};
    /// use redlock_mock::{MockCluster, MockNode};
    /// let locks = Redlock::new(MockCluster::new(3).backends())?;
    /// assert!(matches!(
    ///     Redlock::new(Vec::<MockNode>::new()),
    ///     Err(BuildError::Config(ConfigError::NoNodes))
    /// ));
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn new(backends: impl IntoIterator<Item = B>) -> Result<Self, BuildError> {
        Self::builder(backends).build()
    }

    /// A manager with the default settings over one backend per address
    /// (for Redis, one URL per master).
    ///
    /// # Errors
    ///
    /// [`ConnectError::Address`](crate::ConnectError::Address) for an address
    /// the backend rejects, [`ConnectError::Config`](crate::ConnectError::Config)
    /// for no addresses or the same node twice.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::Redlock;
    /// let locks = Redlock::<redlock_mock::MockNode>::connect(["n1", "n2", "n3"])?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect<I>(addresses: I) -> Result<Self, crate::ConnectError<B::Error>>
    where
        B: crate::Connect,
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Self::builder([]).connect(addresses)
    }

    /// A builder over `backends`, for settings other than the defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::Redlock;
    /// let locks = Redlock::builder(redlock_mock::MockCluster::new(3).backends())
    ///     .node_timeout(Duration::from_millis(10))
    ///     .build()?;
    /// # Ok::<(), redlock_core::BuildError>(())
    /// ```
    pub fn builder(backends: impl IntoIterator<Item = B>) -> Builder<B> {
        Builder::new(backends.into_iter().collect())
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
/// # Ok::<(), redlock_core::BuildError>(())
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
    identity: Option<Identity>,
    wake_ups: bool,
    own_rounds: bool,
    poller: bool,
    poller_from: usize,
    /// Whether [`Builder::clock`] replaced the system clock.
    own_clock: bool,
    events: Option<Arc<dyn EventHandler>>,
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
            .field("identity", &self.identity)
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
            identity: None,
            wake_ups: true,
            own_rounds: true,
            poller: true,
            poller_from: POLLER_FROM,
            own_clock: false,
            events: None,
        }
    }

    /// Opens one backend per address with [`Connect`], each bounded by the
    /// configured per-node timeout, and builds the manager.
    ///
    /// # Errors
    ///
    /// [`ConnectError::Address`] for an address the backend rejects,
    /// [`ConnectError::Config`] as [`Builder::build`], or
    /// [`ConfigError::SameNode`] when two addresses reach one node (see
    /// [`Connect::same_node`]).
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
        if let Some((a, b)) = B::same_node(&self.backends) {
            if let (Some(first), Some(second)) = (self.backends.get(a), self.backends.get(b)) {
                return Err(ConnectError::Config(ConfigError::SameNode {
                    first: first.node_id().clone(),
                    second: second.node_id().clone(),
                }));
            }
        }
        Ok(self.build()?)
    }

    /// How long one round waits for each node's reply. Defaults to 50 ms;
    /// at most [`MAX_NODE_TIMEOUT`](crate::MAX_NODE_TIMEOUT).
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
    /// # Ok::<(), redlock_core::BuildError>(())
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
    /// # Ok::<(), redlock_core::BuildError>(())
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
    /// # Ok::<(), redlock_core::BuildError>(())
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
    /// # Ok::<(), redlock_core::BuildError>(())
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
    /// # Ok::<(), redlock_core::BuildError>(())
    /// ```
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self.own_clock = true;
        self
    }

    /// Whether a caller waiting for a key held by another manager (another
    /// process, usually) is woken when a node reports the key released,
    /// instead of only retrying after its random pause. On by default;
    /// takes effect with backends that offer
    /// [`release_feed`](LockBackend::release_feed) (Redis: Pub/Sub, one
    /// subscriber connection per node, opened when a caller first waits;
    /// the mock too) and with the system clock only (a [`Builder::clock`]
    /// of your own sleeps its pauses whole). Waiters woken together still
    /// take turns: the nodes keep the key for the manager that waited
    /// longest (see [`Queued`](crate::backend::Queued)).
    ///
    /// # Examples
    ///
    /// ```
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// // Poll with random pauses only, as the algorithm describes.
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .wake_ups(false)
    ///     .build()?;
    /// # Ok::<(), redlock_core::BuildError>(())
    /// ```
    pub fn wake_ups(mut self, on: bool) -> Self {
        self.wake_ups = on;
        self
    }

    /// Whether a caller alone on the manager (no other caller of it
    /// driving a round) sends its rounds to the nodes itself and reads the
    /// answers, with backends that can
    /// ([`start`](LockBackend::start): Redis and the mock), instead of
    /// handing them to the node worker threads. On by default: it costs
    /// far fewer context switches and less CPU per lock-and-release cycle
    /// (docs/benchmarks.md measures both). Off, every round goes through the
    /// workers, which read the nodes in parallel and return once a quorum
    /// answered: on a client short of CPU that can be the shorter latency
    /// (docs/benchmarks.md measures both).
    ///
    /// # Examples
    ///
    /// ```
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .own_rounds(false)
    ///     .build()?;
    /// locks.try_lock("k", std::time::Duration::from_secs(5))?.release()?;
    /// assert_eq!(locks.stats().manager.direct_rounds, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn own_rounds(mut self, on: bool) -> Self {
        self.own_rounds = on;
        self
    }

    /// Whether the manager may carry the rounds of many callers at once on
    /// one poller thread, with backends that can
    /// ([`starts_batches`](LockBackend::starts_batches): Redis), instead of
    /// on one worker thread per node. The poller sends each node every
    /// request queued for it in one batch and reads the answers of all
    /// nodes, whichever answers first (one readiness wait over their
    /// connections, where the backend offers them:
    /// [`Started::readiness`](crate::backend::Started::readiness)), so a
    /// round costs one hand-over and one wake-up instead of one per node.
    /// A node whose last request failed, or that owes replies, still goes
    /// through its worker. On by default; rounds go through it only while
    /// [`poller_from`](Builder::poller_from) callers or more are driving
    /// rounds, and its thread starts the first time they do. Without such
    /// backends (the mock) it does nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .poller(false)
    ///     .build()?;
    /// locks.try_lock("k", std::time::Duration::from_secs(5))?.release()?;
    /// assert_eq!(locks.stats().manager.polled_batches, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn poller(mut self, on: bool) -> Self {
        self.poller = on;
        self
    }

    /// How many of the manager's callers must be driving rounds at once
    /// (acquiring, extending or releasing, between rounds included) for
    /// their rounds to go through the [poller](Builder::poller) rather
    /// than the node workers. Defaults to [`POLLER_FROM`]: with fewer
    /// callers each round comes back sooner through five workers reading
    /// in parallel (a semaphore's four callers per manager lost a large
    /// part of their rate through the poller), with many the poller's batches and single wake-up
    /// carry more locks per second with a shorter tail on a busy client
    /// (docs/benchmarks.md measures both). `1` or `2`: every round that a
    /// lone caller does not send itself goes through the poller.
    ///
    /// # Examples
    ///
    /// ```
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .poller_from(1)
    ///     .build()?;
    /// locks.try_lock("k", std::time::Duration::from_secs(5))?.release()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn poller_from(mut self, callers: usize) -> Self {
        self.poller_from = callers.max(1);
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
    /// # Ok::<(), redlock_core::BuildError>(())
    /// ```
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
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
    /// # Ok::<(), redlock_core::BuildError>(())
    /// ```
    pub fn queue_depth(mut self, depth: usize) -> Self {
        self.queue_depth = depth.max(1);
        self
    }

    /// Sends every [`Event`](crate::Event) of the manager to `handler` (for
    /// logs and metrics); none by default. The counters of
    /// [`Redlock::stats`] are kept either way.
    ///
    /// The hook runs on the thread that saw the event (a caller, a node's
    /// worker, the keeper) with none of the manager's own locks held, so it
    /// may call back into the manager: [`Redlock::stats`] and the other
    /// accessors, and lock calls ([`Redlock::try_lock`], [`Redlock::lock`],
    /// ...) and their guards, with one exception: it must not
    /// [`extend`](crate::Lock::extend) the lock whose extension round sent
    /// the event (an [`Event::Round`](crate::Event::Round) of an extend,
    /// sent while that extension runs), which waits for itself; the
    /// extension's [`Event::Call`](crate::Event::Call) and the
    /// [`Event::Lost`](crate::Event::Lost) it found come after it. The thread that reported waits for the hook: on a node's
    /// worker thread (most [`Event::NodeFailed`](crate::Event::NodeFailed)
    /// and [`Event::NodeRecovered`](crate::Event::NodeRecovered)), that
    /// node sends nothing meanwhile, and a lock call made from there gets
    /// no answer from it before the node timeout. Hand anything slow to a
    /// thread of your own. A hook that locks must not start again from
    /// the events of its own calls (they are sent to it too).
    ///
    /// # Examples
    ///
    /// A hook that reads the counters when a queue fills:
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::{Arc, OnceLock};
    /// use std::time::Duration;
    /// use redlock_core::{Event, EventHandler, Redlock};
    /// use redlock_mock::{MockCluster, MockNode};
    ///
    /// #[derive(Default)]
    /// struct Overloads {
    ///     locks: OnceLock<Redlock<MockNode>>,
    ///     turned_away: AtomicU64,
    /// }
    /// impl EventHandler for Overloads {
    ///     fn on_event(&self, event: &Event<'_>) {
    ///         if let (Event::QueueFull { .. }, Some(locks)) = (event, self.locks.get()) {
    ///             let stats = locks.stats();
    ///             let total = stats.nodes.iter().map(|n| n.failures.overloaded).sum();
    ///             self.turned_away.store(total, Ordering::Relaxed);
    ///         }
    ///     }
    /// }
    ///
    /// let cluster = MockCluster::new(3);
    /// let hook = Arc::new(Overloads::default());
    /// let locks = Redlock::builder(cluster.backends())
    ///     .events(hook.clone())
    ///     .queue_depth(1)
    ///     .build()?;
    /// // A manager its own hook holds is never dropped: for one that
    /// // lives as long as the program.
    /// let _ = hook.locks.set(locks.clone());
    /// cluster.node(2).freeze();
    /// for key in ["a", "b", "c"] {
    ///     locks.try_lock(key, Duration::from_secs(5))?.release()?;
    /// }
    /// assert!(hook.turned_away.load(Ordering::Relaxed) >= 1);
    /// cluster.node(2).thaw();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// See also [`EventHandler`].
    pub fn events(mut self, handler: Arc<dyn EventHandler>) -> Self {
        self.events = Some(handler);
        self
    }

    /// Names this manager: `identity` is stored with every lock it takes,
    /// at no extra round, so that [`Redlock::holder`](crate::Redlock::holder)
    /// and `redlock status` show who holds a lock. Never secret (anyone who
    /// reads the nodes reads it). Defaults to none: locks then look
    /// exactly as without this setting.
    ///
    /// # Examples
    ///
    /// ```
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// use redlock_core::Identity;
    /// let me = Identity::new(format!("billing-7:{}", std::process::id()))?;
    /// let locks = redlock_core::Redlock::builder(backends).identity(me).build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn identity(mut self, identity: Identity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Validates the settings and starts one worker thread per node.
    ///
    /// # Errors
    ///
    /// [`BuildError::Config`] with [`ConfigError::NoNodes`],
    /// [`ConfigError::DuplicateNode`],
    /// [`ConfigError::DriftFactor`], [`ConfigError::JitterRange`],
    /// [`ConfigError::NodeTimeoutZero`] or [`ConfigError::NodeTimeoutTooLarge`];
    /// [`BuildError::Spawn`]
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
    /// # Ok::<(), redlock_core::BuildError>(())
    /// ```
    pub fn build(self) -> Result<Redlock<B>, BuildError> {
        if self.backends.is_empty() {
            return Err(ConfigError::NoNodes.into());
        }
        let mut seen = std::collections::HashSet::new();
        for backend in &self.backends {
            if !seen.insert(backend.node_id().clone()) {
                return Err(ConfigError::DuplicateNode(backend.node_id().clone()).into());
            }
        }
        if !(self.drift_factor.is_finite() && (0.0..0.5).contains(&self.drift_factor)) {
            return Err(ConfigError::DriftFactor(self.drift_factor).into());
        }
        check_node_timeout(self.node_timeout)?;
        let nodes = self.backends.iter().map(|b| b.node_id().clone()).collect();
        let config = Config {
            settings: Settings::new(nodes)
                .node_timeout(self.node_timeout)
                .drift_factor(self.drift_factor)
                .retry(RetryDelay::new(self.retry_min, self.retry_max)?)
                .fencing(self.fencing)
                .identity(self.identity)
                .observe(self.events.is_some()),
            acquire_timeout: self.acquire_timeout,
            clock: self.clock,
            jitter_seed: self.jitter_seed,
            queue_depth: self.queue_depth,
            wake_ups: self.wake_ups && !self.own_clock,
            own_rounds: self.own_rounds,
            poller: self.poller,
            poller_from: self.poller_from,
        };
        let manager = Manager::start(self.backends, config, self.events)?;
        Ok(Redlock {
            manager: Arc::new(manager),
        })
    }
}

impl<B: Fencing + 'static> Builder<B> {
    /// Gives every lock a [`FencingToken`](crate::FencingToken)
    /// ([`Lock::fencing_token`](crate::Lock::fencing_token)). Costs a second
    /// round per acquire on more than one node. Defaults to off. Only for
    /// backends with the [`Fencing`](crate::backend::Fencing) ability.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let backends = redlock_mock::MockCluster::new(3).backends();
    /// let locks = redlock_core::Redlock::builder(backends)
    ///     .fencing(true)
    ///     .build()?;
    /// # Ok::<(), redlock_core::BuildError>(())
    /// ```
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }
}
