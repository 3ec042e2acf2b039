//! Holder identity and "who holds this lock?" on in-memory nodes
//! (`Builder::identity`, `Redlock::holder`, docs/guide.md "Who holds a
//! lock"); the same on real servers is in `redis_holder.rs`.

use std::time::{Duration, Instant};

use redlock_core::backend::{LockBackend, TOKEN_LEN};
use redlock_core::{ConfigError, Identity, LockError, Redlock};
use redlock_mock::{MockCluster, MockNode};

const TTL: Duration = Duration::from_secs(30);

/// The nodes that hold `key`, by index.
fn holding(cluster: &MockCluster, key: &str) -> Vec<usize> {
    (0..cluster.nodes().len())
        .filter(|&i| cluster.node(i).is_locked(key))
        .collect()
}

fn named(cluster: &MockCluster, name: &str) -> Redlock<MockNode> {
    Redlock::builder(cluster.backends())
        .identity(Identity::new(name).expect("valid"))
        .fencing(true)
        .build()
        .expect("built")
}

#[test]
fn another_manager_sees_the_holders_identity_ttl_and_fencing_token() {
    let cluster = MockCluster::new(5);
    let holder = named(&cluster, "billing-7:4242");
    let watcher = Redlock::new(cluster.backends()).expect("built");
    assert_eq!(watcher.holder("invoices").expect("answered"), None);
    let lock = holder.try_lock("invoices", TTL).expect("free");
    // The call returned at a quorum: every node's grant first.
    assert!(holder.flush(Duration::from_secs(10)));
    let seen = watcher.holder("invoices").expect("answered").expect("held");
    assert_eq!(
        seen.identity().map(Identity::as_str),
        Some("billing-7:4242")
    );
    // A quorum holds it (a node whose request came too late for the round,
    // on a loaded machine, may not).
    let held = holding(&cluster, "invoices");
    assert!(held.len() >= 3, "{held:?}");
    assert_eq!(seen.nodes(), held.len());
    assert!(
        seen.ttl() <= TTL && seen.ttl() > TTL / 2,
        "{:?}",
        seen.ttl()
    );
    assert_eq!(seen.fence(), lock.fencing_token().map(|t| t.value()));
    // Each node stores the token, then the identity, under the key.
    for &i in &held {
        let node = cluster.node(i);
        let view = node
            .inspect("invoices", None)
            .expect("the mock can")
            .expect("up");
        let value = view.value.expect("held");
        assert_eq!(&value[TOKEN_LEN..], b"billing-7:4242");
        assert_eq!(
            node.holder("invoices").map(|t| t.as_bytes().to_vec()),
            Some(value[..TOKEN_LEN].to_vec())
        );
    }
    // The identity does not make the lock anyone else's: released and
    // extended by its own token only.
    let mut lock = lock;
    assert!(lock.extend(TTL).is_ok());
    lock.release().expect("released");
    assert_eq!(watcher.holder("invoices").expect("answered"), None);
    assert!(cluster.nodes().iter().all(|n| !n.is_locked("invoices")));
}

#[test]
fn a_lock_without_identity_stores_the_token_alone() {
    let cluster = MockCluster::new(3);
    let locks = Redlock::new(cluster.backends()).expect("built");
    let _lock = locks.try_lock("plain", TTL).expect("free");
    assert!(locks.flush(Duration::from_secs(10)));
    for i in holding(&cluster, "plain") {
        let view = cluster
            .node(i)
            .inspect("plain", None)
            .expect("the mock can")
            .expect("up");
        assert_eq!(view.value.map(|v| v.len()), Some(TOKEN_LEN));
    }
    let seen = locks.holder("plain").expect("answered").expect("held");
    assert_eq!(seen.identity(), None);
    assert_eq!(seen.token_prefix().len(), 6);
}

#[test]
fn bad_identities_are_typed_errors() {
    for bad in [
        String::new(),
        "x".repeat(Identity::MAX_LEN + 1),
        "two\nlines".to_owned(),
        "\u{1b}[2Jclear".to_owned(),
    ] {
        match Identity::new(bad.clone()) {
            Err(ConfigError::Identity { why, .. }) => assert!(!why.is_empty()),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert!(Identity::new("x".repeat(Identity::MAX_LEN)).is_ok());
}

#[test]
fn the_holder_needs_a_quorum_of_answers_and_of_holders() {
    let cluster = MockCluster::new(3);
    let locks = named(&cluster, "a");
    // Held on one node only (a round under way, or a ghost): no holder.
    cluster.node(0).set_string("minority", &[9; 24]);
    assert_eq!(locks.holder("minority").expect("answered"), None);
    let _lock = locks.try_lock("k", TTL).expect("free");
    assert!(locks.flush(Duration::from_secs(10)));
    // Down first a node without the key, if there is one.
    let held = holding(&cluster, "k");
    let mut order: Vec<usize> = (0..3).filter(|i| !held.contains(i)).collect();
    order.extend(held.iter().copied());
    cluster.node(order[0]).go_down();
    assert!(locks.holder("k").expect("2 of 3 answer").is_some());
    cluster.node(order[1]).go_down();
    match locks.holder("k") {
        Err(LockError::NoQuorum(report)) => {
            assert_eq!((report.nodes(), report.granted()), (3, 1));
            assert_eq!(report.failures().len(), 2);
        }
        other => panic!("{other:?}"),
    }
    for bad in ["", "a\u{1f}fence"] {
        assert!(
            matches!(locks.holder(bad), Err(LockError::Config(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn a_frozen_node_costs_holder_at_most_twice_the_node_timeout() {
    let cluster = MockCluster::new(3);
    let timeout = Duration::from_millis(50);
    let locks = Redlock::builder(cluster.backends())
        .node_timeout(timeout)
        .identity(Identity::new("f").expect("valid"))
        .build()
        .expect("built");
    let _lock = locks.try_lock("k", TTL).expect("free");
    assert!(locks.flush(Duration::from_secs(10)));
    let held = holding(&cluster, "k");
    let frozen = (0..3).find(|i| !held.contains(i)).unwrap_or(2);
    cluster.node(frozen).freeze();
    let started = Instant::now();
    let seen = locks.holder("k").expect("2 of 3 answer").expect("held");
    // A hang bound: ten times the documented two node timeouts.
    assert!(
        started.elapsed() < timeout * 2 * 10,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(seen.nodes(), 2);
    cluster.node(frozen).thaw();
}
