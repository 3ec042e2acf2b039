//! Bad input gets a typed error, never a panic or a hang.

use std::time::Duration;

use redlock_core::{BuildError, ConfigError, LockError, NodeId, Redlock, Ttl};
use redlock_mock::{MockCluster, MockNode};

fn locks() -> (MockCluster, Redlock<MockNode>) {
    let cluster = MockCluster::new(3);
    let locks = Redlock::new(cluster.backends()).expect("valid");
    (cluster, locks)
}

#[test]
fn no_nodes() {
    assert!(matches!(
        Redlock::new(Vec::<MockNode>::new()),
        Err(BuildError::Config(ConfigError::NoNodes))
    ));
}

#[test]
fn the_same_node_twice() {
    let node = MockNode::new("twice");
    let err = Redlock::new([node.clone(), MockNode::new("other"), node]).expect_err("duplicate");
    assert_eq!(
        err,
        BuildError::Config(ConfigError::DuplicateNode(NodeId::new("twice")))
    );
}

#[test]
fn ttl_zero() {
    let (_c, locks) = locks();
    for ttl in [Duration::ZERO, Duration::from_micros(999)] {
        let err = locks.try_lock("k", ttl).expect_err("zero");
        assert!(
            matches!(err, LockError::Config(ConfigError::TtlZero)),
            "{err:?}"
        );
    }
}

#[test]
fn ttl_too_large_for_millisecond_px() {
    let (_c, locks) = locks();
    for ttl in [Duration::MAX, Ttl::MAX + Duration::from_millis(1)] {
        let err = locks.lock("k", ttl).expect_err("too large");
        assert!(
            matches!(err, LockError::Config(ConfigError::TtlTooLarge { .. })),
            "{err:?}"
        );
    }
    // The largest TTL itself is fine.
    let lock = locks.try_lock("k", Ttl::MAX).expect("max ttl");
    assert!(lock.is_valid());
}

#[test]
fn ttl_within_the_drift_allowance() {
    let (_c, locks) = locks();
    let err = locks
        .try_lock("k", Duration::from_millis(2))
        .expect_err("2 ms of drift");
    assert!(
        matches!(err, LockError::Config(ConfigError::TtlWithinDrift { .. })),
        "{err:?}"
    );
}

#[test]
fn drift_factor_outside_zero_to_half() {
    for factor in [-0.01, 0.5, 1.0, f64::NAN, f64::INFINITY] {
        let err = Redlock::builder(MockCluster::new(3).backends())
            .drift_factor(factor)
            .build()
            .expect_err("bad");
        assert!(
            matches!(err, BuildError::Config(ConfigError::DriftFactor(_))),
            "{factor}: {err:?}"
        );
    }
    for factor in [0.0, 0.49] {
        Redlock::builder(MockCluster::new(3).backends())
            .drift_factor(factor)
            .build()
            .expect("in range");
    }
}

#[test]
fn jitter_range_inverted() {
    let err = Redlock::builder(MockCluster::new(3).backends())
        .retry_delay(Duration::from_millis(10), Duration::from_millis(5))
        .build()
        .expect_err("inverted");
    assert!(
        matches!(err, BuildError::Config(ConfigError::JitterRange { .. })),
        "{err:?}"
    );
    // Zero delays are legal.
    Redlock::builder(MockCluster::new(3).backends())
        .retry_delay(Duration::ZERO, Duration::ZERO)
        .build()
        .expect("zero");
}

#[test]
fn node_timeout_zero() {
    let err = Redlock::builder(MockCluster::new(3).backends())
        .node_timeout(Duration::ZERO)
        .build()
        .expect_err("zero");
    assert_eq!(err, BuildError::Config(ConfigError::NodeTimeoutZero));
}

#[test]
fn empty_key() {
    let (_c, locks) = locks();
    let err = locks
        .try_lock("", Duration::from_secs(1))
        .expect_err("empty");
    assert!(
        matches!(err, LockError::Config(ConfigError::EmptyKey)),
        "{err:?}"
    );
    let err = locks
        .lock(["ok", ""], Duration::from_secs(1))
        .expect_err("one empty");
    assert!(
        matches!(err, LockError::Config(ConfigError::EmptyKey)),
        "{err:?}"
    );
}

#[test]
fn an_empty_key_list() {
    let (_c, locks) = locks();
    let err = locks
        .try_lock(Vec::<String>::new(), Duration::from_secs(1))
        .expect_err("no keys");
    assert!(
        matches!(err, LockError::Config(ConfigError::NoKeys)),
        "{err:?}"
    );
    let none: [&str; 0] = [];
    let err = locks
        .lock_timeout(none, Duration::from_secs(1), Duration::from_secs(1))
        .expect_err("no keys");
    assert!(
        matches!(err, LockError::Config(ConfigError::NoKeys)),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

#[test]
fn bad_extend_ttl_keeps_the_lock() {
    let (_c, locks) = locks();
    let mut lock = locks.try_lock("k", Duration::from_secs(5)).expect("free");
    let err = lock.extend(Duration::ZERO).expect_err("zero");
    assert!(
        matches!(err, LockError::Config(ConfigError::TtlZero)),
        "{err:?}"
    );
    assert!(lock.is_valid());
    lock.release().expect("still held");
}

/// A mock node that declares fencing but grants without counters (a bug).
#[derive(Debug)]
struct Lying {
    node: MockNode,
}

impl redlock_core::backend::Fencing for Lying {}

impl redlock_core::backend::LockBackend for Lying {
    type Error = redlock_mock::MockError;
    fn node_id(&self) -> &NodeId {
        self.node.node_id()
    }
    fn acquire(
        &self,
        claim: &redlock_core::backend::Claim,
        ttl: Ttl,
        fence: bool,
    ) -> Result<redlock_core::backend::AcquireOutcome, Self::Error> {
        use redlock_core::backend::AcquireOutcome;
        Ok(match self.node.acquire(claim, ttl, fence)? {
            AcquireOutcome::Granted { .. } => AcquireOutcome::Granted { fence: None },
            other => other,
        })
    }
    fn extend(&self, claim: &redlock_core::backend::Claim, ttl: Ttl) -> Result<bool, Self::Error> {
        self.node.extend(claim, ttl)
    }
    fn release(&self, claim: &redlock_core::backend::Claim) -> Result<bool, Self::Error> {
        self.node.release(claim)
    }
    fn raise_fence(
        &self,
        claim: &redlock_core::backend::Claim,
        at_least: u64,
    ) -> Result<bool, Self::Error> {
        self.node.raise_fence(claim, at_least)
    }
}

#[test]
fn a_backend_that_declares_fencing_but_returns_no_counters_is_refused_and_released() {
    let nodes = [MockNode::new("a"), MockNode::new("b"), MockNode::new("c")];
    let locks = Redlock::builder(
        nodes
            .iter()
            .cloned()
            .map(|node| Lying { node })
            .collect::<Vec<_>>(),
    )
    .fencing(true)
    .build()
    .expect("declared");
    let err = locks
        .try_lock("fenced", std::time::Duration::from_secs(10))
        .expect_err("no counters");
    assert!(matches!(err, LockError::NoFencingCounters), "{err:?}");
    assert!(locks.flush(std::time::Duration::from_secs(5)));
    assert!(nodes.iter().all(|n| !n.is_locked("fenced")), "released");
}
