//! The event hook: [`EventHandler`] and the [`Event`]s it receives.

use std::fmt;
use std::time::Duration;

use super::*;
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
    /// A release: confirmed by [`Lock::release`](crate::Lock::release)
    /// (its outcome is the nodes' answer), or sent by a guard's `Drop`
    /// without waiting for the nodes (its outcome is `Ok` once sent).
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
    /// Releases a node failed were kept for another try: the node's worker
    /// tries each again, with pauses from 10 ms doubling up to 1 s, until
    /// the node answers it or every key it could delete has expired. Each
    /// failed release is counted once, at its first failure. Counted in
    /// [`NodeStats::releases_kept`]; sent on the node's worker thread.
    ReleasesKept {
        /// The node.
        node: &'a NodeId,
        /// How many releases were kept (since the last such event).
        count: u64,
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
    /// Each node that answered (granted or refused) before the decision,
    /// in the order the answers came, with the time from the round's start
    /// to its answer (manager's clock, read when the answer was handled).
    /// Nodes that failed, or answered after the decision, are not in it.
    pub answers: Vec<(NodeId, Duration)>,
}
