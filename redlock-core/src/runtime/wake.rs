//! Waiters woken by the nodes instead of polling: a backend that can tell
//! when a waited-for key was released ([`ReleaseFeed`]) reports it to a
//! [`ReleaseSink`], and the callers of this manager that wait for that key
//! between rounds start their next round at once.
//!
//! The notifications only shorten pauses: a missed or late one costs the
//! random pause the algorithm has anyway, a spurious one an extra round.
//! Safety never depends on them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use crate::backend::feed::{Flag, Hub};
use crate::backend::{ReleaseFeed, ReleaseSink};
use crate::Resources;

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

    /// This manager's id on its nodes' release channels, when any node
    /// notifies.
    pub(crate) fn manager(&self) -> Option<u64> {
        self.enabled().then_some(self.hub.manager)
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
    pub(crate) fn wait_for(&self, keys: &Resources, since: Instant) -> WakeRegistration<'_> {
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
        WakeRegistration {
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
pub(crate) struct WakeRegistration<'a> {
    hub: &'a Hub,
    id: u64,
    flag: Arc<Flag>,
}

impl WakeRegistration<'_> {
    pub(crate) fn flag(&self) -> &Flag {
        &self.flag
    }
}

impl Drop for WakeRegistration<'_> {
    fn drop(&mut self) {
        self.hub.waiters.lock().retain(|(id, _, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::*;
    use crate::backend::feed::CONTENDED_KEPT;

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
        use crate::runtime::mailbox::{Mailbox, Pause};
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
