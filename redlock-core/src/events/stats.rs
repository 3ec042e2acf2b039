//! What [`Redlock::stats`](crate::Redlock::stats) returns: snapshots of
//! the counters.

use std::fmt;

use super::*;
use crate::NodeId;

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

/// `2 granted, 0 refused of 3 (quorum 2), failed: mock-1 (timed out)`: for
/// logs.
///
/// # Examples
///
/// ```
/// # use std::time::Duration;
/// use std::sync::{Arc, Mutex};
/// use redlock_core::{Event, EventHandler, Redlock};
///
/// #[derive(Default)]
/// struct Last(Mutex<Option<String>>);
/// impl EventHandler for Last {
///     fn on_event(&self, event: &Event<'_>) {
///         if let Event::Call { last_round: Some(round), .. } = event {
///             *self.0.lock().unwrap() = Some(round.to_string());
///         }
///     }
/// }
///
/// let cluster = redlock_mock::MockCluster::new(3);
/// let last = Arc::new(Last::default());
/// let locks = Redlock::builder(cluster.backends()).events(last.clone()).build()?;
/// cluster.node(1).go_down();
/// cluster.node(2).go_down();
/// assert!(locks.try_lock("k", Duration::from_secs(1)).is_err());
/// assert_eq!(
///     last.0.lock().unwrap().as_deref(),
///     Some("1 granted, 0 refused of 3 (quorum 2), failed: mock-1 (backend error), mock-2 (backend error)")
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl fmt::Display for RoundSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} granted, {} refused of {} (quorum {})",
            self.granted, self.refused, self.nodes, self.quorum
        )?;
        if !self.failed.is_empty() {
            write!(f, ", failed: {}", FailedNodes(&self.failed))?;
        }
        Ok(())
    }
}

/// Failed nodes as `a (backend), b (timed out)`.
pub(crate) struct FailedNodes<'a>(pub(crate) &'a [(NodeId, FailureKind)]);

impl fmt::Display for FailedNodes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (node, kind)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{node} ({kind})")?;
        }
        Ok(())
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
    /// Releases the node failed that were kept for another try, each
    /// counted once, at its first failure (see [`Event::ReleasesKept`]).
    pub releases_kept: u64,
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
    /// Batches the manager's poller sent to a node for several callers at
    /// once and read the answers of itself, without the node's worker
    /// thread (see [`Builder::poller`](crate::Builder::poller)).
    pub polled_batches: u64,
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
