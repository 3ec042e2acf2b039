//! Holder identity and `Redlock::holder` on real servers: the identity goes
//! with the lock's own command, another manager reads it from a quorum, a
//! frozen master costs the call at most its bound (docs/guide.md, "Who
//! holds a lock"; `redlock status` across processes is in the CLI tests).

use std::time::{Duration, Instant};

use redlock_redis::backend::TOKEN_LEN;
use redlock_redis::{Identity, LockError, Redlock};

use crate::redis_common::{backends, calls, cluster, key, NODE_TIMEOUT};

const TTL: Duration = Duration::from_secs(30);

fn get(server: &redlock_tests::harness::RedisServer, name: &str) -> Option<Vec<u8>> {
    let mut admin = server.client().expect("client");
    redis::cmd("GET").arg(name).query(&mut admin).expect("GET")
}

/// The masters that hold `name`, by index.
fn holding(servers: &redlock_tests::harness::RedisCluster, name: &str) -> Vec<usize> {
    (0..servers.len())
        .filter(|&i| get(servers.node(i), name).is_some())
        .collect()
}

#[test]
fn another_manager_reads_the_identity_from_a_quorum() {
    let servers = cluster(5);
    let name = key("holder-identity");
    let me = Identity::new("worker-3:7001 ünïcode").expect("valid");
    let holder = Redlock::builder(backends(&servers, NODE_TIMEOUT))
        .node_timeout(NODE_TIMEOUT)
        .identity(me.clone())
        .fencing(true)
        .build()
        .expect("built");
    let watcher = Redlock::builder(backends(&servers, NODE_TIMEOUT))
        .node_timeout(NODE_TIMEOUT)
        .build()
        .expect("built");
    assert_eq!(watcher.holder(&name).expect("answered"), None);
    let before: Vec<u64> = servers.iter().map(|s| calls(s, "evalsha")).collect();
    let lock = holder.try_lock(&name, TTL).expect("free");
    // The call returned at a quorum: every master's answers first.
    assert!(holder.flush(Duration::from_secs(10)));
    // The identity is stored by the lock's own script, one per master:
    // no command of its own.
    let after: Vec<u64> = servers.iter().map(|s| calls(s, "evalsha")).collect();
    let token = lock.fencing_token().expect("fencing is on").value();
    // A quorum holds it; a master whose request came too late for the
    // round (a loaded machine) may not.
    let held = holding(&servers, &name);
    assert!(held.len() >= 3, "{held:?}");
    for &i in &held {
        let value = get(servers.node(i), &name).expect("held");
        assert_eq!(&value[TOKEN_LEN..], me.as_str().as_bytes());
        // The fenced acquire and its quorum raise, nothing more.
        let scripts = after[i] - before[i];
        assert!((1..=2).contains(&scripts), "{scripts} scripts");
    }
    let seen = watcher.holder(&name).expect("answered").expect("held");
    assert_eq!(seen.identity(), Some(&me));
    assert_eq!(seen.nodes(), held.len());
    assert_eq!(seen.fence(), Some(token));
    assert!(
        seen.ttl() <= TTL && seen.ttl() > TTL / 2,
        "{:?}",
        seen.ttl()
    );
    // Two masters gone (those without the key first): three holders still
    // answer; a third gone: no quorum of answers, an error.
    let mut order: Vec<usize> = (0..5).filter(|i| !held.contains(i)).collect();
    order.extend(held.iter().copied());
    servers.node(order[0]).kill().expect("kill");
    servers.node(order[1]).kill().expect("kill");
    assert_eq!(
        watcher.holder(&name).expect("3 of 5").map(|h| h.nodes()),
        Some(3)
    );
    servers.node(order[2]).kill().expect("kill");
    assert!(matches!(watcher.holder(&name), Err(LockError::NoQuorum(_))));
    drop(lock);
}

#[test]
fn a_lock_without_identity_is_the_token_alone() {
    let servers = cluster(3);
    let name = key("holder-plain");
    let locks = Redlock::builder(backends(&servers, NODE_TIMEOUT))
        .node_timeout(NODE_TIMEOUT)
        .build()
        .expect("built");
    let lock = locks.try_lock(&name, TTL).expect("free");
    assert!(locks.flush(Duration::from_secs(10)));
    let held = holding(&servers, &name);
    assert!(held.len() >= 2, "{held:?}");
    for &i in &held {
        assert_eq!(
            get(servers.node(i), &name).map(|v| v.len()),
            Some(TOKEN_LEN)
        );
    }
    let seen = locks.holder(&name).expect("answered").expect("held");
    assert_eq!((seen.identity(), seen.fence()), (None, None));
    lock.release().expect("released");
    assert_eq!(locks.holder(&name).expect("answered"), None);
}

#[test]
fn a_frozen_master_costs_holder_at_most_twice_the_node_timeout() {
    let servers = cluster(3);
    let name = key("holder-frozen");
    let timeout = Duration::from_millis(200);
    let locks = Redlock::builder(backends(&servers, timeout))
        .node_timeout(timeout)
        .identity(Identity::new("frozen-test").expect("valid"))
        .build()
        .expect("built");
    let _lock = locks.try_lock(&name, TTL).expect("free");
    assert!(locks.flush(Duration::from_secs(10)));
    // Freeze a master without the key if there is one: two holders answer.
    let held = holding(&servers, &name);
    let frozen = (0..3).find(|i| !held.contains(i)).unwrap_or(0);
    servers.node(frozen).pause().expect("SIGSTOP");
    let started = Instant::now();
    let seen = locks.holder(&name);
    let took = started.elapsed();
    servers.node(frozen).resume().expect("SIGCONT");
    let seen = seen.expect("2 of 3 answer").expect("held");
    assert_eq!(seen.nodes(), 2);
    assert_eq!(seen.identity().map(Identity::as_str), Some("frozen-test"));
    // A hang bound: ten times the documented two node timeouts.
    assert!(took < timeout * 2 * 10, "{took:?}");
}
