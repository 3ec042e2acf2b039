//! With several callers driving, a manager whose backends start batches
//! (`LockBackend::starts_batches`) hands their rounds to one poller thread,
//! which sends each node every request queued for it in one batch and
//! reads the answers of all nodes; a node whose last request failed goes
//! through its worker, and a frozen one holds no caller beyond the others'
//! decision.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_core::backend::{Claim, LockBackend};
use redlock_core::{Redlock, Ttl};
use redlock_tests::harness::wait_until;

use crate::starting::{nodes, sum, Gate, Starting};

const TTL: Duration = Duration::from_secs(10);

/// A manager over `nodes` with `timeout` per node, its poller taking the
/// rounds of any number of callers and without own rounds: every round
/// goes to the poller, whether its caller is alone at the time or not.
fn polled(nodes: &[Starting], timeout: Duration) -> Redlock<Starting> {
    Redlock::builder(nodes.to_vec())
        .node_timeout(timeout)
        .own_rounds(false)
        .poller_from(1)
        .build()
        .expect("config")
}

/// `threads` callers of `locks`, each locking and releasing its own key
/// `cycles` times; every lock must be granted. Returns the longest one
/// lock and release took.
fn cycle(locks: &Redlock<Starting>, threads: usize, cycles: usize) -> Duration {
    std::thread::scope(|s| {
        let callers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut slowest = Duration::ZERO;
                    for i in 0..cycles {
                        let began = Instant::now();
                        let lock = locks
                            .try_lock(format!("key-{t}"), TTL)
                            .unwrap_or_else(|e| panic!("caller {t}, cycle {i}: {e}"));
                        lock.release()
                            .unwrap_or_else(|e| panic!("caller {t}, cycle {i}: {e}"));
                        slowest = slowest.max(began.elapsed());
                    }
                    slowest
                })
            })
            .collect();
        callers
            .into_iter()
            .map(|c| c.join().expect("no panic"))
            .max()
            .unwrap_or_default()
    })
}

#[test]
fn several_callers_rounds_go_through_the_poller_and_wake_no_node_worker() {
    let (cluster, nodes) = nodes(3, true);
    // Without own rounds, every round goes to the poller, whether its
    // caller is alone at the time or not.
    let locks = polled(&nodes, Duration::from_secs(5));
    cycle(&locks, 8, 50);
    assert!(locks.flush(Duration::from_secs(10)));
    let stats = locks.stats().manager;
    // No node failed, so no worker ran a request; every node ran every
    // request, in the poller's batches.
    assert_eq!(sum(&nodes, |n| &n.on_worker), 0, "a worker ran a request");
    let batches = u64::try_from(sum(&nodes, |n| &n.started)).expect("small");
    assert_eq!(stats.polled_batches, batches, "{stats:?}");
    assert_eq!(stats.direct_rounds, 0, "{stats:?}");
    let requests = sum(&nodes, |n| &n.requests);
    assert_eq!(requests, 3 * 8 * 50 * 2, "every request, once per node");
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn lone_callers_send_their_own_rounds_and_several_use_the_poller_without_a_worker() {
    let (cluster, nodes) = nodes(3, true);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .poller_from(1)
        .build()
        .expect("config");
    cycle(&locks, 8, 100);
    assert!(locks.flush(Duration::from_secs(10)));
    // Each round went to the nodes either as a lone caller's own batches
    // of one or through the poller: never through a worker.
    assert_eq!(sum(&nodes, |n| &n.on_worker), 0, "a worker ran a request");
    let requests = sum(&nodes, |n| &n.requests);
    assert_eq!(requests, 3 * 8 * 100 * 2, "every request, once per node");
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

/// By default, while fewer than `POLLER_FROM` callers drive rounds at
/// once, their rounds go through the node workers and the poller's thread
/// is never started.
#[test]
fn by_default_a_few_callers_rounds_go_through_the_workers() {
    let (cluster, nodes) = nodes(3, true);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .own_rounds(false)
        .build()
        .expect("config");
    let callers = redlock_core::POLLER_FROM - 1;
    cycle(&locks, callers, 20);
    assert!(locks.flush(Duration::from_secs(10)));
    assert_eq!(locks.stats().manager.polled_batches, 0);
    assert_eq!(sum(&nodes, |n| &n.started), 0, "a request was started");
    assert_eq!(sum(&nodes, |n| &n.on_worker), 3 * callers * 20 * 2);
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

/// By default, once `POLLER_FROM` callers drive rounds at once (here each
/// waiting for a key another manager holds), their rounds go through the
/// poller; each gets its lock once the other manager lets go.
#[test]
fn by_default_the_rounds_of_poller_from_callers_at_once_go_through_the_poller() {
    let (cluster, nodes) = nodes(3, true);
    let callers = redlock_core::POLLER_FROM;
    let holder = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .build()
        .expect("config");
    let held: Vec<_> = (0..callers)
        .map(|t| holder.try_lock(format!("key-{t}"), TTL).expect("free"))
        .collect();
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .own_rounds(false)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(5))
        .build()
        .expect("config");
    std::thread::scope(|s| {
        let waiters: Vec<_> = (0..callers)
            .map(|t| {
                let locks = &locks;
                s.spawn(move || {
                    locks
                        .lock_timeout(format!("key-{t}"), TTL, Duration::from_secs(60))
                        .unwrap_or_else(|e| panic!("caller {t}: {e}"))
                        .release()
                        .unwrap_or_else(|e| panic!("caller {t}: {e}"));
                })
            })
            .collect();
        // Every caller keeps driving rounds until its key is let go.
        let seen = wait_until(
            Duration::from_secs(30),
            "a round through the poller",
            || locks.stats().manager.polled_batches > 0,
        );
        for lock in held {
            lock.release().expect("held");
        }
        for waiter in waiters {
            waiter.join().expect("no panic");
        }
        seen.unwrap_or_else(|e| panic!("{e}"));
    });
    assert!(locks.flush(Duration::from_secs(10)));
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn with_the_poller_off_several_callers_rounds_go_through_the_workers() {
    let (cluster, nodes) = nodes(3, true);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(Duration::from_secs(5))
        .own_rounds(false)
        .poller(false)
        .build()
        .expect("config");
    cycle(&locks, 4, 20);
    // A release returns at a quorum: the last node runs it after.
    assert!(locks.flush(Duration::from_secs(10)));
    assert_eq!(locks.stats().manager.polled_batches, 0);
    assert_eq!(sum(&nodes, |n| &n.started), 0, "a request was started");
    assert_eq!(sum(&nodes, |n| &n.on_worker), 3 * 4 * 20 * 2);
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn a_node_frozen_under_the_poller_holds_no_caller_beyond_the_others_decision() {
    let (cluster, nodes) = nodes(5, true);
    // A frozen node answers nothing for the whole node timeout: a round
    // that waited for it would take 10 s.
    let timeout = Duration::from_secs(10);
    let locks = polled(&nodes, timeout);
    cycle(&locks, 4, 10);
    let before = nodes[1].started.load(Ordering::SeqCst);
    nodes[1].freeze();
    let started = Instant::now();
    let slowest = cycle(&locks, 4, 5);
    // Each lock and release was decided by the four others: a frozen node
    // that held a round would have cost it the node timeout.
    assert!(slowest < timeout / 2, "a lock and release took {slowest:?}");
    assert!(started.elapsed() < timeout, "took {:?}", started.elapsed());
    // The node's first batch went silent; after that its requests went to
    // its worker (blocked by the freeze) and no longer to the poller.
    assert_eq!(nodes[1].started.load(Ordering::SeqCst) - before, 1);
    nodes[1].thaw();
    assert!(locks.flush(Duration::from_secs(20)), "the node caught up");
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

/// Five nodes under a manager with `timeout` per node, and the locks of W
/// and X: node 1 started nothing at first, so W's acquire went to its
/// worker, which the returned gate holds (the four others decided W's
/// round); X's round came while the worker still held W's acquire, so X's
/// acquire on node 1 waits behind it.
struct Stalled {
    cluster: redlock_mock::MockCluster,
    nodes: Vec<Starting>,
    gate: Arc<Gate>,
    locks: Redlock<Starting>,
    w: redlock_core::Lock<Starting>,
    x: redlock_core::Lock<Starting>,
}

const CAP: Duration = Duration::from_secs(30);

fn stalled_worker(timeout: Duration) -> Stalled {
    let (cluster, mut nodes) = nodes(5, true);
    let gate = Arc::new(Gate::default());
    nodes[1].stalls = Some(("w".to_owned(), Arc::clone(&gate)));
    nodes[1].refuses.store(true, Ordering::SeqCst);
    let locks = polled(&nodes, timeout);
    let w = locks.try_lock("w", TTL).expect("granted by the others");
    wait_until(CAP, "node 1's worker holding W's acquire", || {
        gate.reached() == 1
    })
    .unwrap_or_else(|e| panic!("{e}"));
    nodes[1].refuses.store(false, Ordering::SeqCst);
    let x = locks.try_lock("x", TTL).expect("granted by the others");
    assert!(!nodes[1].ran("x", "acquire"), "ran before W's");
    Stalled {
        cluster,
        nodes,
        gate,
        locks,
        w,
        x,
    }
}

/// A node whose requests went to its worker is the poller's again once
/// the worker has run them: the jobs that come for it meanwhile wait in
/// the poller, behind the worker's, not in the worker's queue. (There, under
/// steady load, each of the node's jobs would have followed the ones before
/// it for as long as the load lasted, the acquires among them going stale:
/// the node out of every quorum.)
#[test]
fn a_node_is_the_pollers_again_once_its_worker_caught_up() {
    let Stalled {
        cluster,
        nodes,
        gate,
        locks,
        w,
        x,
    } = stalled_worker(Duration::from_secs(10));
    gate.open();
    wait_until(CAP, "X's acquire on node 1", || {
        nodes[1].ran("x", "acquire")
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let log = nodes[1].log.lock().clone();
    let at = |key: &str| log.iter().position(|(k, w)| k == key && *w == "acquire");
    assert!(at("w") < at("x"), "out of order: {log:?}");
    // The poller started X's acquire once the worker had run W's.
    assert_eq!(nodes[1].on_worker.load(Ordering::SeqCst), 1, "{log:?}");
    w.release().expect("W's lock");
    x.release().expect("X's lock");
    assert_eq!(nodes[1].on_worker.load(Ordering::SeqCst), 1, "{log:?}");
    assert!(locks.flush(CAP));
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

/// What the poller holds for a node when the manager goes (jobs behind
/// the node's worker's own) goes to that worker: the releases of dropped
/// guards among them run once the worker can, none is lost.
#[test]
fn the_jobs_the_poller_holds_when_the_manager_goes_run_on_the_nodes_worker() {
    // The manager waits for its threads twice the node timeout at most.
    let Stalled {
        cluster,
        nodes,
        gate,
        locks,
        w,
        x,
    } = stalled_worker(Duration::from_secs(1));
    // Both releases, held by the poller for node 1 behind W's acquire;
    // then the manager goes while node 1's worker is still held: the
    // poller exits with the jobs it held.
    drop(x);
    drop(w);
    drop(locks);
    assert!(!nodes[1].ran("w", "release"), "ran before W's acquire");
    gate.open();
    wait_until(CAP, "the releases on node 1", || {
        nodes[1].ran("w", "release") && nodes[1].ran("x", "release")
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}

#[test]
fn a_round_that_waits_for_a_frozen_node_holds_the_poller_only_a_grace() {
    let (cluster, nodes) = nodes(3, true);
    let timeout = Duration::from_secs(4);
    let locks = polled(&nodes, timeout);
    // Another manager holds "split" on node 0 only: an acquire of it gets
    // one grant and one refusal from nodes 0 and 1, and needs node 2.
    let theirs = Claim::new(
        redlock_core::Resources::one("split").expect("key"),
        redlock_core::backend::Token::random().expect("entropy"),
    );
    assert!(cluster
        .node(0)
        .acquire(&theirs, Ttl::new(TTL).expect("ttl"), false)
        .expect("up")
        .is_granted());
    cycle(&locks, 2, 5);
    let before = nodes[2].started.load(Ordering::SeqCst);
    nodes[2].freeze();
    std::thread::scope(|s| {
        let split = s.spawn(|| locks.try_lock("split", TTL));
        // The poller sent the split round's batch to the frozen node, and
        // waits for its answers.
        let since = Instant::now();
        while nodes[2].started.load(Ordering::SeqCst) == before {
            assert!(since.elapsed() < Duration::from_secs(30), "never sent");
            std::thread::yield_now();
        }
        // A poller that waited for the frozen node's answer would have
        // held these rounds for the node timeout.
        let slowest = cycle(&locks, 2, 20);
        assert!(slowest < timeout / 2, "a lock and release took {slowest:?}");
        assert!(split.join().expect("no panic").is_err(), "held on node 0");
    });
    nodes[2].thaw();
    assert!(locks.flush(Duration::from_secs(10)));
}

#[test]
fn the_releases_of_dropped_guards_run_through_the_poller_before_the_manager_is_gone() {
    let (cluster, nodes) = nodes(3, true);
    let locks = polled(&nodes, Duration::from_secs(5));
    let guards: Vec<_> = (0..8)
        .map(|i| locks.try_lock(format!("dropped-{i}"), TTL).expect("free"))
        .collect();
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 8));
    // The guards' releases are queued for the poller without waiting; the
    // manager's last handle waits for the poller, then the workers.
    drop(guards);
    drop(locks);
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
    assert_eq!(sum(&nodes, |n| &n.on_worker), 0, "a worker ran a request");
}

/// A job sent while the poller still has jobs for its node goes behind
/// them, through the poller, so that each node runs its requests in the
/// order they were sent. Here the poller holds D's acquire, taken while
/// two callers drove rounds; D's round times out, and its release is sent
/// once D drives alone. Sent to the idle node workers, that release would
/// run on every node before the acquire, which would then leave D's key
/// held by nobody until its TTL.
#[test]
fn a_job_sent_while_the_poller_owes_its_node_runs_after_what_the_poller_owes() {
    let (cluster, mut nodes) = nodes(5, true);
    // The poller's start of a batch with D's acquire waits on node 0 (and
    // so holds the other nodes' starts); E's own round is answered once
    // `answered` opens, and E drives until then.
    let poller = Arc::new(Gate::default());
    let answered = Arc::new(Gate::default());
    nodes[0].hold = Some(("d".to_owned(), Arc::clone(&poller)));
    for node in &mut nodes {
        node.late = Some(("e".to_owned(), Arc::clone(&answered)));
    }
    let timeout = Duration::from_secs(3);
    let locks = Redlock::builder(nodes.clone())
        .node_timeout(timeout)
        .poller_from(2)
        .build()
        .expect("config");
    let cap = Duration::from_secs(30);
    std::thread::scope(|s| {
        // E, alone, sends its own round.
        let e = s.spawn(|| locks.try_lock("e", TTL));
        wait_until(cap, "E's round started on every node", || {
            answered.reached() == nodes.len()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        // D, with E driving: two callers, so its acquire goes through the
        // poller for every node.
        let d = s.spawn(|| locks.try_lock("d", TTL));
        wait_until(cap, "the poller holding D's acquire", || {
            poller.reached() == 1
        })
        .unwrap_or_else(|e| panic!("{e}"));
        answered.open();
        let e = e.join().expect("no panic").expect("E's lock");
        // D, alone now, gets no answer within the node timeout, and sends
        // its round's release to every node before it returns.
        assert!(d.join().expect("no panic").is_err(), "D got no answer");
        // A release on an idle worker would run at once: give it the time
        // (only a broken build waits less).
        let early = wait_until(Duration::from_secs(1), "", || {
            nodes.iter().any(|n| n.ran("d", "release"))
        });
        poller.open();
        wait_until(cap, "D's release on every node", || {
            nodes.iter().all(|n| n.ran("d", "release"))
        })
        .unwrap_or_else(|e| panic!("{e}"));
        for (i, node) in nodes.iter().enumerate() {
            let log = node.log.lock().clone();
            let first = |kind: &str| log.iter().position(|(k, w)| k == "d" && *w == kind);
            assert!(
                matches!((first("acquire"), first("release")), (Some(a), Some(r)) if a < r),
                "node {i} ran D's requests out of order: {log:?} (a release before the \
                 poller started: {})",
                early.is_ok()
            );
        }
        e.release().expect("E's lock");
    });
    assert!(locks.flush(cap));
    assert!(cluster.nodes().iter().all(|n| n.live_keys() == 0));
}
