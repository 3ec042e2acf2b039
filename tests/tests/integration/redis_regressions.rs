//! Real-Redis regression tests of the bug-fix issue not covered elsewhere:
//! each is named after its bug and failed before the fix.

use std::time::{Duration, Instant};

use redlock_redis::{ConfigError, ConnectError, RedisBackend, Redlock};

use crate::redis_common::{cluster, exists, key, manager};

/// Ten times and more what anything here should take: only a hang fails.
const BOUND: Duration = Duration::from_secs(10);

#[test]
fn bug_node_timeout_zero_connect_reported_a_bad_address() {
    let err = Redlock::builder(Vec::<RedisBackend>::new())
        .node_timeout(Duration::ZERO)
        .connect(["redis://127.0.0.1:1"])
        .expect_err("a zero timeout");
    assert!(
        matches!(err, ConnectError::Config(ConfigError::NodeTimeoutZero)),
        "{err:?}"
    );
}

#[test]
fn bug_flush_said_true_while_masters_were_frozen() {
    let servers = cluster(5);
    let locks = manager(&servers, Duration::from_millis(200));
    let name = key("flush-frozen");
    let lock = locks
        .try_lock(name.as_str(), Duration::from_secs(30))
        .expect("free");
    assert!(locks.flush(BOUND));
    for i in 0..3 {
        servers.node(i).pause().expect("SIGSTOP");
    }
    drop(lock);
    // Three masters have not run the release: not caught up.
    let caught_up = locks.flush(Duration::from_secs(1));
    for i in 0..3 {
        servers.node(i).resume().expect("SIGCONT");
    }
    assert!(!caught_up, "flush said every master caught up");
    // Once they answer again, the kept releases reach them.
    let deadline = Instant::now() + BOUND;
    while !locks.flush(Duration::from_secs(1)) && Instant::now() < deadline {}
    assert!(locks.flush(BOUND));
    for server in servers.iter() {
        assert!(!exists(server, &name), "key left on {}", server.url());
    }
}

#[test]
fn bug_a_ten_megabyte_key_left_a_ghost_on_every_master() {
    let servers = cluster(5);
    // The default node timeout: writing and storing 10 MB takes longer.
    let locks = manager(&servers, Duration::from_millis(50));
    let name = format!("{}:{}", key("ten-mb"), "x".repeat(10 << 20));
    // Whatever the attempt says (most likely a timeout), it leaves nothing.
    let attempt = locks.try_lock(name.as_str(), Duration::from_secs(30));
    drop(attempt);
    let deadline = Instant::now() + BOUND;
    let left = loop {
        let left: Vec<_> = servers.iter().filter(|s| exists(s, &name)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            break left.len();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(left, 0, "ghost keys left");
}

#[test]
fn bug_one_process_starved_another_through_its_local_line() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    use crate::redis_common::Overlap;

    let servers = cluster(5);
    // Two managers with their own workers and lines, as two processes.
    let managers = [
        manager(&servers, Duration::from_millis(200)),
        manager(&servers, Duration::from_millis(200)),
    ];
    let name = key("starved");
    let overlap = Overlap::default();
    let stop = Arc::new(AtomicBool::new(false));
    let counts = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    std::thread::scope(|s| {
        for (side, locks) in managers.iter().enumerate() {
            for _ in 0..4 {
                let (name, overlap, stop, count) = (&name, &overlap, &stop, &counts[side]);
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(lock) = locks.lock_timeout(
                            name.as_str(),
                            Duration::from_secs(10),
                            Duration::from_secs(1),
                        ) else {
                            continue;
                        };
                        overlap.enter();
                        std::thread::yield_now();
                        overlap.leave();
                        count.fetch_add(1, Ordering::Relaxed);
                        let _ = lock.release();
                    }
                });
            }
        }
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::Relaxed);
    });
    let (a, b) = (
        counts[0].load(Ordering::Relaxed),
        counts[1].load(Ordering::Relaxed),
    );
    assert!(!overlap.overlapped(), "two holders at once");
    // Generous: fair is 50 %, the bug gave one side 0 %.
    let total = a + b;
    assert!(
        total > 0 && a * 10 >= total && b * 10 >= total,
        "shares {a} vs {b}: one manager starved the other"
    );
}

/// docs/design.md (local lines): an uncontended `lock` "stays one plain
/// round". Every `lock` owner's first round used to be a queued acquire, a
/// Lua script on each master (the cause of the wave's 1x1 and 32x
/// slowdown); it is one `SET NX` now, and the release the only script.
#[test]
fn bug_an_uncontended_lock_ran_a_script_instead_of_one_set() {
    use crate::redis_common::calls;
    let servers = cluster(3);
    let locks = manager(&servers, Duration::from_millis(500));
    let name = key("plain-first");
    let before: Vec<(u64, u64)> = servers
        .iter()
        .map(|s| (calls(s, "set"), calls(s, "evalsha") + calls(s, "eval")))
        .collect();
    for _ in 0..10 {
        locks
            .lock_timeout(name.as_str(), Duration::from_secs(10), BOUND)
            .expect("uncontended")
            .release()
            .expect("held");
    }
    assert!(locks.flush(BOUND));
    for (server, (set0, script0)) in servers.iter().zip(before) {
        let sets = calls(server, "set") - set0;
        let scripts = calls(server, "evalsha") + calls(server, "eval") - script0;
        assert_eq!(
            (sets, scripts),
            (10, 10),
            "{}: SETs and scripts",
            server.url()
        );
    }
}

/// Review issue, bug 4: a fencing counter at its largest value made the
/// acquire scripts set the lock keys and then fail in `INCR` (keys left
/// behind, an untyped error); above 2^53 Lua's doubles rounded counters
/// (a granted counter came back as `i64::MIN`); and the raise could write
/// a value `INCR` cannot go past. Now both refuse before writing, with
/// [`RedisErrorKind::FenceExhausted`](redlock_redis::RedisErrorKind).
#[test]
fn bug_a_counter_at_its_largest_value_left_lock_keys_behind() {
    use redlock_redis::backend::{Claim, LockBackend, Token};
    use redlock_redis::{RedisErrorKind, Resources, Ttl, FENCE_SUFFIX};

    use crate::redis_common::{backend, claim};

    let server = redlock_tests::harness::RedisServer::start().expect("redis-server");
    let node = backend(&server, &server.url(), crate::redis_common::NODE_TIMEOUT);
    let mut admin = server.client().expect("client");
    let limit = redlock_redis::decide::FENCE_LIMIT;
    let ttl = Ttl::new(Duration::from_secs(30)).expect("ttl");
    for (value, refused) in [
        (limit - 2, false),
        (limit - 1, true),
        (i64::MAX as u64, true),
    ] {
        let name = key(&format!("fence-limit-{value}"));
        let counter = format!("{name}{FENCE_SUFFIX}");
        redis::cmd("SET")
            .arg(&counter)
            .arg(value)
            .exec(&mut admin)
            .expect("SET");
        let result = node.acquire(&claim(&name), ttl, true);
        if refused {
            let err = result.expect_err("a counter that cannot rise");
            assert_eq!(err.kind(), RedisErrorKind::FenceExhausted, "{err}");
            assert!(!exists(&server, &name), "the lock key was left behind");
            let kept: u64 = redis::cmd("GET")
                .arg(&counter)
                .query(&mut admin)
                .expect("GET");
            assert_eq!(kept, value, "the counter changed");
        } else {
            let granted = result.expect("the last value that can rise");
            assert!(
                matches!(granted, redlock_redis::backend::AcquireOutcome::Granted { fence: Some(v) } if v == limit - 1),
                "{granted:?}"
            );
        }
    }
    // Multi-key, the counter of the second key at the limit: nothing set.
    let (a, b) = (key("fence-limit-a"), key("fence-limit-b"));
    redis::cmd("SET")
        .arg(format!("{b}{FENCE_SUFFIX}"))
        .arg(limit - 1)
        .exec(&mut admin)
        .expect("SET");
    let both = Claim::new(
        Resources::new([a.as_str(), b.as_str()]).expect("keys"),
        Token::random().expect("entropy"),
    );
    let err = node.acquire(&both, ttl, true).expect_err("refused");
    assert_eq!(err.kind(), RedisErrorKind::FenceExhausted, "{err}");
    assert!(!exists(&server, &a) && !exists(&server, &b));
    assert!(!exists(&server, &format!("{a}{FENCE_SUFFIX}")));
    // The raise refuses a value past i64::MAX instead of writing it.
    let name = key("fence-limit-raise");
    let held = claim(&name);
    node.acquire(&held, ttl, true).expect("granted");
    let err = node
        .raise_fence(&held, limit + 1)
        .expect_err("a value past the limit");
    assert_eq!(err.kind(), RedisErrorKind::FenceExhausted, "{err}");
    let kept: u64 = redis::cmd("GET")
        .arg(format!("{name}{FENCE_SUFFIX}"))
        .query(&mut admin)
        .expect("GET");
    assert_eq!(kept, 1);
    assert!(node.raise_fence(&held, limit).expect("in range"));
}
