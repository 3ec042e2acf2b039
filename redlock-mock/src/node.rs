//! One in-memory lock node with faults on demand.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};
use redlock_core::backend::{
    AcquireOutcome, Claim, Fencing, Inspect, KeyView, LockBackend, ReleaseFeed, ReleaseSink,
    Request, Response, SharedClaims, Started, Token, Watcher, TOKEN_LEN,
};
use redlock_core::keys::{FENCE_SUFFIX, FORMAT_SUFFIX, READERS_SUFFIX, WAIT_SUFFIX};
use redlock_core::model::{
    inspection, Command, ErrorReply, Node, Outcome, Published, Value, READERS_MARKER,
};
use redlock_core::{Clock, NodeId, Ttl};

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
    /// An acquire found the resource's keys in another wire format: its
    /// format key (`R` + [`FORMAT_SUFFIX`](redlock_core::keys::FORMAT_SUFFIX),
    /// written by another version of the library, or here by
    /// [`MockNode::set_string`]) holds something but
    /// [`WIRE_FORMAT`](redlock_core::keys::WIRE_FORMAT): refused before
    /// anything was written, as a Redis node refuses it (`WIREFORMAT`).
    /// Releases and extends still work.
    ///
    /// ```
    /// use redlock_mock::{MockError, MockNode};
    /// # use redlock_core::{Resources, Ttl};
    /// # use redlock_core::backend::{LockBackend, Claim, Token};
    /// let node = MockNode::new("n0");
    /// node.set_string("job\u{1f}format", b"2");
    /// let claim = Claim::new(Resources::one("job")?, Token::from_bytes([1; 20]));
    /// let err = node.acquire(&claim, Ttl::new(std::time::Duration::from_secs(1))?, true).unwrap_err();
    /// assert!(matches!(err, MockError::WireFormat { found: Some(2), .. }));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "mock node n0: the resource's keys are in wire format 2, this client speaks 1: \
    ///      upgrade every client of it together"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    WireFormat {
        /// The node.
        node: NodeId,
        /// The format found, when the value is a decimal of 1 to 9 digits
        /// without a leading zero (else `None`: another value, or a key of
        /// another type).
        found: Option<u32>,
    },
    /// The node answered with another error, as a Redis master would (a
    /// helper key of another shape: `WRONGTYPE`), or with a reply the
    /// request never gets.
    Refused {
        /// The node.
        node: NodeId,
        /// The error's code (`WRONGTYPE`, `ERR`, ...).
        code: &'static str,
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
            MockError::WireFormat { node, found } => {
                write!(f, "mock node {node}: the resource's keys are in ")?;
                match found {
                    Some(found) => write!(f, "wire format {found}")?,
                    None => f.write_str("an unknown wire format")?,
                }
                write!(
                    f,
                    ", this client speaks {}: upgrade every client of it together",
                    redlock_core::keys::WIRE_FORMAT
                )
            }
            MockError::Refused { node, code } => {
                write!(f, "mock node {node} refused the request: {code}")
            }
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

#[derive(Debug, Default)]
struct State {
    /// The node's keys and what its commands do: the reference model of a
    /// Redis master ([`redlock_core::model`]), the one every backend is
    /// held to. Helper keys live among the lock keys, as on Redis.
    node: Node,
    down: bool,
    frozen: bool,
    latency: Duration,
    clock_ahead: Duration,
    stats: MockStats,
    /// The managers told of released keys that were waited for.
    feeds: Vec<ReleaseSink>,
    /// The millisecond [`MockNode::now`] read last and the instants it
    /// spans (`from..to`): a reading in it needs no conversion.
    tick: Cell<Option<Tick>>,
}

/// One millisecond of a node's clock: the instants `from..to` read as `ms`.
#[derive(Debug, Clone, Copy)]
struct Tick {
    from: Instant,
    to: Instant,
    ms: i64,
}

/// The release channels' prefix the node's commands carry (what the
/// model publishes to; the node tells its feeds directly).
const CHANNEL: &[u8] = b"redlock-mock";

/// How many requests between two sweeps of expired keys (Redis expires
/// keys in the background too): keys nobody touches again do not pile up.
const SWEEP_EVERY: u64 = 1024;

/// The node's clock in milliseconds at its creation (any value works;
/// this one keeps every time positive).
const START_MS: i64 = 1 << 40;

struct Inner {
    id: NodeId,
    clock: Arc<dyn Clock>,
    /// The clock's reading at [`START_MS`].
    epoch: Instant,
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
                epoch: clock.now(),
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
    /// stopped with SIGSTOP. A read of who holds a key
    /// ([`LockBackend::inspect`]) fails at once instead, as one that timed
    /// out would.
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
        self.state().node.keys.clear();
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
        self.holder(key).is_some()
    }

    /// The token stored under `key`, if the key is live (the value's first
    /// [`TOKEN_LEN`] bytes: a manager's identity may follow, see
    /// [`Claim::value`](redlock_core::backend::Claim::value)).
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
        match state.node.keys.entry(now, key.as_bytes()).map(|e| &e.value) {
            Some(Value::Str(v)) => v
                .get(..TOKEN_LEN)
                .and_then(|token| <[u8; TOKEN_LEN]>::try_from(token).ok())
                .map(Token::from_bytes),
            _ => None,
        }
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
        let lock = |key: &[u8], value: &Value| match value {
            Value::Str(v) => !is_helper(key) && (v.len() >= TOKEN_LEN || v == READERS_MARKER),
            Value::Zset(_) => false,
        };
        state
            .node
            .keys
            .live(now)
            .filter(|(key, entry)| lock(key, &entry.value))
            .count()
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
        let readers = format!("{key}{READERS_SUFFIX}");
        match state
            .node
            .keys
            .entry(now, readers.as_bytes())
            .map(|e| &e.value)
        {
            Some(Value::Zset(members)) => members.iter().filter(|(s, _)| *s > now as f64).count(),
            _ => 0,
        }
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
        let state = self.state();
        let now = self.now(&state);
        let line = format!("{key}{WAIT_SUFFIX}");
        let first = state.node.first_in_line(now, line.as_bytes())?;
        std::str::from_utf8(first).ok()?.parse().ok()
    }

    /// The live managers in `key`'s waiting line, in order: writers and
    /// readers of other managers wait there (each by its manager's id).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(redlock_mock::MockNode::new("n0").waiting("k").is_empty());
    /// ```
    #[must_use]
    pub fn waiting(&self, key: &str) -> Vec<u64> {
        let state = self.state();
        let now = self.now(&state);
        let line = format!("{key}{WAIT_SUFFIX}");
        let ids = state.node.in_line(now, line.as_bytes());
        ids.into_iter()
            .filter_map(|id| std::str::from_utf8(id).ok()?.parse().ok())
            .collect()
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
        let state = self.state();
        let now = self.now(&state);
        let counter = format!("{key}{FENCE_SUFFIX}");
        match state
            .node
            .keys
            .entry(now, counter.as_bytes())
            .map(|e| &e.value)
        {
            Some(Value::Str(v)) => std::str::from_utf8(v)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            _ => 0,
        }
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
        let mut state = self.state();
        let now = self.now(&state);
        let counter = format!("{key}{FENCE_SUFFIX}");
        let value = value.to_string();
        state
            .node
            .keys
            .set(now, counter.as_bytes(), value.as_bytes(), None);
    }

    /// Sets the string `key` to `value` without a TTL, as another client of
    /// the node could (`SET key value`): for tests of keys another writer
    /// left, such as another wire format's marker (see
    /// [`MockError::WireFormat`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let node = redlock_mock::MockNode::new("n0");
    /// node.set_string("k\u{1f}fence", b"7");
    /// assert_eq!(node.fence("k"), 7);
    /// ```
    pub fn set_string(&self, key: &str, value: &[u8]) {
        let mut state = self.state();
        let now = self.now(&state);
        state.node.keys.set(now, key.as_bytes(), value, None);
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

    /// The node's clock in milliseconds (the model's time).
    fn now(&self, state: &State) -> i64 {
        let now = self.inner.clock.now();
        let now = if state.clock_ahead.is_zero() {
            now
        } else {
            now.checked_add(state.clock_ahead).unwrap_or(now)
        };
        // Most requests fall in the millisecond of the one before.
        if let Some(tick) = state.tick.get() {
            if tick.from <= now && now < tick.to {
                return tick.ms;
            }
        }
        let epoch = self.inner.epoch;
        let since = now.saturating_duration_since(epoch);
        let millis = since.as_millis();
        let ms = START_MS.saturating_add(i64::try_from(millis).unwrap_or(i64::MAX / 2));
        // The instants that read as the same millisecond, when after the
        // epoch (before it, every instant reads as the epoch's).
        if now >= epoch {
            let from = u64::try_from(millis)
                .ok()
                .and_then(|m| epoch.checked_add(Duration::from_millis(m)));
            let to = from.and_then(|from| from.checked_add(Duration::from_millis(1)));
            if let (Some(from), Some(to)) = (from, to) {
                state.tick.set(Some(Tick { from, to, ms }));
            }
        }
        ms
    }

    /// Applies latency and freezing, then runs `op` on the state if the node
    /// is up. On a thread inside [`LockBackend::start`], a node with
    /// latency or frozen runs nothing and says so in `WOULD_WAIT`.
    fn call<T>(&self, op: impl FnOnce(&mut State, i64) -> T) -> Result<T, MockError> {
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
            if state.stats.ops % SWEEP_EVERY == 0 {
                state.node.keys.purge(now);
            }
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
    fn finish(self: Box<Self>, _deadline: Instant, out: &mut Vec<Result<Response, MockError>>) {
        out.push(self.0);
    }
}

/// Whether `key` is a helper key (a counter, a waiting line or place, a
/// reader set: [`redlock_core::keys`]) rather than a lock.
fn is_helper(key: &[u8]) -> bool {
    let ends = |suffix: &str| key.ends_with(suffix.as_bytes());
    let place = [WAIT_SUFFIX.as_bytes(), b":"].concat();
    ends(FENCE_SUFFIX)
        || ends(FORMAT_SUFFIX)
        || ends(WAIT_SUFFIX)
        || ends(READERS_SUFFIX)
        || key.windows(place.len()).any(|w| w == place.as_slice())
}

impl MockNode {
    /// Runs `request` as the model of a Redis master runs the command the
    /// Redis backend sends for it; tells the feeds what it published.
    fn run(&self, request: Request<'_>) -> Result<Response, MockError> {
        let id = &self.inner.id;
        let refused = |code| MockError::Refused {
            node: id.clone(),
            code,
        };
        let Some(command) = Command::of(&request, CHANNEL) else {
            return Err(refused("ERR"));
        };
        let (outcome, published, feeds) = self.call(|state, now| {
            let mut published = Vec::new();
            let reply = state.node.apply(now, &command, &mut published);
            let outcome = command.outcome(reply);
            let stats = &mut state.stats;
            match outcome {
                Ok(Outcome::Done(Response::Acquire(AcquireOutcome::Granted { .. }))) => {
                    stats.granted += 1;
                }
                Ok(Outcome::Done(Response::Acquire(AcquireOutcome::HeldByOther))) => {
                    stats.refused += 1;
                }
                Ok(Outcome::Done(Response::Held(true)))
                    if matches!(request, Request::Extend { .. }) =>
                {
                    stats.extended += 1;
                }
                Ok(Outcome::Released { held: true, .. }) => stats.released += 1,
                Ok(Outcome::Refused(_)) | Err(_) => stats.errors += 1,
                Ok(_) => {}
            }
            let feeds = if published.is_empty() {
                Vec::new()
            } else {
                state.feeds.retain(|sink| !sink.is_closed());
                state.feeds.clone()
            };
            (outcome, published, feeds)
        })?;
        // Told after the node's lock is let go, as Redis publishes.
        for sink in &feeds {
            for Published { message, .. } in &published {
                if let Some((manager, key)) = released(message) {
                    sink.released(&key, Some(manager));
                }
            }
        }
        match outcome {
            Ok(Outcome::Done(response)) => Ok(response),
            Ok(Outcome::Released { held, .. }) => Ok(Response::Held(held)),
            Ok(Outcome::Refused(ErrorReply::Script("FENCEMAX"))) => {
                Err(MockError::FenceExhausted { node: id.clone() })
            }
            Ok(Outcome::Refused(ErrorReply::WireFormat(found))) => Err(MockError::WireFormat {
                node: id.clone(),
                found,
            }),
            Ok(Outcome::Refused(e)) => Err(refused(e.code())),
            Err(_) => Err(refused("ERR")),
        }
    }
}

/// A release message, `<manager> <key>`: who is told, about which key.
fn released(message: &[u8]) -> Option<(u64, String)> {
    let space = message.iter().position(|b| *b == b' ')?;
    let manager = std::str::from_utf8(&message[..space]).ok()?.parse().ok()?;
    let key = String::from_utf8_lossy(&message[space + 1..]).into_owned();
    Some((manager, key))
}

/// In-memory nodes keep fencing counters and shared claims as Redis does
/// (the same node model).
impl Fencing for MockNode {}

impl Inspect for MockNode {}

impl SharedClaims for MockNode {}

impl LockBackend for MockNode {
    type Error = MockError;

    fn node_id(&self) -> &NodeId {
        &self.inner.id
    }

    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, MockError> {
        match self.run(Request::Acquire { claim, ttl, fence })? {
            Response::Acquire(outcome) => Ok(outcome),
            Response::Held(_) => Err(MockError::Refused {
                node: self.inner.id.clone(),
                code: "ERR",
            }),
        }
    }

    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, MockError> {
        self.held(Request::Extend { claim, ttl })
    }

    fn release(&self, claim: &Claim) -> Result<bool, MockError> {
        self.held(Request::Release { claim })
    }

    /// Runs the request at once on the calling thread, unless the node has
    /// latency or is frozen (`None`: the manager's node worker waits for
    /// it instead), so that a manager's lone caller does on mock nodes what
    /// it does on Redis. One request at a time ([`LockBackend::starts_batches`] is `false`):
    /// a batch whose later request would wait could not undo the earlier
    /// ones.
    fn start<'a>(&'a self, requests: &[Request<'a>]) -> Option<Box<dyn Started<MockError> + 'a>> {
        let [request] = requests else {
            return None;
        };
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
    /// The node model's inspect command ([`Command::Inspect`]), with the
    /// node's faults: down, an error; frozen, an error at once (a read
    /// never waits for a thaw, so that callers polling a frozen node do
    /// not pile up threads behind it); slow, its latency.
    fn inspect(&self, key: &str, watcher: Option<Watcher>) -> Option<Result<KeyView, MockError>> {
        if self.state().frozen {
            return Some(Err(MockError::Down {
                node: self.inner.id.clone(),
            }));
        }
        let command = Command::Inspect { key, watcher };
        let reply = self.call(|state, now| state.node.apply(now, &command, &mut Vec::new()));
        Some(reply.and_then(|reply| {
            inspection(reply).ok_or_else(|| MockError::Refused {
                node: self.inner.id.clone(),
                code: "ERR",
            })
        }))
    }

    fn release_feed(&self) -> Option<Box<dyn ReleaseFeed>> {
        Some(Box::new(Feed(self.clone())))
    }

    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, MockError> {
        self.held(Request::RaiseFence { claim, at_least })
    }
}

impl MockNode {
    /// Runs a request answered by whether the lock was held.
    fn held(&self, request: Request<'_>) -> Result<bool, MockError> {
        match self.run(request)? {
            Response::Held(held) => Ok(held),
            Response::Acquire(_) => Err(MockError::Refused {
                node: self.inner.id.clone(),
                code: "ERR",
            }),
        }
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

/// Opens a fresh in-memory node on the system clock named after the address;
/// the timeout is unused (the node never blocks unless frozen).
impl redlock_core::backend::Connect for MockNode {
    fn connect(address: &str, _node_timeout: Duration) -> Result<Self, MockError> {
        Ok(MockNode::new(address))
    }
}
