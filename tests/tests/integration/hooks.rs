//! An event hook, and a keeper's `on_lost` callback, may call back into
//! their manager: each event is sent with none of the manager's locks held
//! (issue 24: `QueueFull` was sent under the node's queue lock, and under
//! the lines' lock on a hand-off, so a hook calling `stats()` or taking a
//! lock never came back).
//!
//! Each step runs on a thread of its own, watched with a bound: a hook
//! stuck in the manager fails the test, naming the events it is stuck in,
//! instead of hanging the run.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redlock_core::backend::{
    AcquireOutcome, Claim, ConnectionSink, LockBackend, ReleaseFeed, Request, Response, Started,
};
use redlock_core::{Event, EventHandler, KeepAlive, LostReason, NodeId, Redlock, Ttl};
use redlock_mock::{MockCluster, MockError, MockNode};

const TTL: Duration = Duration::from_secs(10);

/// Each step takes well under a second; a hook stuck in the manager would
/// hold it for ever.
const STEP_BOUND: Duration = Duration::from_secs(10);

/// A mock node that keeps the manager's connection sink, so that the test
/// can report a connection error through it (the mock itself never does).
struct Node {
    node: MockNode,
    sink: Arc<OnceLock<ConnectionSink>>,
}

impl LockBackend for Node {
    type Error = MockError;
    fn node_id(&self) -> &NodeId {
        self.node.node_id()
    }
    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, MockError> {
        self.node.acquire(claim, ttl, fence)
    }
    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, MockError> {
        self.node.extend(claim, ttl)
    }
    fn release(&self, claim: &Claim) -> Result<bool, MockError> {
        self.node.release(claim)
    }
    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, MockError> {
        self.node.raise_fence(claim, at_least)
    }
    fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, MockError>>) {
        self.node.run_batch(requests, out);
    }
    fn start<'a>(&'a self, requests: &[Request<'a>]) -> Option<Box<dyn Started<MockError> + 'a>> {
        self.node.start(requests)
    }
    fn attach(&self, sink: ConnectionSink) {
        let _ = self.sink.set(sink);
    }
    fn release_feed(&self) -> Option<Box<dyn ReleaseFeed>> {
        self.node.release_feed()
    }
}

impl redlock_core::backend::Fencing for Node {}

impl redlock_core::backend::SharedClaims for Node {}

type Locks = Redlock<Node>;

thread_local! {
    /// Set while this thread runs the hook's own lock call, whose events
    /// only get the `stats()` call.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Calls `stats()` from every event, and takes and releases a lock of its
/// own from `QueueFull` (sent on a caller's thread, on a hand-off with the
/// lines' lock held before the fix).
#[derive(Default)]
struct Reentrant {
    locks: Mutex<Option<Locks>>,
    /// Events whose hook call has not returned yet, by kind.
    inside: Mutex<Vec<&'static str>>,
    /// Events whose hook call returned, by kind.
    seen: Mutex<BTreeMap<&'static str, u64>>,
}

fn kind(event: &Event<'_>) -> &'static str {
    match event {
        Event::Call { .. } => "Call",
        Event::Round(_) => "Round",
        Event::NodeFailed { .. } => "NodeFailed",
        Event::NodeRecovered { .. } => "NodeRecovered",
        Event::KeptAlive { .. } => "KeptAlive",
        Event::Lost { .. } => "Lost",
        Event::HandedOff { .. } => "HandedOff",
        Event::QueueFull { .. } => "QueueFull",
        Event::Connection { .. } => "Connection",
        Event::ReleasesKept { .. } => "ReleasesKept",
        Event::ReleasesDropped { .. } => "ReleasesDropped",
        _ => "other",
    }
}

impl EventHandler for Reentrant {
    fn on_event(&self, event: &Event<'_>) {
        let kind = kind(event);
        self.inside.lock().push(kind);
        // The handle is cloned out: no lock of the hook's own is held
        // while it calls the manager.
        let locks = self.locks.lock().clone();
        if let Some(locks) = locks {
            std::hint::black_box(locks.stats());
            if kind == "QueueFull" && !IN_HOOK.get() {
                IN_HOOK.set(true);
                let own = locks.lock_timeout("hook", TTL, Duration::from_secs(5));
                let released = own.map(|own| own.release());
                IN_HOOK.set(false);
                released
                    .expect("the hook's own lock")
                    .expect("the hook's own release");
            }
        }
        let mut inside = self.inside.lock();
        if let Some(at) = inside.iter().position(|k| *k == kind) {
            inside.swap_remove(at);
        }
        drop(inside);
        *self.seen.lock().entry(kind).or_default() += 1;
    }
}

impl Reentrant {
    fn saw(&self, kind: &str) -> bool {
        self.seen.lock().contains_key(kind)
    }
}

/// Runs `step` on a thread of its own and waits for it at most
/// [`STEP_BOUND`]; a step that does not end is a hook stuck in the
/// manager.
fn step(hook: &Arc<Reentrant>, what: &str, step: impl FnOnce() + Send + 'static) {
    let (done, ended) = mpsc::channel();
    thread::spawn(move || {
        step();
        let _ = done.send(());
    });
    match ended.recv_timeout(STEP_BOUND) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!(
            "{what}: deadlock, the hook never came back from the manager during {:?}",
            hook.inside.lock()
        ),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: the step panicked"),
    }
}

/// Polls `done` until it holds or [`STEP_BOUND`] passes.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + STEP_BOUND;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: never happened");
        thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn bug_a_hook_calling_stats_deadlocked_on_a_full_queue() {
    let cluster = Arc::new(MockCluster::new(3));
    let sinks: Vec<Arc<OnceLock<ConnectionSink>>> = (0..3).map(|_| Arc::default()).collect();
    let hook = Arc::new(Reentrant::default());
    let backends = cluster.nodes().iter().zip(&sinks).map(|(node, sink)| Node {
        node: node.clone(),
        sink: Arc::clone(sink),
    });
    let locks = Redlock::builder(backends)
        .events(Arc::clone(&hook) as Arc<dyn EventHandler>)
        .queue_depth(2)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(5))
        .build()
        .expect("config");
    *hook.locks.lock() = Some(locks.clone());

    // Calls and their rounds.
    let l = locks.clone();
    step(&hook, "calls", move || {
        let mut lock = l.try_lock("a", TTL).expect("free");
        lock.extend(TTL).expect("extend");
        lock.release().expect("release");
    });
    assert!(hook.saw("Call") && hook.saw("Round"));

    // A node fails, then answers again.
    let (l, c) = (locks.clone(), Arc::clone(&cluster));
    step(&hook, "node down and up", move || {
        c.node(1).go_down();
        l.try_lock("b", TTL)
            .expect("quorum")
            .release()
            .expect("release");
        assert!(!l.flush(Duration::from_secs(5)), "node 1 is down");
        c.node(1).come_up();
        l.try_lock("b", TTL)
            .expect("all up")
            .release()
            .expect("release");
        assert!(l.flush(Duration::from_secs(5)));
    });
    assert!(hook.saw("NodeFailed") && hook.saw("NodeRecovered"));

    // A kept lock is extended, then lost; its `on_lost` callback calls the
    // manager too.
    let (l, c, h) = (locks.clone(), Arc::clone(&cluster), Arc::clone(&hook));
    step(&hook, "keep-alive and loss", move || {
        let lock = l
            .try_lock("kept", Duration::from_millis(300))
            .expect("free");
        let (tx, rx) = mpsc::channel();
        let from_callback = l.clone();
        lock.keep_alive(KeepAlive::new().on_lost(move |reason| {
            std::hint::black_box(from_callback.stats());
            let _ = from_callback.try_lock("from-callback", TTL);
            let _ = tx.send(reason);
        }))
        .expect("keeper");
        wait_for("an extension", || h.saw("KeptAlive"));
        c.node(0).go_down();
        c.node(1).go_down();
        let reason = rx.recv_timeout(STEP_BOUND).expect("lost");
        assert_eq!(reason, LostReason::ExtendFailed);
        c.node(0).come_up();
        c.node(1).come_up();
        drop(lock);
        // The releases node 0 and 1 failed are tried again until they
        // answer: flush says so once they did.
        wait_for("the nodes caught up", || l.flush(Duration::from_secs(1)));
    });
    assert!(hook.saw("KeptAlive") && hook.saw("Lost"));

    // Node 2 stops: its worker holds one request and its queue of two
    // fills with releases; acquires to it are then turned away, by a
    // caller's own rounds and by hand-offs in a line.
    let (l, c, h) = (locks.clone(), Arc::clone(&cluster), Arc::clone(&hook));
    step(&hook, "full queue and hand-offs", move || {
        c.node(2).freeze();
        for i in 0.. {
            if h.saw("QueueFull") {
                break;
            }
            l.try_lock(format!("q{i}").as_str(), TTL)
                .expect("quorum")
                .release()
                .expect("release");
        }
        let deadline = Instant::now() + STEP_BOUND;
        thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    while !h.saw("HandedOff") && Instant::now() < deadline {
                        let lock = l.lock("line", TTL).expect("in line");
                        thread::yield_now();
                        lock.release().expect("release");
                    }
                });
            }
        });
        c.node(2).thaw();
        assert!(h.saw("HandedOff"), "no hand-off");
        wait_for("node 2 caught up", || l.flush(Duration::from_secs(1)));
    });
    assert!(hook.saw("QueueFull") && hook.saw("HandedOff"));

    // Node 2 fails more releases than its worker keeps (4096): the oldest
    // are dropped, on the worker thread.
    let (l, c) = (locks.clone(), Arc::clone(&cluster));
    step(&hook, "releases dropped", move || {
        let guards: Vec<_> = (0..4100)
            .map(|i| l.try_lock(format!("r{i}").as_str(), TTL).expect("free"))
            .collect();
        assert!(l.flush(Duration::from_secs(5)));
        c.node(2).go_down();
        for guard in guards {
            guard.release().expect("a quorum released");
        }
        assert!(!l.flush(Duration::from_secs(5)), "node 2 is down");
        c.node(2).come_up();
        assert!(l.flush(Duration::from_secs(5)));
    });
    assert!(hook.saw("ReleasesKept"));
    assert!(hook.saw("ReleasesDropped"));

    // A backend reports a connection error outside any request.
    step(&hook, "connection error", move || {
        if let Some(sink) = sinks[0].get() {
            sink.report(&std::io::Error::other("connect refused"));
        }
    });
    assert!(hook.saw("Connection"));

    assert!(hook.inside.lock().is_empty());
    let seen = hook.seen.lock().clone();
    for kind in [
        "Call",
        "Round",
        "NodeFailed",
        "NodeRecovered",
        "KeptAlive",
        "Lost",
        "HandedOff",
        "QueueFull",
        "Connection",
        "ReleasesKept",
        "ReleasesDropped",
    ] {
        assert!(seen.contains_key(kind), "{kind} never sent: {seen:?}");
    }
    // The hook's handle would keep the manager alive.
    hook.locks.lock().take();
}

/// A hook that hears of a kept-alive lock's extension (`Event::Call` of
/// kind `Extend`, sent by the keeper) and extends that same lock: the
/// extension's call event comes after the lock's turn to extend was let
/// go, so the hook's own extension does not wait for itself (it did: the
/// keeper held the turn while the hook ran).
#[test]
fn a_hook_may_extend_the_lock_whose_kept_alive_extension_it_heard_of() {
    use std::sync::atomic::{AtomicBool, Ordering};

    use redlock_core::{CallKind, Lock};

    struct ExtendAgain {
        slot: Mutex<Option<Lock<MockNode>>>,
        done: AtomicBool,
    }
    impl EventHandler for ExtendAgain {
        fn on_event(&self, event: &Event<'_>) {
            if !matches!(
                event,
                Event::Call {
                    kind: CallKind::Extend,
                    ..
                }
            ) {
                return;
            }
            // The hook's own extension sends this event too: skip it.
            let Some(mut slot) = self.slot.try_lock() else {
                return;
            };
            if let Some(lock) = slot.as_mut() {
                if lock.extend(TTL).is_ok() {
                    self.done.store(true, Ordering::SeqCst);
                }
            }
        }
    }

    let cluster = MockCluster::new(3);
    let hook = Arc::new(ExtendAgain {
        slot: Mutex::new(None),
        done: AtomicBool::new(false),
    });
    let locks = Redlock::builder(cluster.backends())
        .events(Arc::clone(&hook) as Arc<dyn EventHandler>)
        .build()
        .expect("config");
    let lock = locks
        .try_lock("kept", Duration::from_millis(300))
        .expect("free");
    lock.keep_alive(KeepAlive::new()).expect("keeper");
    *hook.slot.lock() = Some(lock);
    wait_for("the hook extended the lock", || {
        hook.done.load(Ordering::SeqCst)
    });
    let lock = hook.slot.lock().take().expect("the lock");
    lock.release().expect("still held");
}
