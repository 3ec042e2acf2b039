//! `DynRedlock` over real Redis masters: the same application type as over
//! mock nodes (README, "Testing your code with the mock"), with the Redis
//! backend's typed errors reachable by downcasting.

use std::time::Duration;

use redlock_core::{connect_dyn, DynRedlock, LockError, NodeFailure};
use redlock_redis::{RedisBackend, RedisErrorKind, RedisNodeError};

use crate::redis_common::{cluster, key, NODE_TIMEOUT};

#[test]
fn a_dyn_manager_locks_real_masters_and_keeps_their_typed_errors() {
    let servers = cluster(3);
    let locks: DynRedlock =
        connect_dyn::<RedisBackend, _>(servers.urls(), NODE_TIMEOUT).expect("valid URLs");
    let name = key("dyn");
    let lock = locks
        .try_lock(name.as_str(), Duration::from_secs(10))
        .expect("free");
    let other: DynRedlock =
        connect_dyn::<RedisBackend, _>(servers.urls(), NODE_TIMEOUT).expect("valid URLs");
    assert!(matches!(
        other.try_lock(name.as_str(), Duration::from_secs(10)),
        Err(LockError::Contended(_))
    ));
    lock.release().expect("release");

    // Two of three masters gone: no quorum, and each failure is the Redis
    // backend's own error underneath.
    servers.node(0).kill().expect("kill");
    servers.node(1).kill().expect("kill");
    let Err(LockError::NoQuorum(report)) = locks.try_lock(name.as_str(), Duration::from_secs(10))
    else {
        panic!("expected no quorum");
    };
    let kinds: Vec<RedisErrorKind> = report
        .failures()
        .iter()
        .filter_map(|f| match f.failure() {
            NodeFailure::Backend(e) => e.downcast_ref::<RedisNodeError>().map(|e| e.kind()),
            _ => None,
        })
        .collect();
    assert_eq!(kinds.len(), 2, "{report:?}");
    assert!(
        // The open connection breaks (Io), or a new one is refused.
        kinds
            .iter()
            .all(|k| matches!(k, RedisErrorKind::Io | RedisErrorKind::ConnectionRefused)),
        "{kinds:?}"
    );
}
