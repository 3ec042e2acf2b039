//! Bug 3 of issue 24: a master's reply could hold a caller, a node's worker
//! and the subscriber thread past every deadline, and grow memory without
//! bound. Here one master of five is a fake one ([`HostileServer`]) that
//! answers the handshake and then never finishes a reply to a lock command:
//! it trickles one, announces a 1 TB bulk string, or streams push frames.
//! The four real masters must still grant the lock within two node
//! timeouts, whether the caller reads the masters itself (own rounds, the
//! default) or through the node workers; memory must not grow with what the
//! fake one sends; the real ones must keep serving; and the fake one's
//! connection must be dropped.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use redlock_redis::{RedisBackend, Redlock};
use redlock_tests::harness::{wait_until, HostileServer, Misbehaviour};

use crate::redis_common::{backends, clients, cluster, exists, key, NODE_TIMEOUT};

const TIMEOUT: Duration = NODE_TIMEOUT;

const TTL: Duration = Duration::from_secs(30);

/// What one call may take with one hostile master of five: two node
/// timeouts.
const EXPECTED: Duration = Duration::from_millis(2 * NODE_TIMEOUT.as_millis() as u64);

/// Ten times that: only a hang fails, not a loaded machine.
const BOUND: Duration = Duration::from_millis(10 * EXPECTED.as_millis() as u64);

/// How far this process's resident memory may grow while the hostile master
/// misbehaves: far more than the client should hold for a reply (1 MiB a
/// connection) or other tests running alongside allocate, far less than
/// the 1 GiB of its 1 TB bulk string that the hostile master sends at once.
const MEMORY_BOUND: u64 = 256 << 20;

/// The fake master's misbehaviours, paced so that no socket read waits long
/// enough to time out (a lone caller reads a node 1 ms at a time).
fn trickle() -> Misbehaviour {
    Misbehaviour::Trickle {
        pause: Duration::from_micros(100),
    }
}

fn huge_bulk() -> Misbehaviour {
    Misbehaviour::HugeBulk {
        burst: 1 << 30,
        pause: Duration::from_micros(100),
    }
}

fn push_flood() -> Misbehaviour {
    Misbehaviour::PushFlood {
        per_batch: 16,
        pause: Duration::from_micros(100),
    }
}

/// This process's resident memory in bytes (`VmRSS`).
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

fn assert_memory(what: &str, baseline: u64) {
    let grown = resident().saturating_sub(baseline);
    assert!(
        grown < MEMORY_BOUND,
        "{what}: resident memory grew by {} MiB",
        grown >> 20
    );
}

/// Runs `call` on a thread of its own and waits for it at most [`BOUND`],
/// checking memory meanwhile: a hung call fails the test instead of
/// hanging it. Returns what it returned and how long it took.
fn bounded<T: Send + 'static>(
    what: &str,
    baseline: u64,
    call: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let started = Instant::now();
        let out = call();
        let _ = done.send((out, started.elapsed()));
    });
    let started = Instant::now();
    loop {
        match result.recv_timeout(Duration::from_millis(10)) {
            Ok(out) => return out,
            Err(RecvTimeoutError::Timeout) => {
                assert_memory(what, baseline);
                assert!(
                    started.elapsed() < BOUND,
                    "{what} hung: still running after {BOUND:?}"
                );
            }
            Err(RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
        }
    }
}

/// Which path a caller's rounds take.
#[derive(Clone, Copy)]
enum Path {
    /// The caller's own rounds: it reads its nodes itself, in turn.
    Own,
    /// The node workers.
    Workers,
    /// The poller, which waits on all its nodes' sockets at once.
    Poller,
}

/// Four real masters and `misbehaviour` as the third of five.
fn hostile_master_cannot_hold_the_caller(name: &str, misbehaviour: Misbehaviour, path: Path) {
    let masters = cluster(4);
    let hostile = HostileServer::start(misbehaviour).expect("the hostile master");
    let mut all = backends(&masters, TIMEOUT);
    let fake = RedisBackend::builder(hostile.url())
        .node_timeout(TIMEOUT)
        .build()
        .expect("a backend for the hostile master");
    all.insert(2, fake);
    let locks = Redlock::builder(all)
        .node_timeout(TIMEOUT)
        .own_rounds(matches!(path, Path::Own))
        .poller(matches!(path, Path::Poller))
        .poller_from(1)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
        .build()
        .expect("valid manager");
    // The lock command must reach it: its pool connected in the background.
    wait_until(BOUND, "the hostile master's handshake", || {
        hostile.handshakes() > 0
    })
    .expect("connected");
    // And the real masters': a node with no connection yet gets its batch
    // through its worker, and on a busy machine every node could.
    for master in masters.iter() {
        wait_until(BOUND, "a connection to every real master", || {
            clients(master) > 0
        })
        .expect("connected");
    }
    let baseline = resident();

    let (held, took) = bounded("try_lock", baseline, {
        let (locks, name) = (locks.clone(), key(name));
        move || locks.try_lock(name.as_str(), TTL)
    });
    assert!(
        took < BOUND,
        "try_lock took {took:?}, expected {EXPECTED:?}"
    );
    let lock = held.expect("granted by the four real masters");
    if matches!(path, Path::Poller) {
        assert!(
            locks.stats().manager.polled_batches > 0,
            "through the poller"
        );
    }
    // A round is decided at a quorum: on a busy machine the hostile
    // master's request may go out only after the caller has its answer.
    wait_until(
        BOUND,
        "the lock command to reach the hostile master",
        || hostile.misbehaving() > 0,
    )
    .expect("the lock command reached it");
    // Granted at a quorum; the other real masters follow.
    for master in masters.iter() {
        wait_until(BOUND, "the lock on every real master", || {
            exists(master, &key(name))
        })
        .unwrap_or_else(|e| panic!("not held on {}: {e}", master.url()));
    }
    let (released, _) = bounded("release", baseline, move || lock.release());
    released.expect("released on the four real masters");

    // The real masters keep serving, whatever the hostile one does.
    for round in 0..3 {
        let (cycle, took) = bounded("a later lock cycle", baseline, {
            let (locks, other) = (locks.clone(), key(&format!("{name}-after")));
            move || {
                locks
                    .try_lock(other.as_str(), TTL)
                    .map(|lock| lock.release())
            }
        });
        assert!(took < BOUND, "round {round} took {took:?}");
        cycle.expect("granted").expect("released");
    }

    // The connection that owed the never-finished reply was given up.
    wait_until(BOUND, "the client to drop the hostile connection", || {
        hostile.dropped() > 0
    })
    .expect("dropped");
    assert_memory("at the end", baseline);
}

#[test]
fn bug3_a_trickled_reply_cannot_hold_a_lone_caller() {
    hostile_master_cannot_hold_the_caller("hostile-trickle-own", trickle(), Path::Own);
}

#[test]
fn bug3_a_trickled_reply_cannot_hold_a_worker() {
    hostile_master_cannot_hold_the_caller("hostile-trickle-workers", trickle(), Path::Workers);
}

#[test]
fn bug3_a_1tb_bulk_cannot_hold_a_lone_caller_or_fill_memory() {
    hostile_master_cannot_hold_the_caller("hostile-bulk-own", huge_bulk(), Path::Own);
}

#[test]
fn bug3_a_1tb_bulk_cannot_hold_a_worker_or_fill_memory() {
    hostile_master_cannot_hold_the_caller("hostile-bulk-workers", huge_bulk(), Path::Workers);
}

#[test]
fn bug3_a_push_flood_cannot_hold_a_lone_caller() {
    hostile_master_cannot_hold_the_caller("hostile-push-own", push_flood(), Path::Own);
}

#[test]
fn bug3_a_push_flood_cannot_hold_a_worker() {
    hostile_master_cannot_hold_the_caller("hostile-push-workers", push_flood(), Path::Workers);
}

#[test]
fn bug3_a_trickled_reply_cannot_hold_the_poller() {
    hostile_master_cannot_hold_the_caller("hostile-trickle-poller", trickle(), Path::Poller);
}

#[test]
fn bug3_a_1tb_bulk_cannot_hold_the_poller_or_fill_memory() {
    hostile_master_cannot_hold_the_caller("hostile-bulk-poller", huge_bulk(), Path::Poller);
}

#[test]
fn bug3_a_push_flood_cannot_hold_the_poller() {
    hostile_master_cannot_hold_the_caller("hostile-flood-poller", push_flood(), Path::Poller);
}
