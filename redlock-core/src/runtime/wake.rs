//! Waiters woken by the nodes instead of polling: a backend that can tell
//! when a waited-for key was released ([`ReleaseFeed`]) reports it to a
//! [`ReleaseSink`], and the callers of this manager that wait for that key
//! between rounds start their next round at once.
//!
//! The notifications only shorten pauses: a missed or late one costs the
//! random pause the algorithm has anyway, a spurious one an extra round.
//! Safety never depends on them.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::Resources;

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
    hub: Arc<Hub>,
    /// The node whose feed this is (its index in the manager).
    node: Option<usize>,
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
struct Hub {
    /// This manager's id in the nodes' waiting marks.
    manager: u64,
    closed: AtomicBool,
    next_id: AtomicU64,
    /// The callers waiting now, with their keys.
    waiters: Mutex<Vec<(u64, Resources, Arc<Flag>)>>,
    /// Keys waited for lately: until when that counts, and when one was
    /// last reported released.
    contended: Mutex<HashMap<String, Seen>>,
    /// How long a key counts as contended after a sign of it.
    memory: Duration,
    /// Notifications heard, and pauses they ended.
    heard: AtomicU64,
    woke: AtomicU64,
}

/// What a manager knows of a contended key.
#[derive(Debug, Clone, Copy)]
struct Seen {
    until: Instant,
    released: Option<Instant>,
}

/// The longest list of contended keys kept; past it, expired ones go.
const CONTENDED_KEPT: usize = 1024;

impl Hub {
    fn new(manager: u64, memory: Duration) -> Self {
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

    fn released(&self, key: &str, waiter: Option<u64>, node: Option<usize>) {
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
    fn contend(&self, key: &str, released: bool) {
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
    raised: AtomicBool,
    /// The nodes that reported a release since [`Flag::reports`] was last
    /// reset (one bit each; a report of no node, or of a node past the
    /// 64th, sets every bit).
    reported: AtomicU64,
    thread: Thread,
}

impl Flag {
    fn raise(&self, node: Option<usize>) {
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

/// A manager's release notifications: its nodes' feeds (started when a
/// caller first waits), the callers waiting now, and the keys contended
/// lately.
pub(crate) struct Wakeups {
    hub: Arc<Hub>,
    feeds: Vec<Box<dyn ReleaseFeed>>,
    started: Once,
}

impl Wakeups {
    /// Notifications from `feeds` (none: waiters poll) for the manager
    /// `manager`; a key counts as contended for `memory` after a sign of it.
    pub(crate) fn new(feeds: Vec<Box<dyn ReleaseFeed>>, manager: u64, memory: Duration) -> Self {
        Wakeups {
            hub: Arc::new(Hub::new(manager, memory)),
            feeds,
            started: Once::new(),
        }
    }

    /// Whether any node notifies.
    pub(crate) fn enabled(&self) -> bool {
        !self.feeds.is_empty()
    }

    /// Starts the feeds, once.
    pub(crate) fn start(&self) {
        if !self.enabled() {
            return;
        }
        self.started.call_once(|| {
            for (node, feed) in self.feeds.iter().enumerate() {
                feed.start(ReleaseSink {
                    hub: Arc::clone(&self.hub),
                    node: Some(node),
                });
            }
        });
    }

    /// Whether the feeds were started.
    pub(crate) fn started(&self) -> bool {
        self.started.is_completed()
    }

    /// Registers the calling thread as waiting for `keys` until the
    /// returned guard drops; a release of one reported since `since` (the
    /// start of the call) counts as if it came now.
    pub(crate) fn wait_for(&self, keys: &Resources, since: Instant) -> Waiting<'_> {
        let id = self.hub.next_id.fetch_add(1, Ordering::Relaxed);
        let flag = Arc::new(Flag {
            raised: AtomicBool::new(false),
            reported: AtomicU64::new(0),
            thread: std::thread::current(),
        });
        let mut waiters = self.hub.waiters.lock();
        let missed = {
            let contended = self.hub.contended.lock();
            keys.keys().iter().any(|k| {
                contended
                    .get(k)
                    .and_then(|seen| seen.released)
                    .is_some_and(|at| at >= since)
            })
        };
        if missed {
            flag.raised.store(true, Ordering::Release);
            flag.reported.store(u64::MAX, Ordering::Release);
        }
        waiters.push((id, keys.clone(), Arc::clone(&flag)));
        drop(waiters);
        Waiting {
            hub: &self.hub,
            id,
            flag,
        }
    }

    /// Remembers that `keys` were waited for (this manager was refused).
    pub(crate) fn contended(&self, keys: &Resources) {
        if self.enabled() {
            for key in keys.keys() {
                self.hub.contend(key, false);
            }
        }
    }

    /// Whether any of `keys` was contended lately: another manager waited
    /// for it, or this one did.
    pub(crate) fn is_contended(&self, keys: &Resources) -> bool {
        if !self.enabled() {
            return false;
        }
        let contended = self.hub.contended.lock();
        if contended.is_empty() {
            return false;
        }
        let now = Instant::now();
        keys.keys()
            .iter()
            .any(|k| contended.get(k).is_some_and(|seen| seen.until > now))
    }

    /// A caller's pause was ended by a notification.
    pub(crate) fn woke(&self) {
        self.hub.woke.fetch_add(1, Ordering::Relaxed);
    }

    /// Notifications heard, and pauses they ended.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.hub.heard.load(Ordering::Relaxed),
            self.hub.woke.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        self.hub.closed.store(true, Ordering::Release);
    }
}

/// A caller registered as waiting; unregisters on drop.
pub(crate) struct Waiting<'a> {
    hub: &'a Hub,
    id: u64,
    flag: Arc<Flag>,
}

impl Waiting<'_> {
    pub(crate) fn flag(&self) -> &Flag {
        &self.flag
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.hub.waiters.lock().retain(|(id, _, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Keep(Arc<Mutex<Vec<ReleaseSink>>>);

    impl ReleaseFeed for Keep {
        fn start(&self, sink: ReleaseSink) {
            self.0.lock().push(sink);
        }
    }

    #[test]
    fn a_release_wakes_the_waiters_of_its_key_only() {
        let sinks = Arc::new(Mutex::new(Vec::new()));
        let wakeups = Wakeups::new(
            vec![Box::new(Keep(Arc::clone(&sinks)))],
            7,
            Duration::from_secs(60),
        );
        assert!(sinks.lock().is_empty(), "feeds start lazily");
        wakeups.start();
        wakeups.start();
        assert_eq!(sinks.lock().len(), 1, "once");
        let a = Resources::one("a").expect("valid key");
        let ab = Resources::new(["b", "a"]).expect("valid key");
        let c = Resources::one("c").expect("valid key");
        let since = Instant::now();
        let on_a = wakeups.wait_for(&a, since);
        let on_ab = wakeups.wait_for(&ab, since);
        let on_c = wakeups.wait_for(&c, since);
        assert!(!wakeups.is_contended(&a));
        sinks.lock()[0].released("a", None);
        assert!(on_a.flag().take());
        assert!(!on_a.flag().take(), "taken once");
        assert!(on_ab.flag().take());
        assert!(!on_c.flag().take());
        assert!(wakeups.is_contended(&ab));
        assert!(!wakeups.is_contended(&c));
        assert_eq!(wakeups.counts(), (1, 0), "counted by the woken");
        // Another manager's turn: nobody here is woken, the key is
        // contended all the same.
        let on_a_too = wakeups.wait_for(&a, Instant::now());
        sinks.lock()[0].released("a", Some(8));
        assert!(!on_a_too.flag().take());
        sinks.lock()[0].released("a", Some(7));
        assert!(on_a_too.flag().take(), "our turn");
        assert!(on_a.flag().take());
        drop(on_a_too);
        wakeups.woke();
        assert_eq!(wakeups.counts(), (3, 1));
        drop((on_a, on_ab, on_c));
        assert!(wakeups.hub.waiters.lock().is_empty());
        // A feed that (re)subscribed wakes every waiter: it may have
        // missed releases.
        let on_c = wakeups.wait_for(&c, Instant::now());
        sinks.lock()[0].listening();
        assert!(on_c.flag().take());
        drop(on_c);
        // A release reported after the call started but before the caller
        // registered is not lost.
        let late = wakeups.wait_for(&ab, since);
        assert!(late.flag().take());
        let later = wakeups.wait_for(&ab, Instant::now());
        assert!(!later.flag().take());
        drop((late, later));
        let sink = sinks.lock()[0].clone();
        drop(wakeups);
        assert!(sink.is_closed());
        sink.released("a", None);
    }

    #[test]
    fn a_release_ends_a_pause_once_a_quorum_of_nodes_reported_it_or_after_the_settle_time() {
        use crate::mailbox::{Mailbox, Pause};
        let sinks = Arc::new(Mutex::new(Vec::new()));
        let feeds: Vec<Box<dyn ReleaseFeed>> = (0..5)
            .map(|_| Box::new(Keep(Arc::clone(&sinks))) as Box<dyn ReleaseFeed>)
            .collect();
        let wakeups = Wakeups::new(feeds, 7, Duration::from_secs(60));
        wakeups.start();
        let sinks: Vec<ReleaseSink> = sinks.lock().clone();
        let mailbox = Mailbox::new((), Arc::new(crate::SystemClock), std::thread::current());
        let a = Resources::one("a").expect("valid key");
        let far = Instant::now() + Duration::from_secs(60);
        // Three of five nodes reported: the pause ends at once, not after a
        // settle time of 10 s.
        let waiting = wakeups.wait_for(&a, Instant::now());
        for sink in &sinks[..3] {
            sink.released("a", Some(7));
        }
        let started = Instant::now();
        let ended = mailbox.pause_settling(far, waiting.flag(), 3, Duration::from_secs(10));
        assert_eq!(ended, Pause::Woken);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "waited for the settle time"
        );
        // One node reported (twice): the pause waits the settle time for
        // the others, then ends.
        sinks[0].released("a", Some(7));
        sinks[0].released("a", Some(7));
        let settle = Duration::from_millis(50);
        let started = Instant::now();
        let ended = mailbox.pause_settling(far, waiting.flag(), 3, settle);
        assert_eq!(ended, Pause::Woken);
        assert!(started.elapsed() >= settle, "{:?}", started.elapsed());
        // The reports were counted afresh: another pause is not ended by
        // the ones before.
        assert_eq!(waiting.flag().reports(false), 0);
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(
            mailbox.pause_settling(soon, waiting.flag(), 3, settle),
            Pause::Elapsed
        );
    }

    #[test]
    fn contended_keys_are_forgotten_and_bounded() {
        let wakeups = Wakeups::new(vec![Box::new(Keep(Arc::default()))], 7, Duration::ZERO);
        let a = Resources::one("a").expect("valid key");
        wakeups.contended(&a);
        assert!(!wakeups.is_contended(&a), "zero memory");
        let wakeups = Wakeups::new(
            vec![Box::new(Keep(Arc::default()))],
            7,
            Duration::from_secs(60),
        );
        for i in 0..CONTENDED_KEPT + 10 {
            wakeups.contended(&Resources::one(format!("k{i}")).expect("valid key"));
        }
        assert_eq!(wakeups.hub.contended.lock().len(), CONTENDED_KEPT);
        let none = Wakeups::new(Vec::new(), 7, Duration::from_secs(60));
        none.contended(&a);
        assert!(!none.is_contended(&a), "without feeds nothing is kept");
    }
}
