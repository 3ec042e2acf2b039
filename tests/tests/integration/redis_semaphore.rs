//! The counting semaphore on real redis-server masters: never more than
//! `permits` holders across managers, also when masters are killed mid-run,
//! and nothing left behind.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use redlock_redis::{ConfigError, LockError, MAX_PERMITS};
use redlock_tests::harness::wait_until;

use crate::redis_common::{cluster, exists, key, manager, NODE_TIMEOUT};

const TTL: Duration = Duration::from_secs(10);

#[test]
fn sixteen_contenders_on_three_permits_never_exceed_three_while_two_masters_are_killed() {
    let cluster = cluster(5);
    // Four managers, as four processes would have, of four threads each.
    let managers: Vec<_> = (0..4).map(|_| manager(&cluster, NODE_TIMEOUT)).collect();
    let name = key("semaphore-sixteen");
    let inside = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    // Raised just before the kills: a release may fail only from then on,
    // and only as a round that a killed master failed (a permit won on
    // three of five masters, one of them killed under it, is released on
    // two: the release says so, and the key expires there by its TTL).
    let killing = AtomicBool::new(false);
    let cut_short = AtomicUsize::new(0);
    const ROUNDS: usize = 12;
    std::thread::scope(|s| {
        for locks in &managers {
            for _ in 0..4 {
                let (inside, most, done, name) = (&inside, &most, &done, name.as_str());
                let (killing, cut_short) = (&killing, &cut_short);
                s.spawn(move || {
                    let permits = locks.semaphore(name, 3).expect("semaphore");
                    for _ in 0..ROUNDS {
                        let permit = permits
                            .acquire_timeout(TTL, Duration::from_secs(60))
                            .expect("a permit: a quorum stays up");
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(1));
                        inside.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                        if let Err(e) = permit.release() {
                            let killed_one = e.report().is_some_and(|r| !r.failures().is_empty());
                            assert!(
                                killing.load(Ordering::SeqCst) && killed_one,
                                "a release failed with no master killed under it: {e}"
                            );
                            cut_short.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        }
        // Mid-run: two of five masters die (kill -9).
        wait_until(Duration::from_secs(60), "a third of the cycles", || {
            done.load(Ordering::SeqCst) >= 16 * ROUNDS / 3
        })
        .expect("progress");
        killing.store(true, Ordering::SeqCst);
        cluster.node(0).kill().expect("kill -9");
        cluster.node(3).kill().expect("kill -9");
    });
    assert_eq!(done.load(Ordering::SeqCst), 16 * ROUNDS);
    // Only permits held across a kill can have lost their quorum: at most
    // three across each of the two.
    let cut_short = cut_short.load(Ordering::SeqCst);
    assert!(
        cut_short <= 6,
        "{cut_short} releases failed, more than were held across the kills"
    );
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 3, "{most} holders at once");
    assert!(most >= 2, "the permits were never held together: a mutex?");
    // Every permit was released on the live masters (a release returns on
    // a quorum's answer; the third live master may answer just after).
    for i in [1, 2, 4] {
        for slot in 0..3 {
            let permit_key = format!("{name}{}{slot}", redlock_core::keys::PERMIT_INFIX);
            wait_until(Duration::from_secs(10), &permit_key, || {
                !exists(cluster.node(i), &permit_key)
            })
            .unwrap_or_else(|e| panic!("left on master {i}: {e}"));
        }
    }
}

#[test]
fn bad_input_gets_a_typed_error_and_a_name_is_a_semaphore_or_a_mutex_not_both() {
    let cluster = cluster(3);
    let locks = manager(&cluster, NODE_TIMEOUT);
    let name = key("semaphore-mixed");
    assert_eq!(
        locks.semaphore(&name, 0).err(),
        Some(ConfigError::NoPermits)
    );
    assert_eq!(
        locks.semaphore(&name, MAX_PERMITS + 1).err(),
        Some(ConfigError::TooManyPermits {
            permits: MAX_PERMITS + 1,
            max: MAX_PERMITS
        })
    );
    let s = locks.semaphore(&name, 2).expect("semaphore");
    let err = locks.try_lock(name.as_str(), TTL).expect_err("mixed");
    assert!(
        matches!(
            &err,
            LockError::Config(ConfigError::SemaphoreName { permits: 2, .. })
        ),
        "{err}"
    );
    assert_eq!(
        locks.semaphore(&name, 3).err(),
        Some(ConfigError::SemaphoreName {
            name: name.clone(),
            permits: 2
        })
    );
    let a = s.try_acquire(TTL).expect("free");
    let b = s.try_acquire(TTL).expect("free");
    assert!(matches!(s.try_acquire(TTL), Err(LockError::Contended(_))));
    drop((a, b));
}
