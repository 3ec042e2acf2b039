//! What a manager does, as it happens: an event hook for logs and metrics
//! ([`EventHandler`], r2d2's `HandleEvent` is the model) and cheap counters
//! read at any time ([`Redlock::stats`](crate::Redlock::stats)).
//!
//! With no hook set, nothing is built or sent: the counters are plain
//! relaxed atomics, each per-node one written by that node's worker alone.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::{LockError, LostReason, NodeId, Resources};

/// Receives a manager's [`Event`]s. Called on the thread that saw the
/// event (a caller, a node's worker, the keeper), which waits for it: keep
/// it quick. What it may call is listed on
/// [`Builder::events`](crate::Builder::events).
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use redlock_core::{Event, EventHandler, Redlock};
///
/// #[derive(Default)]
/// struct CountFailures(AtomicUsize);
/// impl EventHandler for CountFailures {
///     fn on_event(&self, event: &Event<'_>) {
///         if let Event::NodeFailed { .. } = event {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// let cluster = redlock_mock::MockCluster::new(3);
/// let failures = Arc::new(CountFailures::default());
/// let locks = Redlock::builder(cluster.backends()).events(failures.clone()).build()?;
/// cluster.node(0).go_down();
/// locks.try_lock("k", Duration::from_secs(5))?.release()?;
/// // A quorum decided the calls; let the down node's answers come in too
/// // (false: it is down, and keeps the release for another try).
/// assert!(!locks.flush(Duration::from_secs(5)));
/// assert!(failures.0.load(Ordering::Relaxed) >= 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait EventHandler: Send + Sync + 'static {
    /// One event. The default does nothing.
    fn on_event(&self, event: &Event<'_>) {
        let _ = event;
    }
}

/// The hook that does nothing.
///
/// # Examples
///
/// ```
/// use redlock_core::{Event, EventHandler, NoEvents};
/// NoEvents.on_event(&Event::QueueFull { node: &redlock_core::NodeId::new("a") });
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEvents;

impl EventHandler for NoEvents {}

/// Which kind of call a manager made.
///
/// # Examples
///
/// ```
/// assert_eq!(redlock_core::CallKind::Lock.to_string(), "lock");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallKind {
    /// An acquisition: `try_lock`, `lock`, `lock_timeout`, `lock_deadline`,
    /// `with_lock*`.
    Lock,
    /// An extension, by the caller or the keeper.
    Extend,
    /// A release (confirmed by `release`, or fire-and-forget by `Drop`).
    Release,
}

impl fmt::Display for CallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CallKind::Lock => "lock",
            CallKind::Extend => "extend",
            CallKind::Release => "release",
        })
    }
}

/// How a call ended.
///
/// # Examples
///
/// ```
/// assert_eq!(redlock_core::CallOutcome::Contended.to_string(), "contended");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallOutcome {
    /// It succeeded: the lock is held (or extended, or released).
    Ok,
    /// Another holder had it (or, for extend and release, our token was
    /// gone on too many nodes).
    Contended,
    /// Too many nodes failed to reach a quorum.
    NoQuorum,
    /// A quorum granted too slowly to leave any validity.
    ValidityExhausted,
    /// `lock_timeout` / `lock_deadline` gave up.
    Timeout,
    /// Anything else (bad input, no randomness, cancelled, ...).
    Error,
}

impl CallOutcome {
    /// How a call with this result ended.
    pub(crate) fn of<T, E>(result: &Result<T, LockError<E>>) -> Self {
        match result {
            Ok(_) => CallOutcome::Ok,
            Err(LockError::Contended(_) | LockError::NotHeld(_)) => CallOutcome::Contended,
            Err(LockError::NoQuorum(_)) => CallOutcome::NoQuorum,
            Err(LockError::ValidityExhausted { .. }) => CallOutcome::ValidityExhausted,
            Err(LockError::Timeout { .. }) => CallOutcome::Timeout,
            Err(_) => CallOutcome::Error,
        }
    }
}

impl fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Contended => "contended",
            CallOutcome::NoQuorum => "no quorum",
            CallOutcome::ValidityExhausted => "validity exhausted",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Error => "error",
        })
    }
}

/// Why a node's request failed.
///
/// # Examples
///
/// ```
/// assert_eq!(redlock_core::FailureKind::TimedOut.to_string(), "timed out");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The backend returned an error.
    Backend,
    /// The answer came after the per-node timeout, or the request was
    /// dropped unsent because nobody waited for it any more.
    TimedOut,
    /// The node's request queue was full.
    Overloaded,
    /// The backend panicked (contained).
    Panicked,
    /// The backend's batch left the request unanswered (a backend bug).
    Unanswered,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Backend => "backend error",
            FailureKind::TimedOut => "timed out",
            FailureKind::Overloaded => "queue full",
            FailureKind::Panicked => "panicked",
            FailureKind::Unanswered => "unanswered",
        })
    }
}

/// Something a manager did or saw.
///
/// # Examples
///
/// See [`EventHandler`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A call (all its rounds) ended.
    Call {
        /// What was called.
        kind: CallKind,
        /// On which resources.
        resources: &'a Resources,
        /// How it ended.
        outcome: CallOutcome,
        /// How many rounds it ran (0: it never reached the nodes).
        rounds: u32,
        /// How long it took.
        elapsed: Duration,
        /// For a call that failed after a round: what each node said in
        /// its last round.
        last_round: Option<&'a RoundSummary>,
    },
    /// A round was decided: an acquire, fencing raise, extend or release
    /// round, with its outcome, duration and what each node said.
    Round(&'a RoundRecord),
    /// A node's request failed.
    NodeFailed {
        /// The node.
        node: &'a NodeId,
        /// Why.
        kind: FailureKind,
        /// The backend's error, for [`FailureKind::Backend`] (its `Display`,
        /// which never contains secrets).
        error: Option<&'a (dyn std::error::Error + 'static)>,
        /// Failures in a row on this node, this one included.
        consecutive: u64,
    },
    /// A node answered again after failing.
    NodeRecovered {
        /// The node.
        node: &'a NodeId,
        /// How many requests in a row had failed.
        after_failures: u64,
    },
    /// The keeper extended a kept lock.
    KeptAlive {
        /// The lock's resources.
        resources: &'a Resources,
        /// The new validity.
        validity: Duration,
    },
    /// A held lock was found lost (the keeper could not extend it, its
    /// validity ran out, its hold bound passed, ...).
    Lost {
        /// The lock's resources.
        resources: &'a Resources,
        /// Why.
        reason: LostReason,
    },
    /// A release handed the lock to the next caller waiting in this
    /// manager's local line.
    HandedOff {
        /// The resources.
        resources: &'a Resources,
    },
    /// A node's request queue was full: requests to it fail at once until
    /// it catches up.
    QueueFull {
        /// The node.
        node: &'a NodeId,
    },
    /// The backend reported an error outside any request (see
    /// [`LockBackend::attach`](crate::LockBackend::attach)), such as a
    /// connection pool's background connect failing.
    Connection {
        /// The node.
        node: &'a NodeId,
        /// The error (its `Display` never contains secrets).
        error: &'a (dyn std::error::Error + 'static),
    },
    /// Releases a node failed were dropped instead of being tried again:
    /// a node's worker keeps at most 4096 failed releases for another try,
    /// and drops the oldest first. Their keys on that node (if it had set
    /// them) are freed by their TTL; the other nodes released them as
    /// usual. Counted in [`NodeStats::releases_dropped`]; sent on the
    /// node's worker thread.
    ReleasesDropped {
        /// The node.
        node: &'a NodeId,
        /// How many releases were dropped (since the last such event).
        count: u64,
    },
}

/// What kind of round a [`RoundRecord`] is (also `redlock_core::engine::RoundKind`).
///
/// # Examples
///
/// ```
/// assert_eq!(redlock_core::engine::RoundKind::Acquire.to_string(), "acquire");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RoundKind {
    /// An acquire round.
    Acquire,
    /// A fencing raise round after a won acquire.
    RaiseFence,
    /// An extend round.
    Extend,
    /// A release round.
    Release,
}

impl std::fmt::Display for RoundKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RoundKind::Acquire => "acquire",
            RoundKind::RaiseFence => "raise-fence",
            RoundKind::Extend => "extend",
            RoundKind::Release => "release",
        })
    }
}

/// One decided round: what it was, how it ended, how long it took, and
/// what each node said.
///
/// # Examples
///
/// See [`Machine::poll_round`](crate::engine::Machine::poll_round).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RoundRecord {
    /// The round's kind.
    pub kind: RoundKind,
    /// The resources.
    pub resources: Resources,
    /// Won (a quorum granted, or held for extend and release) or lost;
    /// a round cut short by its timeout counts the silent nodes as failed.
    pub decision: crate::decide::Decision,
    /// From the round's start to its decision (manager's clock).
    pub elapsed: Duration,
    /// The votes and each failed node.
    pub summary: RoundSummary,
}

/// What the nodes said in one round: votes and each failed node.
///
/// # Examples
///
/// See [`Event::Call`]; a summary is only built for a hook.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RoundSummary {
    /// Nodes the round was sent to.
    pub nodes: usize,
    /// Grants a quorum needs.
    pub quorum: usize,
    /// Nodes that granted before the round was decided.
    pub granted: usize,
    /// Nodes that refused (another holder, or our token gone).
    pub refused: usize,
    /// Each failed node, with why.
    pub failed: Vec<(NodeId, FailureKind)>,
}

impl RoundSummary {
    pub(crate) fn of<E>(report: &crate::RoundReport<E>) -> Self {
        RoundSummary {
            nodes: report.nodes(),
            quorum: report.quorum(),
            granted: report.granted(),
            refused: report.refused(),
            failed: report
                .failures()
                .iter()
                .map(|f| (f.node().clone(), FailureKind::of(f.failure())))
                .collect(),
        }
    }
}

impl FailureKind {
    pub(crate) fn of<E>(failure: &crate::NodeFailure<E>) -> Self {
        match failure {
            crate::NodeFailure::Backend(_) => FailureKind::Backend,
            crate::NodeFailure::TimedOut => FailureKind::TimedOut,
            crate::NodeFailure::Overloaded => FailureKind::Overloaded,
            crate::NodeFailure::Panicked => FailureKind::Panicked,
            _ => FailureKind::Unanswered,
        }
    }
}

/// Failure counts of one node, by kind.
///
/// # Examples
///
/// ```
/// let counts = redlock_core::FailureCounts::default();
/// assert_eq!(counts.total(), 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailureCounts {
    /// Backend errors.
    pub backend: u64,
    /// Answers after the per-node timeout, or requests dropped unsent.
    pub timed_out: u64,
    /// Requests turned away by a full queue.
    pub overloaded: u64,
    /// Contained panics.
    pub panicked: u64,
    /// Requests a backend's batch left unanswered.
    pub unanswered: u64,
}

impl FailureCounts {
    /// Every failure.
    ///
    /// # Examples
    ///
    /// See [`FailureCounts`].
    #[must_use]
    pub fn total(&self) -> u64 {
        self.backend + self.timed_out + self.overloaded + self.panicked + self.unanswered
    }
}

/// A snapshot of one node's counters.
///
/// # Examples
///
/// See [`Stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// The node.
    pub node: NodeId,
    /// Requests sent to the node (by its worker, or by a caller alone on
    /// the manager), answered or failed, and requests dropped unsent (see
    /// `queued_past_deadline`).
    pub requests: u64,
    /// Failures, by kind.
    pub failures: FailureCounts,
    /// Failures in a row, up to now (0 once the node answered).
    pub consecutive_failures: u64,
    /// The last backend error's message (it never contains secrets).
    pub last_error: Option<String>,
    /// Requests queued for the node right now.
    pub queue_depth: usize,
    /// Requests still queued for the node's worker when their round
    /// stopped waiting: acquires and extends, dropped unsent, and the
    /// others, sent late. Timeouts that the node's own round trip did not
    /// cause (the worker thread was not scheduled in time, as under CPU
    /// saturation, or the node was behind on earlier requests); included
    /// in `failures.timed_out`, which also counts answers that came late
    /// although the request was sent in time.
    pub queued_past_deadline: u64,
    /// Releases the node failed that were dropped instead of being tried
    /// again, because 4096 newer ones were already kept for it (see
    /// [`Event::ReleasesDropped`]): the node frees their keys by TTL.
    pub releases_dropped: u64,
}

/// A snapshot of the manager's own counters: calls by outcome.
///
/// # Examples
///
/// See [`Stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManagerStats {
    /// Locks acquired.
    pub acquired: u64,
    /// Acquisitions refused because another holder had the lock.
    pub contended: u64,
    /// Calls that failed for want of a quorum of answering nodes.
    pub no_quorum: u64,
    /// `lock_timeout` / `lock_deadline` calls that gave up.
    pub timed_out: u64,
    /// Successful extensions (by callers and the keeper).
    pub extended: u64,
    /// Held locks found lost.
    pub lost: u64,
    /// Local hand-offs to the next caller in a line.
    pub handed_off: u64,
    /// Release notifications received from the nodes (see
    /// [`Builder::wake_ups`](crate::Builder::wake_ups)).
    pub releases_heard: u64,
    /// Waiting callers those notifications woke before the end of their
    /// pause.
    pub woken: u64,
    /// Rounds a caller alone on the manager sent to the nodes and read the
    /// answers of itself, without waking the node worker threads (see
    /// [`LockBackend::start`](crate::backend::LockBackend::start)).
    pub direct_rounds: u64,
}

/// What [`Redlock::stats`](crate::Redlock::stats) returns.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let cluster = redlock_mock::MockCluster::new(3);
/// let locks = redlock_core::Redlock::new(cluster.backends())?;
/// locks.try_lock("k", Duration::from_secs(5))?.release()?;
/// assert!(locks.flush(Duration::from_secs(5)));
/// let stats = locks.stats();
/// assert_eq!(stats.manager.acquired, 1);
/// assert_eq!(stats.nodes.len(), 3);
/// assert!(stats.nodes.iter().all(|n| n.requests == 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// One entry per node, in the manager's order.
    pub nodes: Vec<NodeStats>,
    /// The manager's calls.
    pub manager: ManagerStats,
}

/// One node's live counters, written by its worker.
#[derive(Default)]
pub(crate) struct NodeCounters {
    requests: AtomicU64,
    backend: AtomicU64,
    timed_out: AtomicU64,
    overloaded: AtomicU64,
    panicked: AtomicU64,
    unanswered: AtomicU64,
    consecutive: AtomicU64,
    queued_past_deadline: AtomicU64,
    releases_dropped: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl NodeCounters {
    pub(crate) fn count(&self, kind: Option<FailureKind>) -> u64 {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let Some(kind) = kind else {
            return self.consecutive.swap(0, Ordering::Relaxed);
        };
        let counter = match kind {
            FailureKind::Backend => &self.backend,
            FailureKind::TimedOut => &self.timed_out,
            FailureKind::Overloaded => &self.overloaded,
            FailureKind::Panicked => &self.panicked,
            FailureKind::Unanswered => &self.unanswered,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.consecutive.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Counts a request dropped unsent, still queued past its deadline.
    pub(crate) fn queued_past_deadline(&self) {
        self.queued_past_deadline.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `count` failed releases dropped unsent.
    pub(crate) fn releases_dropped(&self, count: u64) {
        self.releases_dropped.fetch_add(count, Ordering::Relaxed);
    }

    /// Whether the node's latest request failed.
    pub(crate) fn failing(&self) -> bool {
        self.consecutive.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn last_error(&self, message: String) {
        *self.last_error.lock() = Some(message);
    }

    pub(crate) fn snapshot(&self, node: NodeId, queue_depth: usize) -> NodeStats {
        NodeStats {
            node,
            requests: self.requests.load(Ordering::Relaxed),
            failures: FailureCounts {
                backend: self.backend.load(Ordering::Relaxed),
                timed_out: self.timed_out.load(Ordering::Relaxed),
                overloaded: self.overloaded.load(Ordering::Relaxed),
                panicked: self.panicked.load(Ordering::Relaxed),
                unanswered: self.unanswered.load(Ordering::Relaxed),
            },
            consecutive_failures: self.consecutive.load(Ordering::Relaxed),
            last_error: self.last_error.lock().clone(),
            queue_depth,
            queued_past_deadline: self.queued_past_deadline.load(Ordering::Relaxed),
            releases_dropped: self.releases_dropped.load(Ordering::Relaxed),
        }
    }
}

/// Where a backend reports errors it sees outside any request (given to
/// [`LockBackend::attach`](crate::LockBackend::attach) by the manager):
/// they reach the manager's event hook, and the node's last error in
/// [`Redlock::stats`](crate::Redlock::stats). Cheap to clone.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, OnceLock};
/// use redlock_core::NodeId;
/// use redlock_core::backend::ConnectionSink;
///
/// // A backend keeps the sink it was attached to, and reports through it.
/// let kept: Arc<OnceLock<ConnectionSink>> = Arc::default();
/// let sink = ConnectionSink::detached(NodeId::new("a"));
/// let _ = kept.set(sink);
/// if let Some(sink) = kept.get() {
///     sink.report(&std::io::Error::other("connect refused"));
/// }
/// ```
#[derive(Clone)]
pub struct ConnectionSink {
    node: NodeId,
    counters: Arc<NodeCounters>,
    observer: Arc<Observer>,
}

impl ConnectionSink {
    pub(crate) fn new(node: NodeId, counters: Arc<NodeCounters>, observer: Arc<Observer>) -> Self {
        ConnectionSink {
            node,
            counters,
            observer,
        }
    }

    /// A sink that goes nowhere (for a backend used without a manager, and
    /// for tests).
    ///
    /// # Examples
    ///
    /// See [`ConnectionSink`].
    #[must_use]
    pub fn detached(node: NodeId) -> Self {
        ConnectionSink::new(node, Arc::default(), Arc::new(Observer::new(None)))
    }

    /// Reports `error`.
    ///
    /// # Examples
    ///
    /// See [`ConnectionSink`].
    pub fn report(&self, error: &(dyn std::error::Error + 'static)) {
        self.counters.last_error(error.to_string());
        self.observer.emit(|| Event::Connection {
            node: &self.node,
            error,
        });
    }
}

impl fmt::Debug for ConnectionSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionSink")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// The manager's live counters.
#[derive(Default)]
pub(crate) struct ManagerCounters {
    pub(crate) acquired: AtomicU64,
    pub(crate) contended: AtomicU64,
    pub(crate) no_quorum: AtomicU64,
    pub(crate) timed_out: AtomicU64,
    pub(crate) extended: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) handed_off: AtomicU64,
    pub(crate) direct_rounds: AtomicU64,
}

impl ManagerCounters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> ManagerStats {
        ManagerStats {
            acquired: self.acquired.load(Ordering::Relaxed),
            contended: self.contended.load(Ordering::Relaxed),
            no_quorum: self.no_quorum.load(Ordering::Relaxed),
            timed_out: self.timed_out.load(Ordering::Relaxed),
            extended: self.extended.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            handed_off: self.handed_off.load(Ordering::Relaxed),
            releases_heard: 0,
            woken: 0,
            direct_rounds: self.direct_rounds.load(Ordering::Relaxed),
        }
    }
}

/// A manager's hook and counters, shared by its callers, workers and keeper.
pub(crate) struct Observer {
    pub(crate) handler: Option<Arc<dyn EventHandler>>,
    pub(crate) manager: ManagerCounters,
}

impl Observer {
    /// Whether a hook is set (events are built only then).
    pub(crate) fn wants_events(&self) -> bool {
        self.handler.is_some()
    }

    pub(crate) fn new(handler: Option<Arc<dyn EventHandler>>) -> Self {
        Observer {
            handler,
            manager: ManagerCounters::default(),
        }
    }

    /// Sends the event `make` builds, if a hook is set (nothing is built
    /// otherwise).
    #[inline]
    pub(crate) fn emit<'a>(&self, make: impl FnOnce() -> Event<'a>) {
        if let Some(handler) = &self.handler {
            handler.on_event(&make());
        }
    }

    pub(crate) fn snapshot<'a>(
        &self,
        nodes: impl Iterator<Item = (&'a NodeId, &'a NodeCounters, usize)>,
    ) -> Stats {
        Stats {
            nodes: nodes
                .map(|(id, counters, depth)| counters.snapshot(id.clone(), depth))
                .collect(),
            manager: self.manager.snapshot(),
        }
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observer")
            .field("handler", &self.handler.is_some())
            .finish_non_exhaustive()
    }
}

/// An event hook that logs through [`tracing`](https://docs.rs/tracing)
/// (feature `tracing`): node failures, full queues and lost locks at
/// `warn`, a node back at `info`, each call at `debug`, keep-alive
/// extensions at `trace`; nothing at `info` or above on the hot path. With
/// the feature, each call of the manager also runs in a `debug` span named
/// after it (`redlock.try_lock`, `redlock.lock`, `redlock.extend`,
/// `redlock.release`).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use redlock_core::{Redlock, TracingEvents};
/// let cluster = redlock_mock::MockCluster::new(3);
/// let locks = Redlock::builder(cluster.backends())
///     .events(Arc::new(TracingEvents))
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingEvents;

#[cfg(feature = "tracing")]
impl EventHandler for TracingEvents {
    fn on_event(&self, event: &Event<'_>) {
        match event {
            Event::Call {
                kind,
                resources,
                outcome,
                rounds,
                elapsed,
                last_round,
            } => tracing::debug!(
                target: "redlock",
                kind = %kind,
                resources = ?resources.keys(),
                outcome = %outcome,
                rounds,
                elapsed_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
                last_round = ?last_round,
                "call ended"
            ),
            Event::NodeFailed {
                node,
                kind,
                error,
                consecutive,
            } => tracing::warn!(
                target: "redlock",
                node = %node,
                kind = %kind,
                error = error.map(|e| e.to_string()),
                consecutive,
                "node request failed"
            ),
            Event::NodeRecovered {
                node,
                after_failures,
            } => {
                tracing::info!(target: "redlock", node = %node, after_failures, "node answers again")
            }
            Event::KeptAlive {
                resources,
                validity,
            } => tracing::trace!(
                target: "redlock",
                resources = ?resources.keys(),
                validity_ms = u64::try_from(validity.as_millis()).unwrap_or(u64::MAX),
                "kept alive"
            ),
            Event::Lost { resources, reason } => tracing::warn!(
                target: "redlock",
                resources = ?resources.keys(),
                reason = %reason,
                "lock lost"
            ),
            Event::HandedOff { resources } => {
                tracing::trace!(target: "redlock", resources = ?resources.keys(), "handed off");
            }
            Event::QueueFull { node } => {
                tracing::warn!(target: "redlock", node = %node, "node queue full");
            }
            Event::Round(round) => tracing::debug!(
                target: "redlock",
                kind = %round.kind,
                resources = ?round.resources.keys(),
                decision = ?round.decision,
                elapsed_us = u64::try_from(round.elapsed.as_micros()).unwrap_or(u64::MAX),
                granted = round.summary.granted,
                refused = round.summary.refused,
                failed = ?round.summary.failed,
                "round decided"
            ),
            Event::Connection { node, error } => {
                tracing::warn!(target: "redlock", node = %node, error = %error, "connection error");
            }
            Event::ReleasesDropped { node, count } => tracing::warn!(
                target: "redlock",
                node = %node,
                count,
                "failed releases dropped, their keys expire by TTL"
            ),
        }
    }
}

/// A `debug` span around one call of the manager (feature `tracing`).
#[cfg(feature = "tracing")]
macro_rules! call_span {
    ($name:literal, $resources:expr) => {
        let _span = tracing::debug_span!(target: "redlock", $name, resources = ?$resources.keys())
            .entered();
    };
}

/// Nothing without the `tracing` feature.
#[cfg(not(feature = "tracing"))]
macro_rules! call_span {
    ($name:literal, $resources:expr) => {
        let _ = &$resources;
    };
}

pub(crate) use call_span;
