//! The per-node backend contract, for backend authors: [`LockBackend`],
//! the [`Request`]s a manager sends and the [`Response`]s it expects, the
//! [`Claim`] a node stores (resources and token), and [`Connect`] for
//! backends opened from an address.
//!
//! Run `redlock_mock::conformance` (feature `conformance` of `redlock-mock`)
//! against a new backend's nodes.

use std::sync::Arc;
use std::time::Duration;

use crate::{NodeId, Ttl};

pub(crate) mod feed;
pub(crate) mod inspect;

pub use crate::backend::feed::{ReleaseFeed, ReleaseSink};
pub use crate::backend::inspect::{Holder, Inspect, KeyView, Watcher};
pub use crate::events::ConnectionSink;
pub use crate::types::resource::{Claim, Queued};
pub use crate::types::token::{Token, TOKEN_LEN};

/// A node's answer to an acquire request.
///
/// # Examples
///
/// ```
/// use redlock_core::backend::AcquireOutcome;
/// let outcome = AcquireOutcome::Granted { fence: Some(7) };
/// assert!(outcome.is_granted());
/// assert!(!AcquireOutcome::HeldByOther.is_granted());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcquireOutcome {
    /// Every key was free and now holds our token with the requested TTL.
    Granted {
        /// With fencing requested: the node's per-resource counter after
        /// this grant incremented it (the largest, for several keys).
        fence: Option<u64>,
    },
    /// At least one key is held by another token; nothing was changed.
    HeldByOther,
}

impl AcquireOutcome {
    /// Whether the node granted.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(redlock_core::backend::AcquireOutcome::Granted { fence: None }.is_granted());
    /// ```
    #[must_use]
    pub fn is_granted(&self) -> bool {
        matches!(self, AcquireOutcome::Granted { .. })
    }
}

/// One request to a node, as [`LockBackend::run_batch`] receives it.
///
/// New kinds of request may be added; a backend's `run_batch` should send
/// the kinds it knows together and run any other with [`Request::run_on`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{Resources, Ttl};
/// use redlock_core::backend::{Claim, LockBackend, Request, Response, Token};
/// let node = redlock_mock::MockNode::new("n0");
/// let claim = Claim::new(Resources::one("k")?, Token::from_bytes([1; 20]));
/// let ttl = Ttl::new(Duration::from_secs(5))?;
/// let batch = [Request::Acquire { claim: &claim, ttl, fence: false }, Request::Release { claim: &claim }];
/// let mut out = Vec::new();
/// node.run_batch(&batch, &mut out);
/// assert!(matches!(out[1], Ok(Response::Held(true))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Request<'a> {
    /// [`LockBackend::acquire`].
    Acquire {
        /// The lock.
        claim: &'a Claim,
        /// Its time-to-live.
        ttl: Ttl,
        /// Whether to bump and return the fencing counters.
        fence: bool,
    },
    /// [`LockBackend::extend`].
    Extend {
        /// The lock.
        claim: &'a Claim,
        /// The new time-to-live.
        ttl: Ttl,
    },
    /// [`LockBackend::release`].
    Release {
        /// The lock.
        claim: &'a Claim,
    },
    /// [`LockBackend::raise_fence`].
    RaiseFence {
        /// The lock.
        claim: &'a Claim,
        /// The value to raise the counters to.
        at_least: u64,
    },
}

impl Request<'_> {
    /// Runs this request alone on `backend`.
    ///
    /// # Errors
    ///
    /// The backend's error.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlock_core::Resources;
    /// use redlock_core::backend::{Claim, Request, Response, Token};
    /// let node = redlock_mock::MockNode::new("n0");
    /// let claim = Claim::new(Resources::one("k")?, Token::from_bytes([1; 20]));
    /// assert_eq!(Request::Release { claim: &claim }.run_on(&node)?, Response::Held(false));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run_on<B: LockBackend + ?Sized>(self, backend: &B) -> Result<Response, B::Error> {
        Ok(match self {
            Request::Acquire { claim, ttl, fence } => {
                Response::Acquire(backend.acquire(claim, ttl, fence)?)
            }
            Request::Extend { claim, ttl } => Response::Held(backend.extend(claim, ttl)?),
            Request::Release { claim } => Response::Held(backend.release(claim)?),
            Request::RaiseFence { claim, at_least } => {
                Response::Held(backend.raise_fence(claim, at_least)?)
            }
        })
    }
}

/// A node's answer to one [`Request`].
///
/// # Examples
///
/// ```
/// use redlock_core::backend::{AcquireOutcome, Response};
/// let granted = Response::Acquire(AcquireOutcome::Granted { fence: None });
/// assert_ne!(granted, Response::Held(true));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Response {
    /// The answer to an acquire.
    Acquire(AcquireOutcome),
    /// The answer to an extend, release or raise-fence: whether the lock
    /// was held there.
    Held(bool),
}

/// What a caller waiting on several [`Started`] requests at once may wait
/// on for one of them ([`Started::readiness`]).
///
/// # Examples
///
/// ```
/// # #[cfg(unix)] {
/// use redlock_core::backend::Readiness;
/// let socket = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
/// use std::os::fd::AsFd;
/// assert!(matches!(Readiness::On(socket.as_fd()), Readiness::On(_)));
/// # }
/// # Ok::<(), String>(())
/// ```
#[cfg(unix)]
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Readiness<'a> {
    /// [`Started::wait`] returns without waiting on a descriptor: the
    /// answers are in, or failed, or bytes of them are buffered already.
    Now,
    /// [`Started::wait`] reads the answers from this descriptor, and reads
    /// at once what came when it is readable (or failed).
    On(std::os::fd::BorrowedFd<'a>),
    /// Not known: waited for in turn, a short while at a time.
    Unknown,
}

/// The requests [`LockBackend::start`] sent (one, or several in order),
/// whose answers are still to be read.
///
/// # Examples
///
/// A backend that answers at once:
///
/// ```
/// use std::time::Instant;
/// use redlock_core::backend::{Response, Started};
/// struct Ready(Vec<Response>);
/// impl Started<std::io::Error> for Ready {
///     fn finish(
///         self: Box<Self>,
///         _deadline: Instant,
///         out: &mut Vec<Result<Response, std::io::Error>>,
///     ) {
///         out.extend(self.0.into_iter().map(Ok));
///     }
/// }
/// let started: Box<dyn Started<std::io::Error>> = Box::new(Ready(vec![Response::Held(true)]));
/// let mut out = Vec::new();
/// started.finish(Instant::now(), &mut out);
/// assert_eq!(out.pop().and_then(Result::ok), Some(Response::Held(true)));
/// ```
pub trait Started<E> {
    /// How a caller with several requests under way can wait for this one
    /// together with the others, in one readiness wait over all their
    /// descriptors instead of a short while on each in turn. The default
    /// says it cannot ([`Readiness::Unknown`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(unix)] {
    /// use std::time::Instant;
    /// use redlock_core::backend::{Readiness, Response, Started};
    /// struct Nothing;
    /// impl Started<std::io::Error> for Nothing {
    ///     fn finish(self: Box<Self>, _: Instant, _: &mut Vec<Result<Response, std::io::Error>>) {}
    /// }
    /// assert!(matches!(Nothing.readiness(), Readiness::Unknown));
    /// # }
    /// ```
    #[cfg(unix)]
    fn readiness(&self) -> Readiness<'_> {
        Readiness::Unknown
    }

    /// Waits until the answers are in (or failed), so that
    /// [`finish`](Self::finish) will not block, or until `until` passes;
    /// returns whether they are in. Waiting that ends at `until` loses
    /// nothing: a caller with several requests under way waits on each in
    /// turn, a short while at a time, and so is not held by one node that
    /// stopped answering while the others answered. The default says they
    /// are in: `finish` then blocks until the answers come.
    fn wait(&mut self, until: std::time::Instant) -> bool {
        let _ = until;
        true
    }

    /// Reads the answers, waiting at most until `deadline` (and never
    /// beyond the backend's own per-node timeout from the start), and
    /// appends one result per request to `out`, in order: any failure to
    /// get a definite answer from the node is an error. A request whose
    /// answer did not come in time is handled as a timed-out call's (for
    /// Redis: kept in order on its connection, an acquire followed by its
    /// release).
    fn finish(self: Box<Self>, deadline: std::time::Instant, out: &mut Vec<Result<Response, E>>);

    /// The rounds were decided without these answers, and nobody waits for
    /// them any more. A backend that can leave them to be read later
    /// (before anything else on its connection, so that the node still
    /// runs its requests in order) does so without waiting and returns
    /// `true`, appending nothing. The default reads them by `deadline`
    /// into `out`, as [`finish`](Self::finish) does, and returns `false`.
    fn detach(
        self: Box<Self>,
        deadline: std::time::Instant,
        out: &mut Vec<Result<Response, E>>,
    ) -> bool {
        self.finish(deadline, out);
        false
    }
}

/// One lock node (one Redis master, one in-memory mock node, ...).
///
/// # Contract
///
/// - **Bounded time.** Every call returns within the per-node timeout the
///   backend was configured with, whether the node is down, frozen or slow.
///   The manager also stops waiting at its own per-node timeout, but a
///   backend that blocks longer delays every later request to that node.
/// - **Atomic per node.** A multi-key claim is acquired on all its keys or on
///   none; extend and release act only where our token is stored.
/// - **Never panics.** Failures are returned as `Self::Error`. (The manager
///   contains a panic anyway and reports the node as failed.)
/// - **Order.** The manager sends one node's requests one at a time, in the
///   order they were issued, and never sends two at once to the same backend
///   value; implementations may rely on that for pipelining.
/// - **Order survives failures.** The node must execute a backend's requests
///   in the order they were sent, also those whose answer never came: a
///   request that failed with an unknown outcome (a timeout) must never run
///   on the node after a later request. The manager follows every acquire
///   whose answer it did not get with a release; if the acquire could run
///   after that release (say, because it waits on an abandoned connection of
///   a frozen server and the release went on another), it would leave a key
///   nobody releases until its TTL. A Redis backend keeps one connection
///   per node in order and writes releases behind unanswered acquires on it.
/// - **Fairness marks** ([`Queued`]) are optional.
///
/// `Send + Sync` so the manager can drive each node from its own worker
/// thread. Blanket impls make `&B` and `Arc<B>` backends too.
///
/// # Examples
///
/// A minimal single-process backend (see `redlock-mock` for a complete one):
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use std::time::{Duration, Instant};
/// use redlock_core::{NodeId, Redlock, Ttl};
/// use redlock_core::backend::{AcquireOutcome, Claim, LockBackend};
///
/// #[derive(Debug)]
/// struct Memory { id: NodeId, keys: Mutex<HashMap<String, (Vec<u8>, Instant)>> }
///
/// #[derive(Debug)]
/// struct Poisoned;
/// impl std::fmt::Display for Poisoned {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("poisoned") }
/// }
/// impl std::error::Error for Poisoned {}
///
/// impl Memory {
///     fn holds(map: &HashMap<String, (Vec<u8>, Instant)>, key: &str, claim: &Claim) -> bool {
///         matches!(map.get(key), Some((t, exp)) if t == claim.token().as_bytes() && *exp > Instant::now())
///     }
/// }
///
/// impl LockBackend for Memory {
///     type Error = Poisoned;
///     fn node_id(&self) -> &NodeId { &self.id }
///     fn acquire(&self, claim: &Claim, ttl: Ttl, _fence: bool) -> Result<AcquireOutcome, Poisoned> {
///         let mut map = self.keys.lock().map_err(|_| Poisoned)?;
///         let now = Instant::now();
///         if claim.keys().iter().any(|k| matches!(map.get(k), Some((_, exp)) if *exp > now)) {
///             return Ok(AcquireOutcome::HeldByOther);
///         }
///         for k in claim.keys() {
///             map.insert(k.clone(), (claim.token().as_bytes().to_vec(), now + ttl.as_duration()));
///         }
///         Ok(AcquireOutcome::Granted { fence: None })
///     }
///     fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, Poisoned> {
///         let mut map = self.keys.lock().map_err(|_| Poisoned)?;
///         if !claim.keys().iter().all(|k| Self::holds(&map, k, claim)) { return Ok(false); }
///         for k in claim.keys() { map.get_mut(k).expect("checked").1 = Instant::now() + ttl.as_duration(); }
///         Ok(true)
///     }
///     fn release(&self, claim: &Claim) -> Result<bool, Poisoned> {
///         let mut map = self.keys.lock().map_err(|_| Poisoned)?;
///         let held = claim.keys().iter().all(|k| Self::holds(&map, k, claim));
///         for k in claim.keys() {
///             if matches!(map.get(k), Some((t, _)) if t == claim.token().as_bytes()) { map.remove(k); }
///         }
///         Ok(held)
///     }
///     fn raise_fence(&self, claim: &Claim, _at_least: u64) -> Result<bool, Poisoned> {
///         let map = self.keys.lock().map_err(|_| Poisoned)?;
///         Ok(claim.keys().iter().all(|k| Self::holds(&map, k, claim)))
///     }
/// }
///
/// let nodes = (0..3).map(|i| Memory { id: NodeId::new(format!("m{i}")), keys: Mutex::default() });
/// let locks = Redlock::new(nodes)?;
/// let lock = locks.try_lock("report", Duration::from_secs(5))?;
/// assert!(lock.is_valid());
/// lock.release()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait LockBackend: Send + Sync {
    /// The node's error type, reported per node inside
    /// [`LockError`](crate::LockError).
    type Error: std::error::Error + Send + Sync + 'static;

    /// A stable id for errors and duplicate detection. Never contains secrets.
    fn node_id(&self) -> &NodeId;

    /// Stores `claim`'s token under every key with a time-to-live of `ttl`,
    /// only if none of the keys exists (all or none). With `fence`, also
    /// increments each key's durable fencing counter, raises every key's
    /// counter to the largest of them (so a later lock on any one key gets a
    /// larger value) and returns it in [`AcquireOutcome::Granted::fence`].
    ///
    /// # Errors
    ///
    /// Any failure to get a definite answer from the node.
    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, Self::Error>;

    /// Resets every key's time-to-live to `ttl`, only if every key still holds
    /// `claim`'s token. Returns whether it did; never creates a key.
    ///
    /// # Errors
    ///
    /// Any failure to get a definite answer from the node.
    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, Self::Error>;

    /// Deletes every key that still holds `claim`'s token. Returns whether all
    /// of them did (the lock was still held here).
    ///
    /// # Errors
    ///
    /// Any failure to get a definite answer from the node.
    fn release(&self, claim: &Claim) -> Result<bool, Self::Error>;

    /// Raises each key's fencing counter to at least `at_least`, only if every
    /// key still holds `claim`'s token. Returns whether it did. Used to make
    /// fencing tokens rise across holders (see the crate docs on fencing).
    /// A backend with the [`Fencing`] ability implements it; it is sent only
    /// to those, and the default (for the others) answers `false`.
    ///
    /// # Errors
    ///
    /// Any failure to get a definite answer from the node.
    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, Self::Error> {
        let _ = (claim, at_least);
        Ok(false)
    }

    /// Runs `requests` in order, as if one after the other, and appends one
    /// result per request to `out`. The manager hands a node every request
    /// queued for it at once, so a backend that can send them together (a
    /// Redis pipeline: one write, then the replies) serves many callers per
    /// round trip. The default runs them one at a time.
    ///
    /// The whole batch should finish within the per-node timeout; requests
    /// the batch did not answer are reported as failed.
    fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, Self::Error>>) {
        out.extend(requests.iter().map(|request| request.run_on(self)));
    }

    /// Sends `requests` to the node, in order (for Redis, in one write),
    /// without waiting for their answers, which [`Started::finish`] then
    /// reads: a caller alone on its manager sends its round to every node
    /// this way and reads the answers itself, in one thread, instead of
    /// handing the round to the node worker threads (which costs a wake-up
    /// per node and per caller); with several callers, one thread sends
    /// every node all of their requests queued for it this way and reads
    /// the answers (see [`LockBackend::starts_batches`]). `None` (the
    /// default) when the backend cannot send without waiting: another call
    /// on it is under way, it owes the node replies, or it would have to
    /// connect first. The manager then runs the requests on the node's
    /// worker as usual, so `None` is always correct.
    ///
    /// Unlike the other calls, this one may come while another call to the
    /// same backend value is under way (on the node's worker thread); the
    /// order rule still holds for what the node runs. The answers are read
    /// before the next call to this backend from the same thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_core::Resources;
    /// use redlock_core::backend::{Claim, LockBackend, Request, Response, Token};
    /// let node = redlock_mock::MockNode::new("n0");
    /// let claim = Claim::new(Resources::one("k")?, Token::from_bytes([1; 20]));
    /// if let Some(started) = node.start(&[Request::Release { claim: &claim }]) {
    ///     let deadline = Instant::now() + Duration::from_secs(1);
    ///     let mut out = Vec::new();
    ///     started.finish(deadline, &mut out);
    ///     assert_eq!(out.pop().transpose()?, Some(Response::Held(false)));
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn start<'a>(&'a self, requests: &[Request<'a>]) -> Option<Box<dyn Started<Self::Error> + 'a>> {
        let _ = requests;
        None
    }

    /// Whether [`LockBackend::start`] takes several requests at once
    /// (`false`, the default: one at most). When every node's backend
    /// does, a manager with its poller on
    /// ([`Builder::poller`](crate::Builder::poller)) hands the requests of
    /// several callers to one thread of its own, which starts each node's batch and reads the
    /// answers of all nodes, instead of one worker thread per node doing
    /// both; a node that cannot start a batch still gets it through its
    /// worker.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::backend::LockBackend;
    /// assert!(!redlock_mock::MockNode::new("n0").starts_batches());
    /// ```
    fn starts_batches(&self) -> bool {
        false
    }

    /// Called once by the manager when it starts, with a sink for errors
    /// the backend sees outside any request (a connection pool's
    /// background connects, say): they reach the manager's event hook as
    /// [`Event::Connection`](crate::Event::Connection). The default ignores
    /// the sink.
    fn attach(&self, sink: ConnectionSink) {
        let _ = sink;
    }

    /// How this node tells the manager's waiting callers that a key they
    /// wait for was released, so that they try again at once instead of
    /// after their random pause; `None` (the default) when it cannot: its
    /// waiters poll, as the algorithm describes. Asked once, when the
    /// manager starts; the feed is started when a caller first waits. The
    /// Redis backend publishes on a channel from its release script and
    /// listens with one subscriber connection.
    fn release_feed(&self) -> Option<Box<dyn ReleaseFeed>> {
        None
    }

    /// Reads who holds lock key `key` on this node, at one instant, within
    /// the per-node timeout: its value (a [`Claim::value`]), the time it
    /// has left and its resource's fencing counter. `None` (the default)
    /// when the backend cannot; a backend that can also declares
    /// [`Inspect`], which gives its managers
    /// [`Redlock::holder`](crate::Redlock::holder). It may be called while
    /// the node's worker runs another call on the same backend value.
    ///
    /// With a `watcher`, the reader also watches the key from now on for
    /// the watcher's time: a release of the key's lock, when the lock is
    /// an election's ([`Resources::is_watched`](crate::Resources::is_watched)),
    /// tells the watcher through its [release feed](LockBackend::release_feed)
    /// as it tells a waiter. A backend without a feed ignores it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{Resources, Ttl};
    /// use redlock_core::backend::{Claim, LockBackend, Token};
    /// let node = redlock_mock::MockNode::new("n0");
    /// let claim = Claim::new(Resources::one("k")?, Token::from_bytes([1; 20]));
    /// node.acquire(&claim, Ttl::new(Duration::from_secs(5))?, false)?;
    /// let view = node.inspect("k", None).expect("the mock can")?;
    /// assert_eq!(view.value.as_deref(), Some(claim.value()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn inspect(&self, key: &str, watcher: Option<Watcher>) -> Option<Result<KeyView, Self::Error>> {
        let _ = (key, watcher);
        None
    }

    /// Reads, by `deadline`, the answers of requests whose reading was left
    /// to later ([`Started::detach`]), so that every request sent before has
    /// run on the node: a flush ([`Redlock::flush`](crate::Redlock::flush))
    /// calls it on each node's worker. The default does nothing, for a
    /// backend that never leaves an answer unread.
    ///
    /// # Errors
    ///
    /// The node did not answer them by `deadline`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use redlock_core::backend::LockBackend;
    /// let node = redlock_mock::MockNode::new("n0");
    /// assert!(node.catch_up(Instant::now() + Duration::from_secs(1)).is_ok());
    /// ```
    fn catch_up(&self, deadline: std::time::Instant) -> Result<(), Self::Error> {
        let _ = deadline;
        Ok(())
    }
}

macro_rules! forward_backend {
    ($($ty:ty),*) => {$(
        impl<B: LockBackend + ?Sized> LockBackend for $ty {
            type Error = B::Error;
            fn node_id(&self) -> &NodeId {
                (**self).node_id()
            }
            fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, B::Error> {
                (**self).acquire(claim, ttl, fence)
            }
            fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, B::Error> {
                (**self).extend(claim, ttl)
            }
            fn release(&self, claim: &Claim) -> Result<bool, B::Error> {
                (**self).release(claim)
            }
            fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, B::Error> {
                (**self).raise_fence(claim, at_least)
            }
            fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, B::Error>>) {
                (**self).run_batch(requests, out)
            }
            fn start<'a>(&'a self, requests: &[Request<'a>]) -> Option<Box<dyn Started<B::Error> + 'a>> {
                (**self).start(requests)
            }
            fn starts_batches(&self) -> bool {
                (**self).starts_batches()
            }
            fn attach(&self, sink: ConnectionSink) {
                (**self).attach(sink)
            }
            fn release_feed(&self) -> Option<Box<dyn ReleaseFeed>> {
                (**self).release_feed()
            }
            fn inspect(&self, key: &str, watcher: Option<Watcher>) -> Option<Result<KeyView, B::Error>> {
                (**self).inspect(key, watcher)
            }
            fn catch_up(&self, deadline: std::time::Instant) -> Result<(), B::Error> {
                (**self).catch_up(deadline)
            }
        }
        impl<B: Fencing + ?Sized> Fencing for $ty {}
        impl<B: Inspect + ?Sized> Inspect for $ty {}
        impl<B: SharedClaims + ?Sized> SharedClaims for $ty {}
    )*};
}

forward_backend!(&B, Arc<B>, Box<B>);

/// The ability to keep fencing counters: [`LockBackend::acquire`] with
/// `fence` returns the node's counter for the claim's resources (raised by
/// every fenced grant, durable as the locks are) and
/// [`LockBackend::raise_fence`] raises it. Only a manager over a backend
/// that declares it can turn fencing on
/// ([`Builder::fencing`](crate::Builder::fencing)); the conformance suite
/// of `redlock-mock` checks it (`Conformance::with_fencing`).
///
/// A backend declares it with an empty impl:
///
/// ```
/// use redlock_core::backend::{Fencing, SharedClaims};
/// # use redlock_core::{backend::{AcquireOutcome, Claim, LockBackend}, NodeId, Ttl};
/// # struct MyNode(NodeId);
/// # impl LockBackend for MyNode {
/// #     type Error = std::io::Error;
/// #     fn node_id(&self) -> &NodeId { &self.0 }
/// #     fn acquire(&self, _: &Claim, _: Ttl, _: bool) -> Result<AcquireOutcome, Self::Error> { Ok(AcquireOutcome::HeldByOther) }
/// #     fn extend(&self, _: &Claim, _: Ttl) -> Result<bool, Self::Error> { Ok(false) }
/// #     fn release(&self, _: &Claim) -> Result<bool, Self::Error> { Ok(false) }
/// # }
/// impl Fencing for MyNode {}
/// impl SharedClaims for MyNode {}
/// ```
///
/// Without it, turning fencing on does not compile:
///
/// ```compile_fail
/// # use std::time::Duration;
/// # use redlock_core::{backend::{AcquireOutcome, Claim, LockBackend}, NodeId, Redlock, Ttl};
/// # struct MyNode(NodeId);
/// # impl LockBackend for MyNode {
/// #     type Error = std::io::Error;
/// #     fn node_id(&self) -> &NodeId { &self.0 }
/// #     fn acquire(&self, _: &Claim, _: Ttl, _: bool) -> Result<AcquireOutcome, Self::Error> { Ok(AcquireOutcome::HeldByOther) }
/// #     fn extend(&self, _: &Claim, _: Ttl) -> Result<bool, Self::Error> { Ok(false) }
/// #     fn release(&self, _: &Claim) -> Result<bool, Self::Error> { Ok(false) }
/// # }
/// let locks = Redlock::builder(vec![MyNode(NodeId::new("a"))]).fencing(true).build();
/// ```
pub trait Fencing: LockBackend {}

/// The ability to keep shared claims as [`Claim::shared`] describes: any
/// number of readers, or one writer, per key. Read-write locks need it:
/// [`Redlock::rwlock`](crate::Redlock::rwlock) exists only for a manager
/// over a backend that declares it; the conformance suite of
/// `redlock-mock` checks it (`Conformance::with_shared_claims`).
///
/// # Examples
///
/// See [`Fencing`]. Without it, a read-write lock does not compile:
///
/// ```compile_fail
/// # use redlock_core::{backend::{AcquireOutcome, Claim, LockBackend}, NodeId, Redlock, Ttl};
/// # struct MyNode(NodeId);
/// # impl LockBackend for MyNode {
/// #     type Error = std::io::Error;
/// #     fn node_id(&self) -> &NodeId { &self.0 }
/// #     fn acquire(&self, _: &Claim, _: Ttl, _: bool) -> Result<AcquireOutcome, Self::Error> { Ok(AcquireOutcome::HeldByOther) }
/// #     fn extend(&self, _: &Claim, _: Ttl) -> Result<bool, Self::Error> { Ok(false) }
/// #     fn release(&self, _: &Claim) -> Result<bool, Self::Error> { Ok(false) }
/// # }
/// let locks = Redlock::new(vec![MyNode(NodeId::new("a"))]).unwrap();
/// let doc = locks.rwlock("doc");
/// ```
pub trait SharedClaims: LockBackend {}

/// A backend that can be opened from an address string (a Redis URL, say), so
/// that [`Redlock::connect`](crate::Redlock::connect) works for it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::Redlock;
/// use redlock_core::backend::Connect;
/// use redlock_mock::MockNode;
///
/// // The mock opens a fresh in-memory node named after the address.
/// let locks: Redlock<MockNode> = Redlock::connect(["a", "b", "c"])?;
/// assert_eq!(locks.nodes().map(|n| n.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Connect: LockBackend + Sized {
    /// Opens the node at `address`, bounding every later I/O by
    /// `node_timeout`. Must not wait for the node to be reachable: a node
    /// that is down at start is a failed node in each round, not a failure
    /// to build the manager.
    ///
    /// # Errors
    ///
    /// An address the backend cannot parse or use.
    fn connect(address: &str, node_timeout: Duration) -> Result<Self, Self::Error>;

    /// Two of `backends` (their indices, the smaller first) that reach the
    /// same node under different ids, when the backend can tell (for Redis:
    /// the same server under two host names, or two databases of one
    /// server). [`Builder::connect`](crate::Builder::connect) then fails
    /// with [`ConfigError::SameNode`](crate::ConfigError::SameNode). It may
    /// ask the nodes, at most one node timeout in all; a node that cannot
    /// be asked counts as distinct. Defaults to `None`: no check.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::backend::Connect;
    /// use redlock_mock::MockNode;
    /// let nodes = [MockNode::new("a"), MockNode::new("b")];
    /// assert_eq!(MockNode::same_node(&nodes), None);
    /// ```
    fn same_node(backends: &[Self]) -> Option<(usize, usize)> {
        let _ = backends;
        None
    }
}
