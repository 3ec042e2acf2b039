//! Review issue, section 4: a `lock` caller that timed out or was
//! cancelled kept its place in the nodes' waiting lines until its places
//! expired (2 × (longest retry pause + node timeout)): every other manager
//! gave way to a waiter that was gone, and nobody was woken for it. Now a
//! caller that gives up leaves the lines as it leaves, on in-memory nodes
//! and on real masters alike.

use std::time::{Duration, Instant};

use redlock_core::backend::LockBackend;
use redlock_core::{Cancel, LockError, Redlock};
use redlock_mock::{MockCluster, MockNode};
use redlock_redis::WAIT_SUFFIX;

use crate::redis_common::{backends, cluster, key};

const TTL: Duration = Duration::from_secs(30);
/// Far longer than any step here: only a hang fails.
const BOUND: Duration = Duration::from_secs(10);
/// Long enough that a place left behind would still be there when looked
/// for (its marks live 2 × (10 ms + 1 s)); a mock node answers at once.
const NODE_TIMEOUT: Duration = Duration::from_secs(1);

fn configure<B: LockBackend + 'static>(builder: redlock_core::Builder<B>) -> Redlock<B> {
    builder
        .node_timeout(NODE_TIMEOUT)
        .retry_delay(Duration::from_millis(5), Duration::from_millis(10))
        .build()
        .expect("manager")
}

/// Waits until `condition` holds, at most [`BOUND`].
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !condition() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Manager `b` waits for `name`, held by `a`, and gives up: by its
/// deadline, then cancelled from another thread once it waits in line
/// (`waiting` says whether some node has it in line).
fn give_up_twice<B: LockBackend + 'static>(
    a: &Redlock<B>,
    b: &Redlock<B>,
    name: &str,
    waiting: &(dyn Fn() -> bool + Sync),
) {
    let held = a.try_lock(name, TTL).expect("free");
    // A deadline far longer than a round, so that the caller surely
    // waits in line before it passes, whatever the machine's load.
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| b.lock_timeout(name, TTL, Duration::from_secs(3)).map(drop));
        eventually("the waiter is in line", waiting);
        let result = waiter.join().expect("no panic");
        assert!(
            matches!(result, Err(LockError::Timeout { .. })),
            "{result:?}"
        );
    });
    assert!(b.flush(BOUND), "b's requests ran");
    assert!(!waiting(), "a caller that timed out is still in line");

    let cancel = Cancel::new();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| b.lock_cancellable(name, TTL, None, &cancel).map(drop));
        eventually("the waiter is in line", waiting);
        cancel.cancel();
        let result = waiter.join().expect("no panic");
        assert!(matches!(result, Err(LockError::Cancelled)), "{result:?}");
    });
    assert!(b.flush(BOUND), "b's requests ran");
    assert!(!waiting(), "a cancelled caller is still in line");
    held.release().expect("still held");
}

#[test]
fn a_waiter_that_gives_up_leaves_the_lines_on_mock_nodes() {
    let nodes = MockCluster::new(5);
    let a = configure(Redlock::builder(nodes.backends()));
    let b = configure(Redlock::builder(nodes.backends()));
    let all: Vec<MockNode> = (0..5).map(|i| nodes.node(i).clone()).collect();
    let waiting = move || all.iter().any(|n| n.first_waiting("job").is_some());
    give_up_twice(&a, &b, "job", &waiting);
}

#[test]
fn a_waiter_that_gives_up_leaves_the_lines_on_real_masters() {
    let servers = cluster(5);
    let a = configure(redlock_redis::Redlock::builder(backends(
        &servers,
        NODE_TIMEOUT,
    )));
    let b = configure(redlock_redis::Redlock::builder(backends(
        &servers,
        NODE_TIMEOUT,
    )));
    let name = key("leaving");
    // A manager's place in `name`'s line is the key `name␟waiting:<id>`.
    let places = format!("{name}{WAIT_SUFFIX}:*");
    let waiting = || {
        servers.iter().any(|server| {
            let mut admin = server.client().expect("client");
            let found: Vec<String> = redis::cmd("KEYS")
                .arg(&places)
                .query(&mut admin)
                .expect("KEYS");
            !found.is_empty()
        })
    };
    give_up_twice(&a, &b, &name, &waiting);
}
