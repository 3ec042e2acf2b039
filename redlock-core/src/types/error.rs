//! Typed errors: what went wrong, and on which nodes.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{EntropyError, NodeId, RoundReport};

/// Invalid configuration or arguments, found before any node is contacted.
///
/// # Examples
///
/// ```
/// use redlock_core::{ConfigError, Ttl};
/// use std::time::Duration;
/// assert_eq!(Ttl::new(Duration::ZERO), Err(ConfigError::TtlZero));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// No backends were given.
    NoNodes,
    /// The same node (by [`NodeId`]) was given twice: it would count twice
    /// towards a quorum.
    DuplicateNode(NodeId),
    /// A TTL below one millisecond (keys expire in whole milliseconds).
    TtlZero,
    /// A TTL beyond [`crate::Ttl::MAX`], which millisecond expiry cannot carry.
    TtlTooLarge {
        /// The TTL asked for.
        ttl: Duration,
        /// The largest TTL accepted.
        max: Duration,
    },
    /// A TTL no longer than its clock-drift allowance: no lock taken with it
    /// could ever be valid.
    TtlWithinDrift {
        /// The TTL asked for.
        ttl: Duration,
        /// `ttl * drift_factor + 2 ms`.
        drift: Duration,
    },
    /// A drift factor outside `[0, 0.5)`, or not a number.
    DriftFactor(f64),
    /// A retry delay range whose minimum exceeds its maximum.
    JitterRange {
        /// The smallest delay given.
        min: Duration,
        /// The largest delay given.
        max: Duration,
    },
    /// A per-node timeout of zero.
    NodeTimeoutZero,
    /// A per-node timeout above [`MAX_NODE_TIMEOUT`](crate::MAX_NODE_TIMEOUT).
    NodeTimeoutTooLarge {
        /// The timeout asked for.
        timeout: Duration,
        /// The largest timeout accepted.
        max: Duration,
    },
    /// An empty resource name.
    EmptyKey,
    /// A resource name with the character
    /// [`keys::SEPARATOR`](crate::keys::SEPARATOR) (U+001F) in it, which
    /// only the keys a backend keeps beside a lock have: refused so that
    /// no name reaches another resource's keys (see [`crate::keys`]).
    ReservedChar {
        /// The name given.
        name: String,
    },
    /// An empty list of resources.
    NoKeys,
    /// Two addresses reach the same node (two host names for one server,
    /// two databases of one server), as the backend found when connecting
    /// (see [`Connect::same_node`](crate::Connect::same_node)): it would
    /// count twice towards a quorum.
    SameNode {
        /// The node as the first address names it.
        first: NodeId,
        /// The node as the second address names it.
        second: NodeId,
    },
    /// A semaphore of zero permits.
    NoPermits,
    /// A semaphore of more permits than
    /// [`MAX_PERMITS`](crate::MAX_PERMITS).
    TooManyPermits {
        /// The permits asked for.
        permits: u32,
        /// The most accepted.
        max: u32,
    },
    /// The name is a semaphore on this manager: it was asked for as a
    /// semaphore of another size, or locked as a mutex (its own name or one
    /// of its permit keys).
    SemaphoreName {
        /// The semaphore's name.
        name: String,
        /// Its permits, as first defined.
        permits: u32,
    },
    /// The name is a read-write lock on this manager: it was asked for as
    /// a semaphore, or locked as a mutex.
    RwLockName {
        /// The read-write lock's name.
        name: String,
    },
    /// An election on a manager without fencing: its terms are fencing
    /// tokens ([`Builder::fencing`](crate::Builder::fencing)).
    ElectionNeedsFencing {
        /// The election's name.
        name: String,
    },
    /// An [`Identity`](crate::Identity) that is empty, too long or has a
    /// control character in it.
    Identity {
        /// The name given (at most its first
        /// [`Identity::MAX_LEN`](crate::Identity::MAX_LEN) characters;
        /// shown escaped).
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoNodes => f.write_str("no lock nodes were configured"),
            ConfigError::DuplicateNode(id) => write!(f, "node {id} is listed more than once"),
            ConfigError::TtlZero => f.write_str("the lock TTL must be at least 1 ms"),
            ConfigError::TtlTooLarge { ttl, max } => {
                write!(
                    f,
                    "the lock TTL {ttl:?} exceeds the largest supported TTL {max:?}"
                )
            }
            ConfigError::TtlWithinDrift { ttl, drift } => write!(
                f,
                "the lock TTL {ttl:?} is not longer than its clock-drift allowance {drift:?}"
            ),
            ConfigError::DriftFactor(factor) => {
                write!(f, "drift factor {factor} is outside [0, 0.5)")
            }
            ConfigError::JitterRange { min, max } => {
                write!(
                    f,
                    "retry delay range is inverted: min {min:?} > max {max:?}"
                )
            }
            ConfigError::NodeTimeoutZero => f.write_str("the per-node timeout must not be zero"),
            ConfigError::NodeTimeoutTooLarge { timeout, max } => write!(
                f,
                "the per-node timeout {timeout:?} exceeds the largest supported {max:?}"
            ),
            ConfigError::EmptyKey => f.write_str("a resource name must not be empty"),
            ConfigError::ReservedChar { name } => write!(
                f,
                "the resource name {name:?} contains U+001F, the character reserved \
                 for the keys kept beside a lock"
            ),
            ConfigError::NoKeys => f.write_str("at least one resource name is needed"),
            ConfigError::SameNode { first, second } => write!(
                f,
                "{first} and {second} are the same server: it would count twice towards a quorum"
            ),
            ConfigError::NoPermits => f.write_str("a semaphore needs at least one permit"),
            ConfigError::TooManyPermits { permits, max } => write!(
                f,
                "a semaphore of {permits} permits exceeds the most supported, {max}"
            ),
            ConfigError::SemaphoreName { name, permits } => write!(
                f,
                "{name:?} is a semaphore of {permits} permits on this manager: \
                 use it only as that semaphore"
            ),
            ConfigError::RwLockName { name } => write!(
                f,
                "{name:?} is a read-write lock on this manager: \
                 use it only as that read-write lock"
            ),
            ConfigError::ElectionNeedsFencing { name } => write!(
                f,
                "the election {name:?} needs a manager with fencing on: its terms are fencing tokens"
            ),
            ConfigError::Identity { name, why } => {
                write!(f, "the identity {:?} is not valid: {why}", name)
            }
        }
    }
}

impl StdError for ConfigError {}

/// Why a lock operation failed. `E` is the backend's error type.
///
/// # Examples
///
/// ```
/// use redlock_core::LockError;
/// fn retry_later<E>(err: &LockError<E>) -> bool {
///     err.is_retryable()
/// }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum LockError<E> {
    /// Another holder has the resource on enough nodes that no quorum was
    /// possible. Retrying later may succeed.
    Contended(RoundReport<E>),
    /// Too many nodes failed for a quorum; [`RoundReport::failures`] names
    /// each with its error.
    NoQuorum(RoundReport<E>),
    /// A quorum granted, but so slowly that no validity was left
    /// (`elapsed + drift >= ttl`). The nodes were released.
    ValidityExhausted {
        /// How long the round took.
        elapsed: Duration,
        /// The TTL asked for.
        ttl: Duration,
    },
    /// The acquire deadline passed before any attempt succeeded.
    Timeout {
        /// Rounds tried; 0 when another caller of the same manager held or
        /// wanted the resources until the deadline (callers of one manager
        /// queue locally, see [`Redlock::lock`](crate::Redlock::lock)).
        attempts: u32,
        /// Why the last round failed ([`LockError::Contended`] with no
        /// votes when no round was tried).
        last: Box<LockError<E>>,
    },
    /// Extend or release: the lock had expired or was released, so a quorum
    /// no longer holds our token.
    NotHeld(RoundReport<E>),
    /// The lock was lost while held: an automatic extension failed, a bound
    /// on automatic extension was reached, or it expired. Check with
    /// [`Lock::ensure_held`](crate::Lock::ensure_held) before committing a
    /// side effect.
    Lost {
        /// Why.
        reason: LostReason,
        /// The failed round behind it, when there was one.
        cause: Option<Arc<LockError<E>>>,
    },
    /// Invalid configuration or arguments.
    Config(ConfigError),
    /// No random token could be made.
    Entropy(EntropyError),
    /// The call was cancelled through its [`Cancel`](crate::Cancel) handle
    /// before it got the lock; it left nothing held.
    Cancelled,
    /// The operating system refused to start a thread (the keeper of
    /// [`Lock::keep_alive`](crate::Lock::keep_alive)).
    Spawn(SpawnError),
    /// Fencing is on and every backend declared it, but a quorum granted
    /// without returning fencing counters (a backend bug). The nodes were
    /// released.
    NoFencingCounters,
}

impl<E> LockError<E> {
    /// Whether trying again later may succeed (contention, outages, slow
    /// rounds), as opposed to errors that will repeat (bad arguments, a lock
    /// that is gone).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{ConfigError, LockError};
    /// let err: LockError<std::io::Error> = LockError::Config(ConfigError::EmptyKey);
    /// assert!(!err.is_retryable());
    /// ```
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LockError::Contended(_)
                | LockError::NoQuorum(_)
                | LockError::ValidityExhausted { .. }
                | LockError::Timeout { .. }
        )
    }

    /// The per-node report of the failed round, where there was one (for a
    /// timeout, the last round's).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{ConfigError, LockError};
    /// let err: LockError<std::io::Error> = LockError::Config(ConfigError::NoKeys);
    /// assert!(err.report().is_none());
    /// ```
    #[must_use]
    pub fn report(&self) -> Option<&RoundReport<E>> {
        match self {
            LockError::Contended(r) | LockError::NoQuorum(r) | LockError::NotHeld(r) => Some(r),
            LockError::Timeout { last, .. } => last.report(),
            LockError::Lost {
                cause: Some(cause), ..
            } => cause.report(),
            _ => None,
        }
    }
}

impl<E> From<ConfigError> for LockError<E> {
    fn from(e: ConfigError) -> Self {
        LockError::Config(e)
    }
}

impl<E> From<EntropyError> for LockError<E> {
    fn from(e: EntropyError) -> Self {
        LockError::Entropy(e)
    }
}

impl<E: fmt::Display> fmt::Display for LockError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Contended(r) => write!(f, "the lock is held by another holder: {r}"),
            LockError::NoQuorum(r) => {
                write!(f, "no quorum: too many nodes failed: {r}")?;
                for failure in &r.failures {
                    write!(f, "; {failure}")?;
                }
                Ok(())
            }
            LockError::ValidityExhausted { elapsed, ttl } => write!(
                f,
                "a quorum granted after {elapsed:?}, leaving no validity of the {ttl:?} TTL"
            ),
            LockError::Timeout { attempts, last } => {
                write!(
                    f,
                    "gave up after {attempts} attempt(s) at the deadline; last: {last}"
                )
            }
            LockError::NotHeld(r) => write!(f, "the lock is no longer held: {r}"),
            LockError::Lost {
                reason,
                cause: Some(cause),
            } => {
                write!(f, "the lock was lost: {reason}: {cause}")
            }
            LockError::Lost {
                reason,
                cause: None,
            } => write!(f, "the lock was lost: {reason}"),
            LockError::Config(e) => write!(f, "invalid configuration: {e}"),
            LockError::Entropy(e) => write!(f, "{e}"),
            LockError::Cancelled => f.write_str("the wait for the lock was cancelled"),
            LockError::Spawn(e) => write!(f, "{e}"),
            LockError::NoFencingCounters => f.write_str(
                "fencing is on, but the nodes granted without returning fencing counters",
            ),
        }
    }
}

impl<E: StdError + 'static> StdError for LockError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            LockError::Contended(r) | LockError::NoQuorum(r) | LockError::NotHeld(r) => {
                r.failures.first().map(|e| e as &(dyn StdError + 'static))
            }
            LockError::Timeout { last, .. } => Some(last.as_ref()),
            LockError::Lost { cause, .. } => {
                cause.as_deref().map(|c| c as &(dyn StdError + 'static))
            }
            LockError::Config(e) => Some(e),
            LockError::Entropy(e) => Some(e),
            LockError::Spawn(e) => Some(e),
            LockError::ValidityExhausted { .. }
            | LockError::Cancelled
            | LockError::NoFencingCounters => None,
        }
    }
}

/// Why a held lock was lost.
///
/// # Examples
///
/// ```
/// use redlock_core::LostReason;
/// assert_eq!(LostReason::HoldLimit.to_string(), "the bound on total hold time was reached");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// An automatic extension failed (see the cause).
    ExtendFailed,
    /// Automatic extension stopped at the bound on total hold time.
    HoldLimit,
    /// Automatic extension stopped at the bound on the number of extensions.
    ExtensionLimit,
    /// The validity ran out, or the nodes no longer held the lock.
    Expired,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LostReason::ExtendFailed => "an automatic extension failed",
            LostReason::HoldLimit => "the bound on total hold time was reached",
            LostReason::ExtensionLimit => "the bound on the number of extensions was reached",
            LostReason::Expired => "its validity ran out",
        })
    }
}

/// The operating system refused to start one of the manager's threads.
///
/// # Examples
///
/// ```
/// let err = redlock_core::SpawnError::new("redlock-keeper", std::io::ErrorKind::OutOfMemory);
/// assert_eq!(err.thread(), "redlock-keeper");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnError {
    thread: String,
    kind: std::io::ErrorKind,
}

impl SpawnError {
    /// The thread `thread` could not start, for `kind`.
    ///
    /// # Examples
    ///
    /// See [`SpawnError`].
    #[must_use]
    pub fn new(thread: impl Into<String>, kind: std::io::ErrorKind) -> Self {
        SpawnError {
            thread: thread.into(),
            kind,
        }
    }

    /// The thread's name.
    ///
    /// # Examples
    ///
    /// See [`SpawnError`].
    #[must_use]
    pub fn thread(&self) -> &str {
        &self.thread
    }

    /// The operating system's error.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = redlock_core::SpawnError::new("t", std::io::ErrorKind::OutOfMemory);
    /// assert_eq!(err.kind(), std::io::ErrorKind::OutOfMemory);
    /// ```
    #[must_use]
    pub fn kind(&self) -> std::io::ErrorKind {
        self.kind
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not start thread {}: {}", self.thread, self.kind)
    }
}

impl StdError for SpawnError {}

/// Why a manager could not be built ([`Builder::build`](crate::Builder::build),
/// [`Redlock::new`](crate::Redlock::new)): bad settings, or a thread the
/// operating system would not start.
///
/// # Examples
///
/// ```
/// use redlock_core::{BuildError, ConfigError, Redlock};
/// use redlock_mock::MockNode;
/// let err = Redlock::new(Vec::<MockNode>::new()).unwrap_err();
/// assert!(matches!(err, BuildError::Config(ConfigError::NoNodes)));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BuildError {
    /// The settings or the set of nodes are invalid.
    Config(ConfigError),
    /// A node's worker thread could not start.
    Spawn(SpawnError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Config(e) => write!(f, "invalid configuration: {e}"),
            BuildError::Spawn(e) => write!(f, "{e}"),
        }
    }
}

impl StdError for BuildError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            BuildError::Config(e) => Some(e),
            BuildError::Spawn(e) => Some(e),
        }
    }
}

impl From<ConfigError> for BuildError {
    fn from(e: ConfigError) -> Self {
        BuildError::Config(e)
    }
}

impl From<SpawnError> for BuildError {
    fn from(e: SpawnError) -> Self {
        BuildError::Spawn(e)
    }
}

/// Why [`Redlock::connect`](crate::Redlock::connect) failed. `E` is the
/// backend's error type.
///
/// # Examples
///
/// ```
/// use redlock_core::{ConfigError, ConnectError, Redlock};
/// use redlock_mock::MockNode;
/// let err = Redlock::<MockNode>::connect(["a", "a"]).unwrap_err();
/// assert!(matches!(err, ConnectError::Config(ConfigError::DuplicateNode(_))));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError<E> {
    /// The settings or the set of nodes are invalid.
    Config(ConfigError),
    /// The backend could not use one of the addresses.
    Address(E),
    /// A node's worker thread could not start.
    Spawn(SpawnError),
}

impl<E: fmt::Display> fmt::Display for ConnectError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Config(e) => write!(f, "invalid configuration: {e}"),
            ConnectError::Address(e) => write!(f, "bad node address: {e}"),
            ConnectError::Spawn(e) => write!(f, "{e}"),
        }
    }
}

impl<E: StdError + 'static> StdError for ConnectError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ConnectError::Config(e) => Some(e),
            ConnectError::Address(e) => Some(e),
            ConnectError::Spawn(e) => Some(e),
        }
    }
}

impl<E> From<ConfigError> for ConnectError<E> {
    fn from(e: ConfigError) -> Self {
        ConnectError::Config(e)
    }
}

impl<E> From<BuildError> for ConnectError<E> {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Config(e) => ConnectError::Config(e),
            BuildError::Spawn(e) => ConnectError::Spawn(e),
        }
    }
}

impl<E> From<SpawnError> for LockError<E> {
    fn from(e: SpawnError) -> Self {
        LockError::Spawn(e)
    }
}
