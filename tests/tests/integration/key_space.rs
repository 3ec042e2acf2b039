//! Bug 1 of the review issue: a resource name could be another resource's
//! helper key (its waiting line, fencing counter, readers, a semaphore's
//! permit), so that one lock's release deleted another lock and two
//! managers held it at once. Now every helper key has the character
//! `redlock_core::keys::SEPARATOR` after its resource's name and no name
//! may have it: each lock kind, with its whole life on one name, leaves
//! every other kind's lock on a look-alike name alone, on real masters and
//! on in-memory nodes alike.

use std::time::Duration;

use redlock_core::backend::SharedClaims;
use redlock_core::keys::{FENCE_SUFFIX, PERMIT_INFIX, READERS_SUFFIX, SEPARATOR, WAIT_SUFFIX};
use redlock_core::{ConfigError, Lock, LockError, Redlock};
use redlock_mock::MockCluster;

use crate::redis_common::{backends, cluster, key, NODE_TIMEOUT};

const TTL: Duration = Duration::from_secs(30);

/// How a lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mutex,
    Read,
    Write,
    Permit,
}

const KINDS: [Kind; 4] = [Kind::Mutex, Kind::Read, Kind::Write, Kind::Permit];

/// Takes `name` as `kind` (a permit: of a one-permit semaphore `name`).
fn take<B: SharedClaims + 'static>(
    locks: &Redlock<B>,
    kind: Kind,
    name: &str,
) -> Result<Lock<B>, String> {
    let taken = match kind {
        Kind::Mutex => locks.try_lock(name, TTL),
        Kind::Read => locks.try_read(name, TTL),
        Kind::Write => locks.try_write(name, TTL),
        Kind::Permit => match locks.semaphore(name, 1) {
            Ok(semaphore) => semaphore.try_acquire(TTL).map(|p| p.into_lock()),
            Err(e) => Err(LockError::Config(e)),
        },
    };
    taken.map_err(|e| format!("{kind:?} {name:?}: {e:?}"))
}

/// Runs `kind`'s whole life on `name` with two managers: contention that
/// leaves waiting marks, the release that tells the waiter, fencing, two
/// readers, both permits of a semaphore.
fn whole_life<B: SharedClaims + 'static>(
    x: &Redlock<B>,
    y: &Redlock<B>,
    kind: Kind,
    name: &str,
) -> Result<(), String> {
    let fail = |what: &str, e: &dyn std::fmt::Debug| format!("{kind:?} {name:?}: {what}: {e:?}");
    match kind {
        Kind::Mutex => {
            let held = take(x, Kind::Mutex, name)?;
            // Y waits in line (a mark and its place on the nodes) and
            // gives up.
            match y.lock_timeout(name, TTL, Duration::from_millis(100)) {
                Err(LockError::Timeout { .. }) => {}
                other => return Err(fail("Y's wait", &other.map(drop))),
            }
            held.release().map_err(|e| fail("X's release", &e))?;
            let next = take(y, Kind::Mutex, name)?;
            next.release().map_err(|e| fail("Y's release", &e))?;
        }
        Kind::Read => {
            let first = take(x, Kind::Read, name)?;
            let second = take(y, Kind::Read, name)?;
            if y.try_write(name, TTL).is_ok() {
                return Err(fail("a writer got in beside readers", &()));
            }
            first.release().map_err(|e| fail("release", &e))?;
            second.release().map_err(|e| fail("release", &e))?;
        }
        Kind::Write => {
            let held = take(x, Kind::Write, name)?;
            if y.try_read(name, TTL).is_ok() {
                return Err(fail("a reader got in beside the writer", &()));
            }
            held.release().map_err(|e| fail("release", &e))?;
        }
        Kind::Permit => {
            let semaphore = x.semaphore(name, 2).map_err(|e| fail("semaphore", &e))?;
            let one = semaphore.try_acquire(TTL).map_err(|e| fail("permit", &e))?;
            let two = semaphore.try_acquire(TTL).map_err(|e| fail("permit", &e))?;
            one.release().map_err(|e| fail("release", &e))?;
            two.release().map_err(|e| fail("release", &e))?;
        }
    }
    Ok(())
}

/// The names that were a resource's helper keys before the fix.
fn look_alikes(name: &str) -> [String; 6] {
    [
        format!("{name}:fence"),
        format!("{name}:waiting"),
        format!("{name}:waiting:0"),
        format!("{name}:readers"),
        format!("{name}:permit:0"),
        format!("{name}:permit:1"),
    ]
}

/// Every kind on a name against every kind on each of its look-alikes:
/// the look-alike's holder keeps its lock (it extends it, another manager
/// is refused it, its release finds it held) and the name's kind works.
fn every_kind_against_every_kind<B: SharedClaims + 'static>(
    make: &dyn Fn() -> Redlock<B>,
    prefix: &str,
) -> Vec<String> {
    let (holder, x, y, other) = (make(), make(), make(), make());
    let mut failures = Vec::new();
    let mut case = 0;
    for base in KINDS {
        for held_kind in KINDS {
            case += 1;
            let name = format!("{prefix}:{case}");
            let mut held = Vec::new();
            for alike in look_alikes(&name) {
                match take(&holder, held_kind, &alike) {
                    Ok(lock) => held.push((alike, lock)),
                    Err(e) => failures.push(format!("taking the look-alike: {e}")),
                }
            }
            if let Err(e) = whole_life(&x, &y, base, &name) {
                failures.push(format!("{base:?} beside {held_kind:?} look-alikes: {e}"));
            }
            for (alike, mut lock) in held {
                let what = format!("{held_kind:?} {alike:?} after {base:?} {name:?}");
                if let Err(e) = lock.extend(TTL) {
                    failures.push(format!("{what}: extend: {e:?}"));
                }
                // Another manager is refused it: a writer for a read, the
                // same kind for the rest.
                let rival = if held_kind == Kind::Read {
                    Kind::Write
                } else {
                    held_kind
                };
                if let Ok(second) = take(&other, rival, &alike) {
                    failures.push(format!("{what}: two holders ({rival:?})"));
                    drop(second);
                }
                if let Err(e) = lock.release() {
                    failures.push(format!("{what}: release: {e:?}"));
                }
            }
        }
    }
    failures
}

/// The repro, kept as it was written: A holds `job:waiting`, B
/// takes and releases `job`, C is granted `job:waiting` while A holds it.
fn release_of_one_name_frees_no_other<B: SharedClaims + 'static>(
    make: &dyn Fn() -> Redlock<B>,
    job: &str,
) {
    let (a, b, c) = (make(), make(), make());
    let waiting = format!("{job}:waiting");
    let held = a
        .try_lock(waiting.as_str(), TTL)
        .expect("A takes job:waiting");
    let other = b.try_lock(job, TTL).expect("B takes job");
    other.release().expect("B releases job");
    assert!(
        b.flush(Duration::from_secs(10)),
        "B's release reached every node"
    );
    let second = c.try_lock(waiting.as_str(), TTL);
    assert!(
        matches!(second, Err(LockError::Contended(_))),
        "C was granted {waiting} while A held it: {:?}",
        second.map(drop)
    );
    held.release().expect("A's lock was still held");
}

fn mock_managers(cluster: &MockCluster) -> impl Fn() -> Redlock<redlock_mock::MockNode> + '_ {
    move || {
        Redlock::builder(cluster.backends())
            .fencing(true)
            .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
            .build()
            .expect("valid manager")
    }
}

fn redis_managers(
    servers: &redlock_tests::harness::RedisCluster,
) -> impl Fn() -> redlock_redis::Redlock + '_ {
    move || {
        redlock_redis::Redlock::builder(backends(servers, NODE_TIMEOUT))
            .node_timeout(NODE_TIMEOUT)
            .fencing(true)
            .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
            .build()
            .expect("valid manager")
    }
}

#[test]
fn bug_the_release_of_job_deleted_the_lock_on_job_waiting_on_real_masters() {
    let servers = cluster(5);
    release_of_one_name_frees_no_other(&redis_managers(&servers), &key("job"));
}

#[test]
fn the_release_of_job_leaves_the_lock_on_job_waiting_on_mock_nodes() {
    let nodes = MockCluster::new(5);
    release_of_one_name_frees_no_other(&mock_managers(&nodes), "job");
}

#[test]
fn bug_every_lock_kind_reached_look_alike_names_of_every_other_kind_on_real_masters() {
    let servers = cluster(5);
    let failures = every_kind_against_every_kind(&redis_managers(&servers), &key("kinds"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_lock_kind_leaves_look_alike_names_alone_on_mock_nodes() {
    let nodes = MockCluster::new(5);
    let failures = every_kind_against_every_kind(&mock_managers(&nodes), "kinds");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_entry_point_accepts_a_name_with_the_separator() {
    let nodes = MockCluster::new(3);
    let locks = Redlock::new(nodes.backends()).expect("manager");
    let names = [
        format!("job{WAIT_SUFFIX}"),
        format!("job{FENCE_SUFFIX}"),
        format!("job{READERS_SUFFIX}"),
        format!("s{PERMIT_INFIX}0"),
        SEPARATOR.to_string(),
    ];
    for name in &names {
        let refused = |r: Result<(), LockError<redlock_mock::MockError>>| {
            assert!(
                matches!(r, Err(LockError::Config(ConfigError::ReservedChar { .. }))),
                "{name:?}: {r:?}"
            );
        };
        refused(locks.try_lock(name.as_str(), TTL).map(drop));
        refused(locks.try_lock([name.as_str(), "fine"], TTL).map(drop));
        refused(locks.lock(name.as_str(), TTL).map(drop));
        refused(locks.try_read(name, TTL).map(drop));
        refused(locks.try_write(name, TTL).map(drop));
        refused(
            locks
                .semaphore(name, 2)
                .map(drop)
                .map_err(LockError::Config),
        );
        refused(locks.rwlock(name).map(drop).map_err(LockError::Config));
        // The error names the name escaped: it reaches terminals and logs.
        let shown = ConfigError::ReservedChar { name: name.clone() }.to_string();
        assert!(!shown.contains(SEPARATOR), "{shown}");
    }
    assert!(locks.flush(Duration::from_secs(5)));
    for i in 0..3 {
        assert_eq!(nodes.node(i).live_keys(), 0, "node {i}");
    }
}
