//! The Redis backend of the synchronous [Redlock]: a distributed lock over
//! `N` independent Redis masters that stays safe while a majority of them
//! is up. It is safe under Redlock's own conditions: masters that
//! persist their keys or restart only after the longest TTL, masters'
//! clocks that are never stepped, and a client that acts within the
//! validity (`docs/safety.md` names each and what breaks without it).
//!
//! This crate is all an application needs: it re-exports the core API
//! (`redlock-core`) and defines concrete aliases ([`Redlock`], [`Lock`],
//! [`LockError`], ...) for Redis nodes. Each master is a [`RedisBackend`]
//! with its own small connection pool.
//!
//! # Quick start
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_redis::Redlock;
//!
//! // Independent masters (not replicas of each other, not one cluster).
//! let locks = Redlock::connect([
//!     "redis://redis-a.internal:6379",
//!     "redis://redis-b.internal:6379",
//!     "redis://redis-c.internal:6379",
//! ])?;
//!
//! // Waits (retrying with random pauses, 10 s at most by default).
//! let lock = locks.lock("invoice:42", Duration::from_secs(10))?;
//! // ... the critical section, while lock.is_valid() ...
//! lock.release()?; // dropping the guard also releases, best effort
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Redlock::connect`] asks every master at once for `INFO` (to find two
//! addresses of one server, which would count twice towards a quorum),
//! each within the node timeout, and does not wait longer for any: a
//! master that is down at start is a failed node in each round until it
//! comes back.
//!
//! # Settings
//!
//! The manager's [`Builder`] sets the round behaviour; its `node_timeout`
//! (default 50 ms) also bounds every call of the backends it connects:
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_redis::Redlock;
//!
//! let locks = Redlock::builder([])
//!     .node_timeout(Duration::from_millis(20))
//!     .acquire_timeout(Duration::from_secs(2))
//!     .connect(["redis://a:6379", "redis://b:6379", "redis://c:6379"])?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! For per-master settings (pool size, TLS roots), build each
//! [`RedisBackend`] and hand them to [`Redlock::builder`] or
//! [`Redlock::new`]:
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_redis::{RedisBackend, Redlock};
//!
//! let timeout = Duration::from_millis(20);
//! let backends = ["redis://a:6379", "redis://b:6379", "redis://c:6379"]
//!     .into_iter()
//!     .map(|url| RedisBackend::builder(url).node_timeout(timeout).pool_size(1).build())
//!     .collect::<Result<Vec<_>, _>>()?;
//! let locks = Redlock::builder(backends).node_timeout(timeout).build()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # URLs
//!
//! | URL | meaning |
//! |---|---|
//! | `redis://host` | port 6379, database 0 |
//! | `redis://host:6380/2` | port 6380, database 2 |
//! | `redis://:password@host` | `AUTH password` |
//! | `redis://user:password@host` | ACL user |
//! | `rediss://host:6380` | TLS (feature `tls`; system roots or `tls_root_certificate` on the [`RedisBackendBuilder`]) |
//! | `redis+unix:///run/redis.sock?db=1&user=u&pass=p` | unix socket (also `unix://`) |
//!
//! Each master is named by a secret-free, normalized [`NodeId`]
//! (`host:port/db`, `rediss://host:port/db`, `unix:/path/db`); listing the
//! same master twice is a configuration error. Passwords never appear in
//! `Debug` output or error messages.
//!
//! # Errors
//!
//! A failed round says what each node said. Redis failures are
//! [`RedisNodeError`]s with a [`RedisErrorKind`]: connection refused,
//! timeout, authentication, a replica given as a master (`READONLY`), out of
//! memory, a lock key of another type, ...
//!
//! ```
//! use std::time::Duration;
//! use redlock_redis::{LockError, NodeFailure, RedisErrorKind, Redlock};
//!
//! // Three masters, none of them running.
//! let locks = Redlock::connect(["redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"])?;
//! match locks.try_lock("job", Duration::from_secs(5)) {
//!     Err(LockError::NoQuorum(report)) => {
//!         // The round is decided once a quorum (2 of 3) is out of reach.
//!         assert!(report.failures().len() >= 2);
//!         for failure in report.failures() {
//!             if let NodeFailure::Backend(err) = failure.failure() {
//!                 assert_eq!(err.kind(), RedisErrorKind::ConnectionRefused);
//!                 assert_eq!(err.node(), failure.node());
//!             }
//!         }
//!     }
//!     other => panic!("expected NoQuorum, got {other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Keys and commands
//!
//! A lock on resource `R` is the string key `R` holding the lock's random
//! token; fencing counters live in `R␟fence` (see [`FENCE_SUFFIX`]) and the
//! waiting marks of callers that wait in line in `R␟waiting` (see
//! [`WAIT_SUFFIX`]). The readers of a read-write lock `R` are the sorted
//! set `R␟readers` (see [`READERS_SUFFIX`]), and while any reader lives `R`
//! holds the marker `redlock:readers` instead of a token, so that writers
//! see it held. The managers watching an election `R` (its observers) are
//! the sorted set `R␟watchers` (see [`WATCH_SUFFIX`]). The layout is wire format [`keys::WIRE_FORMAT`]: the
//! acquiring scripts refuse a resource whose `R␟format` (see
//! [`FORMAT_SUFFIX`]) says another ([`RedisErrorKind::WireFormat`]). The
//! commands and Lua scripts are described on [`RedisBackend`].
//!
//! # Timeouts and order
//!
//! Every call to a master is bounded by the node timeout, however slowly
//! the server sends its replies, and a reply may take 1 MiB at most (see
//! "Bounds on what a server can cost" on [`RedisBackend`]). A master runs a
//! backend's requests in the order they were sent, also those that timed
//! out: the connection that timed out is kept, a release goes behind every
//! acquire whose answer did not come, and later calls go behind them on the
//! same connection. So an acquire that a frozen or slow master runs late is
//! released right after, instead of leaving a key for its whole TTL. While
//! a master has not answered, new acquires to it fail at once with
//! [`RedisErrorKind::Behind`] (a failed node for the round) and releases
//! still go out. A connection on which the server stalled (part of a reply
//! sent, and not the rest by the deadline) is dropped instead, and its
//! releases go out again on the next. See `# Timeouts` on
//! [`RedisBackend`].
//!
//! # Tests without a server
//!
//! Application tests can run the same code on in-memory nodes from
//! `redlock-mock` (`Redlock::new(cluster.backends())` with the generic
//! `redlock_core::Redlock`).
//!
//! [Redlock]: https://redis.io/docs/latest/develop/use/patterns/distributed-locks/
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(
    not(test),
    deny(clippy::panic, clippy::print_stdout, clippy::print_stderr)
)]

mod address;
mod builder;
mod check;
mod classify;
mod error;
mod feed;
mod ops;
mod ordered;
mod plan;
mod pool;
#[cfg(test)]
mod real_server;
mod redis_backend;
mod reply;
mod session;
mod version;
mod wire;

pub use builder::{RedisBackendBuilder, DEFAULT_NODE_TIMEOUT, DEFAULT_POOL_SIZE};
pub use check::{
    check_deployment, key_status, keys_status, DeploymentCheck, Finding, KeyState, ServerCheck,
    ServerInfo, Severity,
};
pub use error::{RedisErrorKind, RedisNodeError};
pub use feed::RELEASE_CHANNEL;
pub use redis_backend::{
    RedisBackend, FENCE_SUFFIX, FORMAT_SUFFIX, READERS_SUFFIX, WAIT_SUFFIX, WATCH_SUFFIX,
};
pub use version::MIN_REDIS_VERSION;
// What applications use, by name (the manager, guard, builder and error
// types are the aliases below, over `RedisBackend`); backend authors find
// the trait in `backend`, the pure decisions in `decide`.
pub use redlock_core::{
    backend, decide, election, keys, BuildError, CallKind, CallOutcome, Cancel, Clock, ConfigError,
    DynBackend, DynError, DynRedlock, EntropyError, Event, EventHandler, FailureCounts,
    FailureKind, FencingToken, Identity, IntoResources, KeepAlive, LostReason, ManagerStats,
    NoEvents, NodeId, NodeStats, Resources, RetryDelay, SpawnError, Stats, SystemClock, Ttl,
    MAX_NODE_TIMEOUT, MAX_PERMITS, POLLER_FROM,
};

/// The core's event hook that logs through `tracing` (feature `tracing`).
#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
pub use redlock_core::TracingEvents;

/// The lock manager over Redis masters.
///
/// # Examples
///
/// ```no_run
/// let locks = redlock_redis::Redlock::connect(["redis://a:6379", "redis://b:6379", "redis://c:6379"])?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type Redlock = redlock_core::Redlock<RedisBackend>;

/// A held lock on Redis masters; released on drop.
///
/// # Examples
///
/// ```no_run
/// # use std::time::Duration;
/// # let locks = redlock_redis::Redlock::connect(["redis://a:6379", "redis://b:6379", "redis://c:6379"])?;
/// let lock: redlock_redis::Lock = locks.try_lock("k", Duration::from_secs(5))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type Lock = redlock_core::Lock<RedisBackend>;

/// A counting semaphore on Redis masters (see [`Redlock::semaphore`]).
///
/// # Examples
///
/// ```no_run
/// # use std::time::Duration;
/// # let locks = redlock_redis::Redlock::connect(["redis://a:6379", "redis://b:6379", "redis://c:6379"])?;
/// let api: redlock_redis::Semaphore = locks.semaphore("partner-api", 4)?;
/// let permit: redlock_redis::Permit = api.acquire(Duration::from_secs(5))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type Semaphore = redlock_core::Semaphore<RedisBackend>;

/// A held permit of a [`Semaphore`] on Redis masters; released on drop.
///
/// # Examples
///
/// See [`Semaphore`].
pub type Permit = redlock_core::Permit<RedisBackend>;

/// A read-write lock on Redis masters (see [`Redlock::rwlock`]).
///
/// # Examples
///
/// ```no_run
/// # use std::time::Duration;
/// # let locks = redlock_redis::Redlock::connect(["redis://a:6379", "redis://b:6379", "redis://c:6379"])?;
/// let doc: redlock_redis::RwLock = locks.rwlock("doc:7")?;
/// let reading: redlock_redis::Lock = doc.read(Duration::from_secs(5))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type RwLock = redlock_core::RwLock<RedisBackend>;

/// The manager's builder for Redis masters.
///
/// # Examples
///
/// ```
/// # use std::time::Duration;
/// let builder: redlock_redis::Builder =
///     redlock_redis::Redlock::builder([]).node_timeout(Duration::from_millis(20));
/// ```
pub type Builder = redlock_core::Builder<RedisBackend>;

/// Why a lock operation failed, with each Redis node's error.
///
/// # Examples
///
/// ```
/// fn alert(err: &redlock_redis::LockError) -> bool {
///     !err.is_retryable()
/// }
/// ```
pub type LockError = redlock_core::LockError<RedisNodeError>;

/// Why [`Redlock::connect`] failed.
///
/// # Examples
///
/// ```
/// use redlock_redis::{ConnectError, Redlock};
/// let err = Redlock::connect(["redis://a", "redis://A:6379/0"]).unwrap_err();
/// assert!(matches!(err, ConnectError::Config(_)));
/// ```
pub type ConnectError = redlock_core::ConnectError<RedisNodeError>;

/// One Redis node's failure in a round, naming the node.
///
/// # Examples
///
/// ```
/// fn dead_nodes(report: &redlock_redis::RoundReport) -> Vec<String> {
///     report.failures().iter().map(|f: &redlock_redis::NodeError| f.node().to_string()).collect()
/// }
/// ```
pub type NodeError = redlock_core::NodeError<RedisNodeError>;

/// Why one Redis node did not answer usefully.
///
/// # Examples
///
/// ```
/// use redlock_redis::NodeFailure;
/// let failure: NodeFailure = NodeFailure::TimedOut;
/// assert!(failure.to_string().contains("timeout"));
/// ```
pub type NodeFailure = redlock_core::NodeFailure<RedisNodeError>;

/// What the Redis nodes said in one failed round.
///
/// # Examples
///
/// ```
/// fn summary(report: &redlock_redis::RoundReport) -> String {
///     format!("{} of {} granted", report.granted(), report.nodes())
/// }
/// ```
pub type RoundReport = redlock_core::RoundReport<RedisNodeError>;

/// For tests that send the backend's commands themselves (the
/// differential tests of the node model): not part of the stable API.
#[doc(hidden)]
pub mod testing {
    pub use crate::ops::command_words;
}
