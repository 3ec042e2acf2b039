//! The live counters behind [`Stats`](super::Stats): relaxed atomics, each
//! per-node one written by that node's worker alone, and the hook.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::*;
use crate::NodeId;

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
    releases_kept: AtomicU64,
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

    /// Counts `count` failed releases kept for another try.
    pub(crate) fn releases_kept(&self, count: u64) {
        self.releases_kept.fetch_add(count, Ordering::Relaxed);
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
            releases_kept: self.releases_kept.load(Ordering::Relaxed),
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
    pub(crate) polled_batches: AtomicU64,
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
            polled_batches: self.polled_batches.load(Ordering::Relaxed),
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
