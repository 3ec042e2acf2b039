//! One in-memory lock node with faults on demand.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};
use redlock_core::backend::{
    AcquireOutcome, Claim, LockBackend, ReleaseFeed, ReleaseSink, Request, Response, Started,
    Token, TOKEN_LEN,
};
use redlock_core::decide::FENCE_LIMIT;
use redlock_core::{Clock, NodeId, Ttl};

use crate::marks::Marks;

/// The error of a [`MockNode`].
///
/// # Examples
///
/// ```
/// use redlock_mock::{MockError, MockNode};
/// let node = MockNode::new("n0");
/// node.go_down();
/// # use redlock_core::{Resources, Ttl};
/// # use redlock_core::backend::{LockBackend, Claim, Token};
/// # let claim = Claim::new(Resources::one("k")?, Token::from_bytes([1; 20]));
/// let err = node.release(&claim).unwrap_err();
/// assert!(matches!(err, MockError::Down { .. }));
/// assert_eq!(err.to_string(), "mock node n0 is down");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MockError {
    /// The node was taken down with [`MockNode::go_down`].
    Down {
        /// The node.
        node: NodeId,
    },
    /// A fenced acquire found a fencing counter that cannot rise, at or
    /// above [`FENCE_LIMIT`](redlock_core::decide::FENCE_LIMIT) `- 1` (put
    /// there by [`MockNode::set_fence`]), or a raise asked for more than
    /// the limit: refused before anything was written, as a Redis node
    /// refuses it (`FENCEMAX`).
    FenceExhausted {
        /// The node.
        node: NodeId,
    },
}

impl fmt::Display for MockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MockError::Down { node } => write!(f, "mock node {node} is down"),
            MockError::FenceExhausted { node } => write!(
                f,
                "mock node {node}: a fencing counter is at its largest value and cannot rise"
            ),
        }
    }
}

impl std::error::Error for MockError {}

/// Counts of what a [`MockNode`] executed, for assertions in tests.
///
/// # Examples
///
/// ```
/// let node = redlock_mock::MockNode::new("n0");
/// assert_eq!(node.stats().ops, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MockStats {
    /// Requests answered, successfully or with an error.
    pub ops: u64,
    /// Acquires granted.
    pub granted: u64,
    /// Acquires refused because a key was held.
    pub refused: u64,
    /// Releases that found our token.
    pub released: u64,
    /// Extends that found our token.
    pub extended: u64,
    /// Requests answered with an error (the node was down).
    pub errors: u64,
}

#[derive(Debug)]
struct Entry {
    token: [u8; TOKEN_LEN],
    expires_at: Instant,
}

#[derive(Debug, Default)]
struct State {
    keys: HashMap<String, Entry>,
    /// Each key's live shared holders ([`Claim::shared`]), by token, with
    /// their expiry: never empty.
    readers: HashMap<String, HashMap<[u8; TOKEN_LEN], Instant>>,
    fences: HashMap<String, u64>,
    /// Waiting marks of queued acquires: key, manager id, expiry.
    marks: Marks<String, Instant>,
    down: bool,
    frozen: bool,
    latency: Duration,
    clock_ahead: Duration,
    stats: MockStats,
    /// The managers told of released keys that were waited for.
    feeds: Vec<ReleaseSink>,
}

struct Inner {
    id: NodeId,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    changed: Condvar,
}

/// An in-memory lock node, thread-safe, implementing
/// [`LockBackend`](redlock_core::backend::LockBackend) with the same semantics as the
/// Redis backend: SET-if-absent with expiry, compare-and-delete,
/// compare-and-expire, multi-key all-or-none, and per-resource fencing
/// counters that never expire, and the waiting marks of queued acquires
/// ([`Queued`](redlock_core::backend::Queued)) for fairness between managers.
///
/// Cloning gives another handle to the same node, so a test can keep one to
/// inject faults while the manager owns another. Expiry follows the node's
/// clock (real by default; see [`MockNode::with_clock`]).
///
/// # Faults
///
/// [`go_down`](Self::go_down) / [`come_up`](Self::come_up) (requests fail at
/// once), [`freeze`](Self::freeze) / [`thaw`](Self::thaw) (requests block until
/// thawed, as a SIGSTOPped server), [`set_latency`](Self::set_latency) (real
/// time added before each request), [`restart`](Self::restart) (all keys and
/// counters lost, as a restart without persistence) and
/// [`jump_clock`](Self::jump_clock) (the node's clock jumps forward, so keys
/// expire early).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::Redlock;
/// use redlock_mock::MockNode;
///
/// let nodes: Vec<MockNode> = (0..3).map(|i| MockNode::new(format!("n{i}"))).collect();
/// let locks = Redlock::new(nodes.clone())?;
/// let lock = locks.try_lock("k", Duration::from_secs(5))?;
/// // A round returns once a quorum answered; flush lets the rest catch up.
/// assert!(locks.flush(Duration::from_secs(5)));
/// assert!(nodes.iter().all(|n| n.is_locked("k")));
/// lock.release()?;
/// assert!(locks.flush(Duration::from_secs(5)));
/// assert!(nodes.iter().all(|n| !n.is_locked("k")));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct MockNode {
    inner: Arc<Inner>,
}

impl fmt::Debug for MockNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockNode")
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

impl MockNode {
    /// A node named `name` on the system clock.
    ///
    /// # Examples
    ///
    /// ```
    /// let node = redlock_mock::MockNode::new("n0");
    /// # use redlock_core::backend::LockBackend;
    /// assert_eq!(node.node_id().as_str(), "n0");
    /// ```
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_clock(name, Arc::new(redlock_core::SystemClock))
    }

    /// A node whose keys expire by `clock` (e.g. a shared
    /// [`ManualClock`](crate::ManualClock)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// let clock = redlock_mock::ManualClock::new();
    /// let node = redlock_mock::MockNode::with_clock("n0", Arc::new(clock.clone()));
    /// ```
    #[must_use]
    pub fn with_clock(name: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        MockNode {
            inner: Arc::new(Inner {
                id: NodeId::new(name),
                clock,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            }),
        }
    }

    /// Makes every request fail at once with [`MockError::Down`]. Keys are kept.
    ///
    /// # Examples
    ///
    /// ```
    /// let node = redlock_mock::MockNode::new("n0");
    /// node.go_down();
    /// assert!(node.is_down());
    /// node.come_up();
    /// assert!(!node.is_down());
    /// ```
    pub fn go_down(&self) {
        self.state().down = true;
    }

    /// Ends [`MockNode::go_down`].
    ///
    /// # Examples
    ///
    /// ```
    /// let node = redlock_mock::MockNode::new("n0");
    /// node.go_down();
    /// node.come_up();
    /// assert!(!node.is_down());
    /// ```
    pub fn come_up(&self) {
        self.state().down = false;
    }

    /// Whether the node is down.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!redlock_mock::MockNode::new("n0").is_down());
    /// ```
    #[must_use]
    pub fn is_down(&self) -> bool {
        self.state().down
    }

    /// Makes every request block until [`MockNode::thaw`], like a server
    /// stopped with SIGSTOP.
    ///
    /// # Examples
    ///
    /// ```
    /// let node = redlock_mock::MockNode::new("n0");
    /// node.freeze();
    /// node.thaw();
    /// ```
    pub fn freeze(&self) {
        self.state().frozen = true;
    }

    /// Ends [`MockNode::freeze`]; blocked requests proceed.
    ///
    /// # Examples
    ///
    /// ```
    /// let node = redlock_mock::MockNode::new("n0");
    /// node.freeze();
    /// node.thaw(); // blocked requests proceed
    /// ```
    pub fn thaw(&self) {
        self.state().frozen = false;
        self.inner.changed.notify_all();
    }

    /// Adds `latency` of real time before each request is executed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let node = redlock_mock::MockNode::new("n0");
    /// node.set_latency(Duration::from_millis(5));
    /// ```
    pub fn set_latency(&self, latency: Duration) {
        self.state().latency = latency;
    }

    /// Loses every key and fencing counter, as a restart without persistence.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlock_core::{Resources, Ttl};
    /// # use redlock_core::backend::{LockBackend, Claim, Token};
    /// let node = redlock_mock::MockNode::new("n0");
    /// # let claim = Claim::new(Resources::one("k")?, Token::from_bytes([1; 20]));
    /// node.acquire(&claim, Ttl::new(Duration::from_secs(9))?, false)?;
    /// node.restart();
    /// assert!(!node.is_locked("k"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restart(&self) {
        let mut state = self.state();
        state.keys.clear();
        state.readers.clear();
        state.fences.clear();
        state.marks.clear();
    }

    /// Moves this node's clock forward by `by` (cumulative): its keys expire
    /// that much earlier than their holders expect.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let node = redlock_mock::MockNode::new("n0");
    /// node.jump_clock(Duration::from_secs(60));
    /// ```
    pub fn jump_clock(&self, by: Duration) {
        let mut state = self.state();
        state.clock_ahead = state.clock_ahead.saturating_add(by);
    }

    /// Whether `key` currently holds any live lock token.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!redlock_mock::MockNode::new("n0").is_locked("k"));
    /// ```
    #[must_use]
    pub fn is_locked(&self, key: &str) -> bool {
        let state = self.state();
        let now = self.now(&state);
        state.keys.get(key).is_some_and(|e| e.expires_at > now)
    }

    /// The token stored under `key`, if the key is live.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(redlock_mock::MockNode::new("n0").holder("k").is_none());
    /// ```
    #[must_use]
    pub fn holder(&self, key: &str) -> Option<Token> {
        let state = self.state();
        let now = self.now(&state);
        state
            .keys
            .get(key)
            .filter(|e| e.expires_at > now)
            .map(|e| Token::from_bytes(e.token))
    }

    /// The number of live lock keys: keys with an exclusive holder, and
    /// keys with live shared holders ([`MockNode::readers`]).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_mock::MockNode::new("n0").live_keys(), 0);
    /// ```
    #[must_use]
    pub fn live_keys(&self) -> usize {
        let state = self.state();
        let now = self.now(&state);
        let readers = state
            .readers
            .values()
            .filter(|holders| holders.values().any(|e| *e > now))
            .count();
        state.keys.values().filter(|e| e.expires_at > now).count() + readers
    }

    /// How many live shared holders (readers of a read-write lock) `key`
    /// has.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_mock::MockNode::new("n0").readers("k"), 0);
    /// ```
    #[must_use]
    pub fn readers(&self, key: &str) -> usize {
        let state = self.state();
        let now = self.now(&state);
        state
            .readers
            .get(key)
            .map_or(0, |holders| holders.values().filter(|e| **e > now).count())
    }

    /// The manager first in `key`'s waiting line (see
    /// [`Queued`](redlock_core::backend::Queued)), if a live one waits:
    /// the id its manager's `lock` callers put in their queued acquires.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_mock::MockNode::new("n0").first_waiting("k"), None);
    /// ```
    #[must_use]
    pub fn first_waiting(&self, key: &str) -> Option<u64> {
        let mut state = self.state();
        let now = self.now(&state);
        state.marks.purge(now);
        state.marks.owner(&key.to_owned())
    }

    /// The fencing counter of `key` (0 if never incremented).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_mock::MockNode::new("n0").fence("k"), 0);
    /// ```
    #[must_use]
    pub fn fence(&self, key: &str) -> u64 {
        self.state().fences.get(key).copied().unwrap_or(0)
    }

    /// Sets the fencing counter of `key`, as another writer of the node
    /// could: for tests of a counter that cannot rise (see
    /// [`MockError::FenceExhausted`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let node = redlock_mock::MockNode::new("n0");
    /// node.set_fence("k", 7);
    /// assert_eq!(node.fence("k"), 7);
    /// ```
    pub fn set_fence(&self, key: &str, value: u64) {
        self.state().fences.insert(key.to_owned(), value);
    }

    /// What the node has executed so far.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_mock::MockNode::new("n0").stats().granted, 0);
    /// ```
    #[must_use]
    pub fn stats(&self) -> MockStats {
        self.state().stats
    }

    /// Blocks until the node has answered at least `ops` requests in all, or
    /// `timeout` (real time) passes; returns whether it got there.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let node = redlock_mock::MockNode::new("n0");
    /// assert!(node.wait_for_ops(0, Duration::ZERO));
    /// assert!(!node.wait_for_ops(1, Duration::from_millis(1)));
    /// ```
    #[must_use]
    pub fn wait_for_ops(&self, ops: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.state();
        while state.stats.ops < ops {
            if self
                .inner
                .changed
                .wait_until(&mut state, deadline)
                .timed_out()
            {
                return state.stats.ops >= ops;
            }
        }
        true
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock()
    }

    fn now(&self, state: &State) -> Instant {
        let now = self.inner.clock.now();
        now.checked_add(state.clock_ahead).unwrap_or(now)
    }

    /// Applies latency and freezing, then runs `op` on the state if the node
    /// is up. On a thread inside [`LockBackend::start`], a node with
    /// latency or frozen runs nothing and says so in `WOULD_WAIT`.
    fn call<T>(&self, op: impl FnOnce(&mut State, Instant) -> T) -> Result<T, MockError> {
        let mut state = self.state();
        if NO_WAIT.get() {
            if state.frozen || !state.latency.is_zero() {
                WOULD_WAIT.set(true);
                return Err(MockError::Down {
                    node: self.inner.id.clone(),
                });
            }
        } else {
            let latency = state.latency;
            if !latency.is_zero() {
                drop(state);
                std::thread::sleep(latency);
                state = self.state();
            }
            while state.frozen {
                self.inner.changed.wait(&mut state);
            }
        }
        state.stats.ops += 1;
        let result = if state.down {
            state.stats.errors += 1;
            Err(MockError::Down {
                node: self.inner.id.clone(),
            })
        } else {
            let now = self.now(&state);
            state.keys.retain(|_, e| e.expires_at > now);
            state.readers.retain(|_, holders| {
                holders.retain(|_, expires_at| *expires_at > now);
                !holders.is_empty()
            });
            Ok(op(&mut state, now))
        };
        drop(state);
        self.inner.changed.notify_all();
        result
    }
}

std::thread_local! {
    /// Set while [`LockBackend::start`] runs a request: it must not wait.
    static NO_WAIT: Cell<bool> = const { Cell::new(false) };
    /// Set when a request under `NO_WAIT` would have waited (and did nothing).
    static WOULD_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// An answer a mock node gave at once ([`LockBackend::start`]).
struct Ready(Result<Response, MockError>);

impl Started<MockError> for Ready {
    fn finish(self: Box<Self>, _deadline: Instant) -> Result<Response, MockError> {
        self.0
    }
}

fn holds(state: &State, claim: &Claim) -> bool {
    let token = claim.token().as_bytes();
    if claim.is_shared() {
        return claim.keys().iter().all(|k| {
            state
                .readers
                .get(k)
                .is_some_and(|holders| holders.contains_key(token))
        });
    }
    claim
        .keys()
        .iter()
        .all(|k| state.keys.get(k).is_some_and(|e| &e.token == token))
}

impl LockBackend for MockNode {
    type Error = MockError;

    fn supports_fencing(&self) -> bool {
        true
    }

    fn supports_shared(&self) -> bool {
        true
    }

    fn node_id(&self) -> &NodeId {
        &self.inner.id
    }

    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, MockError> {
        let id = &self.inner.id;
        self.call(|state, now| {
            if fence
                && claim
                    .keys()
                    .iter()
                    .any(|k| state.fences.get(k).is_some_and(|&c| c >= FENCE_LIMIT - 1))
            {
                state.stats.errors += 1;
                return Err(MockError::FenceExhausted { node: id.clone() });
            }
            state.marks.purge(now);
            let queued = claim.queue();
            let mark_expiry = queued.map_or(now, |q| later(now, q.mark_ttl().as_duration()));
            let expires_at = now.checked_add(ttl.as_duration()).unwrap_or(now + Ttl::MAX);
            if claim.is_shared() {
                // A read: gives way to other managers' marks and refuses
                // while a writer holds a key, never marking.
                if state.marks.yields_to_others(claim.keys(), queued)
                    || claim.keys().iter().any(|k| state.keys.contains_key(k))
                {
                    state.stats.refused += 1;
                    return Ok(AcquireOutcome::HeldByOther);
                }
                for key in claim.keys() {
                    state
                        .readers
                        .entry(key.clone())
                        .or_default()
                        .insert(*claim.token().as_bytes(), expires_at);
                }
            } else {
                if state.marks.gives_way(claim.keys(), queued, mark_expiry) {
                    state.stats.refused += 1;
                    return Ok(AcquireOutcome::HeldByOther);
                }
                if claim
                    .keys()
                    .iter()
                    .any(|k| state.keys.contains_key(k) || state.readers.contains_key(k))
                {
                    state.marks.refused(claim.keys(), queued, mark_expiry);
                    state.stats.refused += 1;
                    return Ok(AcquireOutcome::HeldByOther);
                }
                for key in claim.keys() {
                    state.keys.insert(
                        key.clone(),
                        Entry {
                            token: *claim.token().as_bytes(),
                            expires_at,
                        },
                    );
                }
            }
            let mut top = None;
            for key in claim.keys() {
                if fence {
                    let counter = state.fences.entry(key.clone()).or_default();
                    *counter += 1;
                    top = top.max(Some(*counter));
                }
            }
            // Every key's counter ends at the largest, so that a later lock
            // on any one of them gets a larger value.
            if let Some(top) = top {
                for key in claim.keys() {
                    state.fences.insert(key.clone(), top);
                }
            }
            state.stats.granted += 1;
            Ok(AcquireOutcome::Granted { fence: top })
        })
        .and_then(|outcome| outcome)
    }

    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, MockError> {
        self.call(|state, now| {
            if !holds(state, claim) {
                return false;
            }
            let expires_at = now.checked_add(ttl.as_duration()).unwrap_or(now + Ttl::MAX);
            let token = claim.token().as_bytes();
            for key in claim.keys() {
                if claim.is_shared() {
                    if let Some(e) = state.readers.get_mut(key).and_then(|h| h.get_mut(token)) {
                        *e = expires_at;
                    }
                } else if let Some(entry) = state.keys.get_mut(key) {
                    entry.expires_at = expires_at;
                }
            }
            state.stats.extended += 1;
            true
        })
    }

    fn release(&self, claim: &Claim) -> Result<bool, MockError> {
        let (held, waited, feeds) = self.call(|state, now| {
            let held = holds(state, claim);
            state.marks.purge(now);
            if !claim.is_shared() {
                // The lock's own release: its manager leaves the lines.
                state
                    .marks
                    .left(claim.keys(), claim.queue().map(|q| q.manager()));
            }
            let mut waited = Vec::new();
            let token = claim.token().as_bytes();
            for key in claim.keys() {
                let freed = if claim.is_shared() {
                    // The last reader's release frees the key.
                    let (removed, last) = state.readers.get_mut(key).map_or((false, false), |h| {
                        (h.remove(token).is_some(), h.is_empty())
                    });
                    if last {
                        state.readers.remove(key);
                    }
                    removed && last
                } else if state.keys.get(key).is_some_and(|e| &e.token == token) {
                    state.keys.remove(key);
                    true
                } else {
                    false
                };
                if freed {
                    if let Some(owner) = state.marks.owner(key) {
                        waited.push((key.clone(), owner));
                    }
                }
            }
            if held {
                state.stats.released += 1;
            }
            let feeds = if waited.is_empty() {
                Vec::new()
            } else {
                state.feeds.retain(|sink| !sink.is_closed());
                state.feeds.clone()
            };
            (held, waited, feeds)
        })?;
        // Told after the node's lock is let go, as Redis publishes.
        for sink in &feeds {
            for (key, owner) in &waited {
                sink.released(key, Some(*owner));
            }
        }
        Ok(held)
    }

    /// Runs the request at once on the calling thread, unless the node has
    /// latency or is frozen (`None`: the manager's node worker waits for
    /// it instead), so that a manager's lone caller does on mock nodes what
    /// it does on Redis.
    fn start<'a>(&'a self, request: Request<'a>) -> Option<Box<dyn Started<MockError> + 'a>> {
        /// Ends `NO_WAIT` however the request ends.
        struct Waits;
        impl Drop for Waits {
            fn drop(&mut self) {
                NO_WAIT.set(false);
            }
        }
        NO_WAIT.set(true);
        WOULD_WAIT.set(false);
        let waits = Waits;
        let result = request.run_on(self);
        drop(waits);
        if WOULD_WAIT.replace(false) {
            return None;
        }
        Some(Box::new(Ready(result)))
    }

    /// Tells the managers of released keys that other managers wait for
    /// (see [`LockBackend::release_feed`]).
    fn release_feed(&self) -> Option<Box<dyn ReleaseFeed>> {
        Some(Box::new(Feed(self.clone())))
    }

    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, MockError> {
        if at_least > FENCE_LIMIT {
            return Err(MockError::FenceExhausted {
                node: self.inner.id.clone(),
            });
        }
        self.call(|state, _| {
            if !holds(state, claim) {
                return false;
            }
            for key in claim.keys() {
                let counter = state.fences.entry(key.clone()).or_default();
                *counter = (*counter).max(at_least);
            }
            true
        })
    }
}

/// A node's release notifications, for one manager.
struct Feed(MockNode);

impl ReleaseFeed for Feed {
    fn start(&self, sink: ReleaseSink) {
        self.0.state().feeds.push(sink.clone());
        sink.listening();
    }
}

fn later(now: Instant, after: Duration) -> Instant {
    now.checked_add(after).unwrap_or(now + Ttl::MAX)
}

/// Opens a fresh in-memory node on the system clock named after the address;
/// the timeout is unused (the node never blocks unless frozen).
impl redlock_core::backend::Connect for MockNode {
    fn connect(address: &str, _node_timeout: Duration) -> Result<Self, MockError> {
        Ok(MockNode::new(address))
    }
}
