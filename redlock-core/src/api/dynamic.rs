//! A type-erased backend, so that one application type ([`DynRedlock`])
//! can be built over Redis masters in production and over in-memory mock
//! nodes in unit tests.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::backend::{Fencing, Inspect, KeyView, ReleaseFeed, SharedClaims, Watcher};
use crate::{
    events::ConnectionSink, AcquireOutcome, Claim, LockBackend, NodeId, Redlock, Request, Response,
    Ttl,
};

/// A manager over type-erased backends: the one type an application can
/// hold whatever its nodes are.
///
/// # Examples
///
/// Application code written once against `DynRedlock`, handed mock nodes in
/// a test (with Redis: `DynBackend::new(redis_backend)` for each master):
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{DynBackend, DynRedlock, Redlock};
/// use redlock_mock::MockCluster;
///
/// fn charge(locks: &DynRedlock, invoice: u64) -> Result<(), Box<dyn std::error::Error>> {
///     let lock = locks.try_lock(format!("invoice:{invoice}"), Duration::from_secs(10))?;
///     // ... the critical section ...
///     lock.release()?;
///     Ok(())
/// }
///
/// let cluster = MockCluster::new(3);
/// let locks: DynRedlock = Redlock::new(cluster.backends().into_iter().map(DynBackend::new))?;
/// charge(&locks, 42)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type DynRedlock = Redlock<DynBackend>;

/// Any [`LockBackend`] behind one type, its errors boxed in [`DynError`].
///
/// # Examples
///
/// ```
/// use redlock_core::DynBackend;
/// use redlock_core::backend::LockBackend;
/// use redlock_mock::MockNode;
///
/// let node = DynBackend::new(MockNode::new("a"));
/// assert_eq!(node.node_id().as_str(), "a");
/// ```
pub struct DynBackend {
    inner: Box<dyn Erased>,
}

impl DynBackend {
    /// Erases `backend`'s type. The backend must have every ability
    /// ([`Fencing`], [`SharedClaims`], [`Inspect`]), as the Redis and in-memory ones do,
    /// since the erased type declares them all; a backend without them is
    /// used through its own type.
    ///
    /// # Examples
    ///
    /// See [`DynBackend`].
    #[must_use]
    pub fn new<B: Fencing + SharedClaims + Inspect + 'static>(backend: B) -> Self {
        DynBackend {
            inner: Box::new(backend),
        }
    }
}

impl fmt::Debug for DynBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynBackend")
            .field("node", self.inner.node_id())
            .finish_non_exhaustive()
    }
}

/// A backend's error with its type erased. [`DynError::downcast_ref`] gets
/// the original back (a `RedisNodeError`, a `MockError`, ...); `Display` and
/// `source` are the original's.
///
/// # Examples
///
/// ```
/// use redlock_core::DynError;
///
/// let err = DynError::new(std::io::Error::other("reset"));
/// assert_eq!(err.to_string(), "reset");
/// assert!(err.downcast_ref::<std::io::Error>().is_some());
/// ```
pub struct DynError(Box<dyn Error + Send + Sync + 'static>);

impl DynError {
    /// Boxes `error`.
    ///
    /// # Examples
    ///
    /// See [`DynError`].
    #[must_use]
    pub fn new<E: Error + Send + Sync + 'static>(error: E) -> Self {
        DynError(Box::new(error))
    }

    /// The original error, if it is an `E`.
    ///
    /// # Examples
    ///
    /// See [`DynError`].
    #[must_use]
    pub fn downcast_ref<E: Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref()
    }

    /// The original error, boxed.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = redlock_core::DynError::new(std::io::Error::other("reset"));
    /// let original: Box<dyn std::error::Error + Send + Sync> = err.into_inner();
    /// assert_eq!(original.to_string(), "reset");
    /// ```
    #[must_use]
    pub fn into_inner(self) -> Box<dyn Error + Send + Sync + 'static> {
        self.0
    }
}

impl fmt::Debug for DynError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for DynError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl Error for DynError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

/// [`LockBackend`] with the error erased: object safe.
trait Erased: Send + Sync {
    fn node_id(&self) -> &NodeId;
    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, DynError>;
    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, DynError>;
    fn release(&self, claim: &Claim) -> Result<bool, DynError>;
    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, DynError>;
    fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, DynError>>);
    fn attach(&self, sink: ConnectionSink);
    fn release_feed(&self) -> Option<Box<dyn ReleaseFeed>>;
    fn inspect(&self, key: &str, watcher: Option<Watcher>) -> Option<Result<KeyView, DynError>>;
}

impl<B: LockBackend> Erased for B {
    fn node_id(&self) -> &NodeId {
        LockBackend::node_id(self)
    }
    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, DynError> {
        LockBackend::acquire(self, claim, ttl, fence).map_err(DynError::new)
    }
    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, DynError> {
        LockBackend::extend(self, claim, ttl).map_err(DynError::new)
    }
    fn release(&self, claim: &Claim) -> Result<bool, DynError> {
        LockBackend::release(self, claim).map_err(DynError::new)
    }
    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, DynError> {
        LockBackend::raise_fence(self, claim, at_least).map_err(DynError::new)
    }
    fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, DynError>>) {
        // The backend's own batching (one Redis write per batch) is kept.
        let mut typed = Vec::with_capacity(requests.len());
        LockBackend::run_batch(self, requests, &mut typed);
        out.extend(typed.into_iter().map(|r| r.map_err(DynError::new)));
    }
    fn attach(&self, sink: ConnectionSink) {
        LockBackend::attach(self, sink);
    }
    fn release_feed(&self) -> Option<Box<dyn ReleaseFeed>> {
        LockBackend::release_feed(self)
    }
    fn inspect(&self, key: &str, watcher: Option<Watcher>) -> Option<Result<KeyView, DynError>> {
        LockBackend::inspect(self, key, watcher).map(|r| r.map_err(DynError::new))
    }
}

impl LockBackend for DynBackend {
    type Error = DynError;

    fn node_id(&self) -> &NodeId {
        self.inner.node_id()
    }
    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, DynError> {
        self.inner.acquire(claim, ttl, fence)
    }
    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, DynError> {
        self.inner.extend(claim, ttl)
    }
    fn release(&self, claim: &Claim) -> Result<bool, DynError> {
        self.inner.release(claim)
    }
    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, DynError> {
        self.inner.raise_fence(claim, at_least)
    }
    fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, DynError>>) {
        self.inner.run_batch(requests, out);
    }
    fn attach(&self, sink: ConnectionSink) {
        self.inner.attach(sink);
    }
    fn release_feed(&self) -> Option<Box<dyn ReleaseFeed>> {
        self.inner.release_feed()
    }
    fn inspect(&self, key: &str, watcher: Option<Watcher>) -> Option<Result<KeyView, DynError>> {
        self.inner.inspect(key, watcher)
    }
}

/// Opens `addresses` with backend `B` ([`Connect`](crate::Connect)) and
/// erases their type: `Redlock::connect` for a [`DynRedlock`].
///
/// # Errors
///
/// As [`Redlock::connect`]: an address `B` cannot use, or a bad setting.
///
/// # Examples
///
/// ```
/// use redlock_core::{connect_dyn, DynRedlock};
/// use redlock_mock::MockNode;
///
/// // In production: connect_dyn::<redlock_redis::RedisBackend, _>(urls, timeout).
/// let locks: DynRedlock = connect_dyn::<MockNode, _>(["a", "b", "c"], std::time::Duration::from_millis(50))?;
/// assert_eq!(locks.quorum(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn connect_dyn<B, I>(
    addresses: I,
    node_timeout: Duration,
) -> Result<DynRedlock, crate::ConnectError<DynError>>
where
    B: crate::Connect + Fencing + SharedClaims + Inspect + 'static,
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    crate::types::timing::check_node_timeout(node_timeout)?;
    let mut backends = Vec::new();
    for address in addresses {
        let backend = B::connect(address.as_ref(), node_timeout)
            .map_err(|e| crate::ConnectError::Address(DynError::new(e)))?;
        backends.push(DynBackend::new(backend));
    }
    Ok(Redlock::builder(backends)
        .node_timeout(node_timeout)
        .build()?)
}

impl Fencing for DynBackend {}

impl Inspect for DynBackend {}

impl SharedClaims for DynBackend {}
