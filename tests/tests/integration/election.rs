//! Leader election on in-memory nodes (`Redlock::election`,
//! docs/guide.md "Leader election"): one leader at a time among candidates
//! of separate managers, terms rising, the loss told, observers that
//! never see a term go back. On real servers and across processes:
//! `redis_election.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_core::election::{Election, Observed};
use redlock_core::{ConfigError, Identity, LockError, LostReason, Redlock};
use redlock_mock::{MockCluster, MockNode};

const TTL: Duration = Duration::from_secs(2);

fn candidate(cluster: &MockCluster, name: &str) -> Redlock<MockNode> {
    Redlock::builder(cluster.backends())
        .fencing(true)
        .identity(Identity::new(name).expect("valid"))
        .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
        .build()
        .expect("built")
}

/// A manager that only observes: no identity, no candidate.
fn observer_manager(cluster: &MockCluster) -> Redlock<MockNode> {
    Redlock::builder(cluster.backends())
        .fencing(true)
        .build()
        .expect("built")
}

#[test]
fn candidates_of_three_managers_lead_one_at_a_time_with_rising_terms() {
    let cluster = MockCluster::new(5);
    let managers: Vec<_> = (0..3)
        .map(|i| candidate(&cluster, &format!("candidate-{i}")))
        .collect();
    let inside = AtomicUsize::new(0);
    let log = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (i, locks) in managers.iter().enumerate() {
            let (inside, log) = (&inside, &log);
            s.spawn(move || {
                let election = locks.election("scheduler", TTL).expect("election");
                for _ in 0..4 {
                    let leadership = election.campaign().expect("elected");
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two leaders");
                    // Who the nodes say leads is this leadership.
                    let leader = election.leader().expect("read").expect("a leader");
                    assert_eq!(leader.term(), leadership.term());
                    assert_eq!(
                        leader.identity().map(Identity::as_str),
                        Some(format!("candidate-{i}").as_str())
                    );
                    log.lock().expect("log").push(leadership.term());
                    std::thread::sleep(Duration::from_millis(5));
                    leadership.ensure_held().expect("still leads");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    leadership.resign().expect("resigned");
                }
            });
        }
    });
    let terms = log.into_inner().expect("log");
    assert_eq!(terms.len(), 12);
    assert!(
        terms.windows(2).all(|w| w[0] < w[1]),
        "terms not rising in the order leaders led: {terms:?}"
    );
}

#[test]
fn a_leader_that_loses_its_quorum_is_told_before_its_validity_ends() {
    let cluster = MockCluster::new(5);
    let locks = Redlock::builder(cluster.backends())
        .fencing(true)
        .node_timeout(Duration::from_millis(50))
        .build()
        .expect("built");
    let told = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&told);
    let election = locks
        .election("lost", Duration::from_secs(2))
        .expect("election")
        .on_lost(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        });
    let leadership = election.campaign().expect("elected");
    let valid_until = Instant::now() + leadership.validity();
    for i in 0..3 {
        cluster.node(i).go_down();
    }
    let reason = leadership.wait_lost(Duration::from_secs(10));
    let at = Instant::now();
    assert_eq!(reason, Some(LostReason::ExtendFailed));
    assert!(
        at < valid_until,
        "told {:?} after its validity ended",
        at - valid_until
    );
    assert!(leadership.is_lost());
    assert!(matches!(
        leadership.ensure_held(),
        Err(LockError::Lost { .. })
    ));
    redlock_tests::harness::wait_until(Duration::from_secs(10), "the callback", || {
        told.load(Ordering::SeqCst) == 1
    })
    .expect("told once");
}

#[test]
fn an_observer_sees_each_leader_in_order_and_the_vacancies_between() {
    let cluster = MockCluster::new(3);
    let a = candidate(&cluster, "a");
    let b = candidate(&cluster, "b");
    let watcher = observer_manager(&cluster);
    let watched = watcher
        .election("jobs", TTL)
        .expect("election")
        .poll_interval(Duration::from_millis(5));
    let mut observer = watched.observe();
    let next = |observer: &mut redlock_core::election::Observer<'_, MockNode>| {
        observer
            .next_timeout(Duration::from_secs(10))
            .expect("read")
            .expect("a change within the bound")
    };
    assert_eq!(next(&mut observer), Observed::Vacant);
    let mut terms = Vec::new();
    for (locks, name) in [(&a, "a"), (&b, "b"), (&a, "a")] {
        let election: Election<MockNode> = locks.election("jobs", TTL).expect("election");
        let leadership = election.campaign().expect("elected");
        match next(&mut observer) {
            Observed::Leader(leader) => {
                assert_eq!(leader.term(), leadership.term());
                assert_eq!(leader.identity().map(Identity::as_str), Some(name));
                terms.push(leader.term());
            }
            Observed::Vacant => panic!("vacant while {name} leads"),
        }
        leadership.resign().expect("resigned");
        assert_eq!(next(&mut observer), Observed::Vacant);
    }
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "{terms:?}");
    // Nothing changes: nothing is reported.
    assert_eq!(
        observer
            .next_timeout(Duration::from_millis(50))
            .expect("read"),
        None
    );
}

/// An observer on a manager with no candidate of its own (it only
/// watches) hears of a resignation from the nodes: its readings watch the
/// election's key, and the release tells it. With an hour's poll interval,
/// only that can report the vacancy within the bound.
#[test]
fn an_observer_without_a_candidate_is_woken_by_a_resignation() {
    let cluster = MockCluster::new(3);
    let leader = candidate(&cluster, "a");
    let watcher = observer_manager(&cluster);
    let watched = watcher
        .election("jobs", TTL)
        .expect("election")
        .poll_interval(Duration::from_secs(3_600));
    let leadership = leader
        .election("jobs", TTL)
        .expect("election")
        .campaign()
        .expect("elected");
    let mut observer = watched.observe();
    let bound = Duration::from_secs(30);
    match observer.next_timeout(bound).expect("read") {
        Some(Observed::Leader(seen)) => assert_eq!(seen.term(), leadership.term()),
        other => panic!("{other:?}"),
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            leadership.resign().expect("resigned");
        });
        assert_eq!(
            observer.next_timeout(bound).expect("read"),
            Some(Observed::Vacant),
            "not woken by the resignation"
        );
    });
}

#[test]
fn an_election_needs_fencing_and_a_valid_name_and_ttl() {
    let cluster = MockCluster::new(3);
    let plain = Redlock::new(cluster.backends()).expect("built");
    assert!(matches!(
        plain.election("e", TTL),
        Err(ConfigError::ElectionNeedsFencing { .. })
    ));
    let fenced = candidate(&cluster, "x");
    assert!(matches!(
        fenced.election("", TTL),
        Err(ConfigError::EmptyKey)
    ));
    assert!(matches!(
        fenced.election("e\u{1f}fence", TTL),
        Err(ConfigError::ReservedChar { .. })
    ));
    assert!(fenced.election("e", Duration::ZERO).is_err());
    // A bounded campaign against a leader that stays gives up.
    let election = fenced.election("e", TTL).expect("election");
    let _leader = election.campaign().expect("elected");
    let other = candidate(&cluster, "y");
    let started = Instant::now();
    assert!(matches!(
        other
            .election("e", TTL)
            .expect("election")
            .campaign_timeout(Duration::from_millis(100)),
        Err(LockError::Timeout { .. } | LockError::Contended(_))
    ));
    assert!(started.elapsed() < Duration::from_secs(10));
}
