//! Bug 1 of the review issue: a resource name could be another resource's
//! helper key (its waiting line, fencing counter, readers, a semaphore's
//! permit), so that one lock's release deleted another lock and two
//! managers held it at once. Now every helper key has the character
//! `redlock_core::keys::SEPARATOR` after its resource's name and no name
//! may have it: each lock kind, with its whole life on one name, leaves
//! every other kind's lock on a look-alike name alone, on real masters and
//! on in-memory nodes alike.
//!
//! And the key space is versioned (`redlock_core::keys`, Versions): a
//! resource whose format key another version wrote (`R␟format` = `2`)
//! refuses every acquire that would read or write its helper keys with a
//! typed error, while the plain `SET NX` mutex and the release and extend
//! of locks held before still work.

use std::time::Duration;

use redlock_core::backend::SharedClaims;
use redlock_core::keys::{
    FENCE_SUFFIX, FORMAT_SUFFIX, PERMIT_INFIX, READERS_SUFFIX, SEPARATOR, WAIT_SUFFIX,
};
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

/// What a test of another wire format needs of a backend: managers with
/// and without fencing, a foreign `SET name␟format value` on every node,
/// and whether a node's error is the typed "another wire format" naming
/// format 2.
struct Formats<'a, B: SharedClaims + 'static> {
    make: &'a dyn Fn(bool) -> Redlock<B>,
    mark: &'a dyn Fn(&str, &[u8]),
    is_format_2: &'a dyn Fn(&B::Error) -> bool,
}

/// Every node failed with the typed wire-format error, named in the
/// call's report (a `NoQuorum`, or a timeout whose last round was one):
/// not contention, not a panic.
fn refused_for_format<B: SharedClaims + 'static>(
    f: &Formats<'_, B>,
    what: &str,
    result: Result<(), LockError<B::Error>>,
) -> Result<(), String> {
    let err = match result {
        Ok(()) => return Err(format!("{what}: granted on a resource of wire format 2")),
        Err(err) => err,
    };
    let no_quorum = match &err {
        LockError::NoQuorum(_) => true,
        LockError::Timeout { last, .. } => matches!(**last, LockError::NoQuorum(_)),
        _ => false,
    };
    let report = err.report().filter(|_| no_quorum);
    let typed = report.is_some_and(|r| {
        !r.failures().is_empty()
            && r.failures().iter().all(|n| {
                matches!(n.failure(), redlock_core::NodeFailure::Backend(e) if (f.is_format_2)(e))
            })
    });
    if typed {
        Ok(())
    } else {
        Err(format!("{what}: not the typed wire-format error: {err:?}"))
    }
}

/// A foreign format-2 marker on every node: the fenced mutex, a queued
/// (waiting) mutex, a fenced semaphore and a read-write lock's reader are
/// refused with the typed error; the plain mutex is granted (the layout
/// every version shares); the extend and release of a lock and of a read
/// taken before the marker appeared succeed. Returns what went wrong.
fn another_wire_format_fails_loudly<B: SharedClaims + 'static>(
    f: &Formats<'_, B>,
    prefix: &str,
) -> Vec<String> {
    let (fenced, plain) = ((f.make)(true), (f.make)(false));
    let [job, doc, jobs, free] = ["job", "doc", "jobs", "free"].map(|n| format!("{prefix}:{n}"));
    let mut failures = Vec::new();
    let mut check = |r: Result<(), String>| {
        if let Err(e) = r {
            failures.push(e);
        }
    };
    let mut held = fenced
        .try_lock(job.as_str(), TTL)
        .expect("job before the marker");
    let mut read = plain.try_read(&doc, TTL).expect("doc before the marker");
    for name in [&job, &doc, &jobs, &free] {
        (f.mark)(name, b"2");
    }
    // Refused before contention: `job` is held, yet the answer is the format.
    let fenced_again = fenced.try_lock(job.as_str(), TTL).map(drop);
    check(refused_for_format(f, "fenced try_lock", fenced_again));
    let fenced_free = fenced.try_lock(free.as_str(), TTL).map(drop);
    check(refused_for_format(
        f,
        "fenced try_lock of a free name",
        fenced_free,
    ));
    // A waiting caller's rounds go in line (the queued acquire).
    let waited = plain
        .lock_timeout(job.as_str(), TTL, Duration::from_millis(300))
        .map(drop);
    check(refused_for_format(f, "queued lock_timeout", waited));
    let permit = fenced
        .semaphore(&jobs, 2)
        .expect("semaphore")
        .try_acquire(TTL)
        .map(drop);
    check(refused_for_format(f, "fenced semaphore", permit));
    let reader = plain.try_read(&doc, TTL).map(drop);
    check(refused_for_format(f, "try_read", reader));
    let other_reader = fenced.try_read(&free, TTL).map(drop);
    check(refused_for_format(
        f,
        "fenced try_read of a free name",
        other_reader,
    ));
    // The interoperable layout: a plain mutex is one `SET NX PX`.
    match plain.try_lock(free.as_str(), TTL) {
        Ok(lock) => check(
            lock.release()
                .map(drop)
                .map_err(|e| format!("plain release: {e:?}")),
        ),
        Err(e) => failures.push(format!("plain try_lock refused: {e:?}")),
    }
    // What was held before the marker can be kept and let go.
    if let Err(e) = held.extend(TTL) {
        failures.push(format!("extend of a lock held before: {e:?}"));
    }
    if let Err(e) = read.extend(TTL) {
        failures.push(format!("extend of a read held before: {e:?}"));
    }
    if let Err(e) = held.release() {
        failures.push(format!("release of a lock held before: {e:?}"));
    }
    if let Err(e) = read.release() {
        failures.push(format!("release of a read held before: {e:?}"));
    }
    // With the marker gone (or `1`), the same calls are granted again.
    (f.mark)(&job, b"1");
    match fenced.try_lock(job.as_str(), TTL) {
        Ok(lock) => drop(lock),
        Err(e) => failures.push(format!("format 1 written out refused: {e:?}")),
    }
    assert!(fenced.flush(Duration::from_secs(10)) && plain.flush(Duration::from_secs(10)));
    failures
}

#[test]
fn another_wire_format_is_a_typed_error_on_mock_nodes() {
    use redlock_mock::{MockError, MockNode};
    let nodes = MockCluster::new(5);
    let make = |fencing: bool| {
        Redlock::builder(nodes.backends())
            .fencing(fencing)
            .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
            .build()
            .expect("valid manager")
    };
    let mark = |name: &str, value: &[u8]| {
        for i in 0..nodes.len() {
            nodes
                .node(i)
                .set_string(&format!("{name}{FORMAT_SUFFIX}"), value);
        }
    };
    let is_format_2 = |e: &MockError| {
        matches!(e, MockError::WireFormat { found: Some(2), .. })
            && e.to_string()
                .contains("wire format 2, this client speaks 1")
    };
    let formats: Formats<'_, MockNode> = Formats {
        make: &make,
        mark: &mark,
        is_format_2: &is_format_2,
    };
    let failures = another_wire_format_fails_loudly(&formats, "formats");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn another_wire_format_is_a_typed_error_on_real_masters() {
    use redlock_redis::{RedisBackend, RedisErrorKind, RedisNodeError};
    let servers = cluster(3);
    let make = |fencing: bool| {
        redlock_redis::Redlock::builder(backends(&servers, NODE_TIMEOUT))
            .node_timeout(NODE_TIMEOUT)
            .fencing(fencing)
            .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
            .build()
            .expect("valid manager")
    };
    let mark = |name: &str, value: &[u8]| {
        for server in servers.iter() {
            let mut admin = server.client().expect("client");
            redis::cmd("SET")
                .arg(format!("{name}{FORMAT_SUFFIX}"))
                .arg(value)
                .exec(&mut admin)
                .expect("SET");
        }
    };
    let is_format_2 = |e: &RedisNodeError| {
        e.kind() == RedisErrorKind::WireFormat
            && e.to_string()
                .contains("wire format 2, this client speaks 1")
    };
    let formats: Formats<'_, RedisBackend> = Formats {
        make: &make,
        mark: &mark,
        is_format_2: &is_format_2,
    };
    let failures = another_wire_format_fails_loudly(&formats, &key("formats"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
