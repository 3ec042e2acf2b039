//! The conformance suite on the in-memory backend.

use redlock_mock::conformance::Conformance;
use redlock_mock::MockCluster;

#[test]
fn mock_backend_conforms() {
    let cluster = MockCluster::new(5);
    let nodes = cluster.backends();
    Conformance::new(move |n| nodes[..n].to_vec())
        .with_all_abilities()
        .with_inspect()
        .run_all()
        .expect("conformance");
}

#[test]
fn an_unknown_check_name_is_an_error() {
    let nodes = MockCluster::new(1).backends();
    let suite = Conformance::new(move |n| nodes[..n].to_vec());
    assert!(suite.run("no-such-check").is_err());
}
