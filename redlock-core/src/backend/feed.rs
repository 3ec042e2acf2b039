//! Release notifications from the nodes: a backend that can tell when a
//! waited-for key was released ([`ReleaseFeed`]) reports it to a
//! [`ReleaseSink`], which raises the [`Flag`] of each caller of this
//! manager that waits for that key.

use crate::Resources;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// A node's way of telling a manager that a waited-for key was released:
/// see [`LockBackend::release_feed`](crate::LockBackend::release_feed).
///
/// # Examples
///
/// A feed that a test drives by hand:
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use redlock_core::backend::{ReleaseFeed, ReleaseSink};
///
/// #[derive(Default, Clone)]
/// struct Manual(Arc<Mutex<Option<ReleaseSink>>>);
///
/// impl ReleaseFeed for Manual {
///     fn start(&self, sink: ReleaseSink) {
///         *self.0.lock().unwrap() = Some(sink);
///     }
/// }
///
/// let feed = Manual::default();
/// feed.start(ReleaseSink::detached());
/// let sink = feed.0.lock().unwrap().clone();
/// if let Some(sink) = sink {
///     // The node's waiting mark on "orders" named manager 42.
///     sink.released("orders", Some(42));
/// }
/// ```
pub trait ReleaseFeed: Send + Sync {
    /// Starts delivering to `sink`, in the background, the keys this node
    /// released while another manager's waiting mark was on them (see
    /// [`Queued`](crate::backend::Queued)), until
    /// [`ReleaseSink::is_closed`]. Called at most once per manager, from a
    /// caller's thread when a caller first waits: must return at once
    /// (connect in the background), and call [`ReleaseSink::listening`]
    /// each time it starts listening (it may have missed releases before).
    /// A feed may report more releases than that (costing the woken caller
    /// an extra round) or miss some (costing it the rest of its random
    /// pause).
    fn start(&self, sink: ReleaseSink);
}

/// Where a [`ReleaseFeed`] reports released keys.
///
/// # Examples
///
/// See [`ReleaseFeed`].
#[derive(Clone)]
pub struct ReleaseSink {
    pub(crate) hub: Arc<Hub>,
    /// The node whose feed this is (its index in the manager).
    pub(crate) node: Option<usize>,
}

impl ReleaseSink {
    /// A sink that goes nowhere (for a backend used without a manager, and
    /// for tests).
    ///
    /// # Examples
    ///
    /// ```
    /// let sink = redlock_core::backend::ReleaseSink::detached();
    /// sink.released("k", None);
    /// assert!(!sink.is_closed());
    /// ```
    #[must_use]
    pub fn detached() -> Self {
        ReleaseSink {
            hub: Arc::new(Hub::new(0, Duration::ZERO)),
            node: None,
        }
    }

    /// `key` was released while the manager `waiter` (the id of
    /// [`Queued::manager`](crate::backend::Queued::manager), from the
    /// node's waiting mark) waited for it: if that is this manager, its
    /// callers that wait for the key try again now. The others keep their
    /// pause: the nodes would make them give way to `waiter` anyway, and
    /// waking every waiter at once only makes them collide. `None` (the
    /// waiter unknown) wakes every caller of this manager that waits for
    /// the key.
    ///
    /// # Examples
    ///
    /// See [`ReleaseFeed`].
    pub fn released(&self, key: &str, waiter: Option<u64>) {
        self.hub.released(key, waiter, self.node);
    }

    /// The id this manager's waiting marks carry
    /// ([`Queued::manager`](crate::backend::Queued::manager)): a feed that
    /// can listen for one manager's notifications alone (a channel per
    /// manager) listens for this one.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::backend::ReleaseSink::detached().manager(), 0);
    /// ```
    #[must_use]
    pub fn manager(&self) -> u64 {
        self.hub.manager
    }

    /// A release by this manager found `key` waited for by another
    /// manager: its next `lock` of the key waits in the nodes' line
    /// instead of taking the key first. For a feed that only hears its own
    /// manager's notifications (which would otherwise tell it that others
    /// wait); a feed that hears every manager's needs not call it.
    ///
    /// # Examples
    ///
    /// ```
    /// redlock_core::backend::ReleaseSink::detached().waited("k");
    /// ```
    pub fn waited(&self, key: &str) {
        if !self.is_closed() {
            self.hub.contend(key, false);
        }
    }

    /// The feed listens from now on (it subscribed, or subscribed again
    /// after losing its connection): it may have missed releases before,
    /// so every caller of this manager that waits now tries again at once.
    ///
    /// # Examples
    ///
    /// ```
    /// let sink = redlock_core::backend::ReleaseSink::detached();
    /// sink.listening();
    /// ```
    pub fn listening(&self) {
        if !self.is_closed() {
            for (_, _, flag) in self.hub.waiters.lock().iter() {
                flag.raise(None);
            }
        }
    }

    /// Whether the manager is gone: the feed should stop (close its
    /// connection, end its thread).
    ///
    /// # Examples
    ///
    /// See [`ReleaseSink::detached`].
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.hub.closed.load(Ordering::Acquire)
    }
}

impl fmt::Debug for ReleaseSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReleaseSink")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// What the sinks and the manager's waiting callers share.
pub(crate) struct Hub {
    /// This manager's id in the nodes' waiting marks.
    pub(crate) manager: u64,
    pub(crate) closed: AtomicBool,
    pub(crate) next_id: AtomicU64,
    /// The callers waiting now, with their keys.
    pub(crate) waiters: Mutex<Vec<(u64, Resources, Arc<Flag>)>>,
    /// Keys waited for lately: until when that counts, and when one was
    /// last reported released.
    pub(crate) contended: Mutex<HashMap<String, Seen>>,
    /// How long a key counts as contended after a sign of it.
    pub(crate) memory: Duration,
    /// Notifications heard, and pauses they ended.
    pub(crate) heard: AtomicU64,
    pub(crate) woke: AtomicU64,
}

/// What a manager knows of a contended key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    pub(crate) until: Instant,
    pub(crate) released: Option<Instant>,
}

/// The longest list of contended keys kept; past it, expired ones go.
pub(crate) const CONTENDED_KEPT: usize = 1024;

impl Hub {
    pub(crate) fn new(manager: u64, memory: Duration) -> Self {
        Hub {
            manager,
            closed: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            waiters: Mutex::new(Vec::new()),
            contended: Mutex::new(HashMap::new()),
            memory,
            heard: AtomicU64::new(0),
            woke: AtomicU64::new(0),
        }
    }

    pub(crate) fn released(&self, key: &str, waiter: Option<u64>, node: Option<usize>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        self.heard.fetch_add(1, Ordering::Relaxed);
        let ours = waiter.is_none_or(|w| w == self.manager);
        self.contend(key, ours);
        if !ours {
            return;
        }
        for (_, keys, flag) in self.waiters.lock().iter() {
            if keys.keys().iter().any(|k| k == key) {
                flag.raise(node);
            }
        }
    }

    /// Remembers `key` as contended, and with `released` as released now.
    pub(crate) fn contend(&self, key: &str, released: bool) {
        let now = Instant::now();
        let until = now + self.memory;
        let mut contended = self.contended.lock();
        if let Some(seen) = contended.get_mut(key) {
            seen.until = until;
            if released {
                seen.released = Some(now);
            }
            return;
        }
        if contended.len() >= CONTENDED_KEPT {
            contended.retain(|_, seen| seen.until > now);
            if contended.len() >= CONTENDED_KEPT {
                return;
            }
        }
        contended.insert(
            key.to_owned(),
            Seen {
                until,
                released: released.then_some(now),
            },
        );
    }
}

/// Raised when a waited-for key was released; read by the waiting caller.
pub(crate) struct Flag {
    pub(crate) raised: AtomicBool,
    /// The nodes that reported a release since [`Flag::reports`] was last
    /// reset (one bit each; a report of no node, or of a node past the
    /// 64th, sets every bit).
    pub(crate) reported: AtomicU64,
    pub(crate) thread: Thread,
}

impl Flag {
    pub(crate) fn raise(&self, node: Option<usize>) {
        let bit = match node {
            Some(i) if i < 64 => 1 << i,
            _ => u64::MAX,
        };
        self.reported.fetch_or(bit, Ordering::AcqRel);
        self.raised.store(true, Ordering::Release);
        self.thread.unpark();
    }

    /// Whether the flag was raised since the last call.
    pub(crate) fn take(&self) -> bool {
        self.raised.swap(false, Ordering::AcqRel)
    }

    /// How many nodes reported a release since the last reset; `reset`
    /// starts counting again.
    pub(crate) fn reports(&self, reset: bool) -> u32 {
        let bits = if reset {
            self.reported.swap(0, Ordering::AcqRel)
        } else {
            self.reported.load(Ordering::Acquire)
        };
        bits.count_ones()
    }
}
