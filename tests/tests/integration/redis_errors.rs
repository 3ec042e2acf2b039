//! Real servers in unusual states map to typed per-node errors; TLS, ACL
//! users and unix sockets work; the conformance suite and a hot-key soak run
//! on Redis.

use std::time::{Duration, Instant};

use redlock_mock::conformance::Conformance;
use redlock_redis::backend::{Claim, LockBackend, Token};
use redlock_redis::{LockError, NodeFailure, RedisBackend, RedisErrorKind, Resources, Ttl};
use redlock_tests::harness::{AclUser, RedisCluster, RedisServer, ServerOptions};

use crate::redis_common::{
    backend, backends, claim, cluster, command_calls, key, manager, manager_over, Overlap,
    NODE_TIMEOUT,
};

const TTL: Duration = Duration::from_secs(10);

fn ttl() -> Ttl {
    Ttl::new(TTL).expect("ttl")
}

/// Runs one round over `cluster` plus `odd` (appended last) and returns the
/// typed error reported for `odd`.
fn error_for_odd_node(
    cluster: &RedisCluster,
    odd: RedisBackend,
    name: &str,
) -> redlock_redis::RedisNodeError {
    let odd_id = odd.node_id().clone();
    let mut nodes = backends(cluster, NODE_TIMEOUT);
    nodes.push(odd);
    let locks = manager_over(nodes, NODE_TIMEOUT);
    // Another holder on one healthy master: with the odd node failing, the
    // round (quorum 3 of 4) cannot be decided before the odd node answers,
    // so its error is in the report.
    let other = claim(name);
    for server in cluster.iter().take(1) {
        assert!(backend(server, &server.url(), NODE_TIMEOUT)
            .acquire(&other, ttl(), false)
            .expect("up")
            .is_granted());
    }
    let err = locks.try_lock(name, TTL).expect_err("cannot win");
    let report = err.report().unwrap_or_else(|| panic!("no report in {err}"));
    let failure = report
        .failures()
        .iter()
        .find(|f| *f.node() == odd_id)
        .unwrap_or_else(|| panic!("the odd node is not named in {err}"));
    match failure.failure() {
        NodeFailure::Backend(e) => {
            assert_eq!(e.node(), &odd_id);
            assert!(err.to_string().contains(odd_id.as_str()), "{err}");
            e.clone()
        }
        other => panic!("expected a backend error, got {other}"),
    }
}

#[test]
fn a_wrong_password_is_an_auth_error_naming_the_node() {
    let cluster = cluster(3);
    let guarded =
        RedisServer::start_with(ServerOptions::new().password("right-password")).expect("server");
    let url = guarded.url_with_credentials(None, Some("wrong-password"));
    let odd = backend(&guarded, &url, NODE_TIMEOUT);
    let err = error_for_odd_node(&cluster, odd, &key("wrong-password"));
    assert_eq!(err.kind(), RedisErrorKind::Auth, "{err}");
    assert!(
        !format!("{err} {err:?}").contains("wrong-password"),
        "a password leaked: {err:?}"
    );
    // Without any password: NOAUTH, also an auth error.
    let odd = backend(
        &guarded,
        &guarded.url_with_credentials(None, None),
        NODE_TIMEOUT,
    );
    let err = odd
        .acquire(&claim(&key("no-password")), ttl(), false)
        .expect_err("NOAUTH");
    assert_eq!(err.kind(), RedisErrorKind::Auth, "{err}");
}

#[test]
fn a_full_noeviction_master_is_an_oom_error_naming_the_node() {
    let cluster = cluster(3);
    let full = RedisServer::start_with(
        ServerOptions::new()
            .config("maxmemory", "1mb")
            .config("maxmemory-policy", "noeviction"),
    )
    .expect("server");
    let mut admin = full.client().expect("client");
    // Fill it until writes are refused, by smaller and smaller values: a
    // large value can be refused for its own request's buffer while the
    // data still leave room for a lock (Redis 6.2's smaller allocator
    // overhead left it just below maxmemory after the first refusal).
    let mut i = 0;
    for size in [64 * 1024, 1024, 16] {
        let filler = "x".repeat(size);
        let mut refused = false;
        for _ in 0..10_000 {
            i += 1;
            if redis::cmd("SET")
                .arg(format!("filler:{i}"))
                .arg(&filler)
                .exec(&mut admin)
                .is_err()
            {
                refused = true;
                break;
            }
        }
        assert!(refused, "the server never filled up ({size}-byte values)");
    }
    let odd = backend(&full, &full.url(), NODE_TIMEOUT);
    let err = error_for_odd_node(&cluster, odd, &key("oom"));
    assert_eq!(err.kind(), RedisErrorKind::OutOfMemory, "{err}");
}

#[test]
fn a_lock_key_holding_a_list_is_a_wrongtype_error_naming_the_node() {
    let cluster = cluster(3);
    let odd_server = RedisServer::start().expect("server");
    let name = key("wrongtype");
    let mut admin = odd_server.client().expect("client");
    redis::cmd("RPUSH")
        .arg(&name)
        .arg("not-a-lock")
        .exec(&mut admin)
        .expect("RPUSH");
    // A multi-key claim goes through the Lua path; a single key through SET NX.
    let odd = backend(&odd_server, &odd_server.url(), NODE_TIMEOUT);
    let multi = Claim::new(
        Resources::new([name.clone(), key("wrongtype-2")]).expect("keys"),
        Token::random().expect("entropy"),
    );
    match odd.acquire(&multi, ttl(), true) {
        Err(e) => assert_eq!(e.kind(), RedisErrorKind::WrongType, "{e}"),
        Ok(outcome) => assert!(
            !outcome.is_granted(),
            "a list key was treated as a free lock"
        ),
    }
    redis::cmd("RPUSH")
        .arg(format!("{name}-r"))
        .arg("x")
        .exec(&mut admin)
        .expect("RPUSH");
    let held = claim(&format!("{name}-r"));
    let err = odd.release(&held).expect_err("WRONGTYPE on release");
    assert_eq!(err.kind(), RedisErrorKind::WrongType, "{err}");
    let err = error_for_odd_node(&cluster, odd, &format!("{name}-r"));
    assert_eq!(err.kind(), RedisErrorKind::WrongType, "{err}");
}

#[test]
fn tls_masters_serve_locks_over_rediss() {
    let cluster = RedisCluster::start(3, &ServerOptions::new().tls()).expect("TLS cluster");
    assert!(cluster.urls().iter().all(|u| u.starts_with("rediss://")));
    let locks = manager(&cluster, NODE_TIMEOUT);
    let name = key("tls");
    let mut lock = locks.try_lock(name.as_str(), TTL).expect("over TLS");
    lock.extend(TTL).expect("extend over TLS");
    lock.release().expect("release over TLS");
    // Without the test CA the handshake fails: the error is a TLS error.
    let server = cluster.node(0);
    let untrusted = RedisBackend::builder(server.url())
        .node_timeout(NODE_TIMEOUT)
        .build()
        .expect("valid");
    let err = untrusted
        .acquire(&claim(&name), ttl(), false)
        .expect_err("untrusted certificate");
    assert_eq!(err.kind(), RedisErrorKind::Tls, "{err}");
}

/// The poller waits on TLS connections as on plain ones: on the socket
/// while rustls holds no plaintext (`Wire::readiness`), so that replies
/// decrypted already are read, not waited for.
#[test]
fn tls_masters_serve_the_pollers_callers() {
    let cluster = RedisCluster::start(3, &ServerOptions::new().tls()).expect("TLS cluster");
    let servers: Vec<&RedisServer> = cluster.iter().collect();
    four_callers_through_the_poller(backends(&cluster, NODE_TIMEOUT), &servers, "tls-polled");
}

/// Four callers cycle 20 times each through the poller of a manager over
/// `nodes` (the masters `servers`); no key is left.
fn four_callers_through_the_poller(
    nodes: Vec<RedisBackend>,
    servers: &[&RedisServer],
    prefix: &str,
) {
    let locks = redlock_redis::Redlock::builder(nodes)
        .node_timeout(NODE_TIMEOUT)
        .own_rounds(false)
        .poller_from(1)
        .build()
        .expect("valid manager");
    let names: Vec<String> = (0..4).map(|i| key(&format!("{prefix}-{i}"))).collect();
    std::thread::scope(|s| {
        for name in &names {
            let locks = &locks;
            s.spawn(move || {
                for cycle in 0..20 {
                    let lock = locks
                        .try_lock(name.as_str(), TTL)
                        .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
                    lock.release()
                        .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
                }
            });
        }
    });
    assert!(
        locks.stats().manager.polled_batches > 0,
        "through the poller"
    );
    assert!(locks.flush(Duration::from_secs(30)), "caught up");
    for server in servers {
        let mut admin = server.client().expect("admin connection");
        for name in &names {
            let held: bool = redis::cmd("EXISTS")
                .arg(name.as_str())
                .query(&mut admin)
                .expect("EXISTS");
            assert!(!held, "{name} left on {}", server.port());
        }
    }
}

/// The library's ACL rule of docs/operations.md less `+info`, `+select`
/// and Pub/Sub (`+publish +subscribe`, the channels): what a lock client
/// needs to lock on database 0 without wake-ups. `redis_acl` runs the
/// documented rules exactly as written; `redis_wake` adds the Pub/Sub
/// ones it tests to this.
pub(crate) const DOCUMENTED_ACL: [&str; 18] = [
    "-@all",
    "+set",
    "+get",
    "+del",
    "+pexpire",
    "+incr",
    "+type",
    "+eval",
    "+evalsha",
    "+script|load",
    "+ping",
    "+time",
    "+zadd",
    "+zrem",
    "+zscore",
    "+zrange",
    "+zcard",
    "+zremrangebyscore",
];

#[test]
fn an_acl_user_limited_to_the_lock_prefix_can_lock_and_fence() {
    let user = AclUser::locker().keys("~locks:*").commands(DOCUMENTED_ACL);
    let cluster =
        RedisCluster::start(3, &ServerOptions::new().acl_user(user)).expect("ACL cluster");
    let locks = manager(&cluster, NODE_TIMEOUT);
    locks
        .try_lock([key("acl-a"), key("acl-b")], TTL)
        .expect("multi-key")
        .release()
        .expect("held");
    let node = backend(cluster.node(0), &cluster.node(0).url(), NODE_TIMEOUT);
    let fenced = claim(&key("acl-fenced"));
    assert!(node
        .acquire(&fenced, ttl(), true)
        .expect("fenced acquire")
        .is_granted());
    assert!(node.raise_fence(&fenced, 100).expect("raise"));
    assert!(node.extend(&fenced, ttl()).expect("extend"));
    assert!(node.release(&fenced).expect("release"));
    // Readers of a read-write lock, under the same rules.
    let doc = key("acl-doc");
    let mut read = locks.try_read(&doc, TTL).expect("a read");
    let err = locks.try_write(&doc, TTL).expect_err("a reader inside");
    assert!(matches!(err, LockError::Contended(_)), "{err}");
    read.extend(TTL).expect("a reader extends");
    read.release().expect("a reader releases");
    locks
        .try_write(&doc, TTL)
        .expect("free")
        .release()
        .expect("held");
    let outside = node
        .acquire(&claim("elsewhere:key"), ttl(), false)
        .expect_err("outside the prefix");
    assert_eq!(outside.kind(), RedisErrorKind::NoPermission, "{outside}");
}

#[test]
fn a_unix_socket_master_works() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("redis.sock");
    let _server = RedisServer::start_with(
        ServerOptions::new()
            .config("unixsocket", socket.to_str().expect("utf-8"))
            .config("unixsocketperm", "700"),
    )
    .expect("server");
    let url = format!("redis+unix://{}", socket.display());
    let node = RedisBackend::builder(&url)
        .node_timeout(NODE_TIMEOUT)
        .build()
        .expect("unix URL");
    assert!(
        node.node_id().as_str().starts_with("unix:"),
        "{}",
        node.node_id()
    );
    // One node: the TCP URL of the same server would count it twice.
    let locks = manager_over(vec![node], NODE_TIMEOUT);
    locks
        .try_lock(key("unix").as_str(), TTL)
        .expect("over the socket")
        .release()
        .expect("held");
}

/// The poller waits on unix sockets as on TCP ones (`Wire::readiness`).
#[test]
fn unix_socket_masters_serve_the_pollers_callers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut servers = Vec::new();
    let mut nodes = Vec::new();
    for i in 0..3 {
        let socket = dir.path().join(format!("redis-{i}.sock"));
        servers.push(
            RedisServer::start_with(
                ServerOptions::new()
                    .config("unixsocket", socket.to_str().expect("utf-8"))
                    .config("unixsocketperm", "700"),
            )
            .expect("server"),
        );
        let url = format!("redis+unix://{}", socket.display());
        nodes.push(
            RedisBackend::builder(&url)
                .node_timeout(NODE_TIMEOUT)
                .build()
                .expect("unix URL"),
        );
    }
    let servers: Vec<&RedisServer> = servers.iter().collect();
    four_callers_through_the_poller(nodes, &servers, "unix-polled");
}

#[test]
fn conformance_suite_on_redis() {
    let cluster = cluster(5);
    let urls = cluster.urls();
    Conformance::new(move |n| {
        urls[..n]
            .iter()
            .map(|u| {
                RedisBackend::builder(u)
                    .node_timeout(NODE_TIMEOUT)
                    .build()
                    .expect("valid")
            })
            .collect()
    })
    .with_all_abilities()
    .with_inspect()
    .run_all()
    .expect("redis conforms");
}

#[test]
fn thirty_two_threads_on_one_hot_key_for_ten_seconds_never_overlap() {
    let cluster = cluster(5);
    let locks = manager(&cluster, NODE_TIMEOUT);
    let name = key("hot");
    let overlap = Overlap::default();
    let until = Instant::now() + Duration::from_secs(10);
    let failures = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..32 {
            s.spawn(|| {
                while Instant::now() < until {
                    match locks.lock_timeout(name.as_str(), TTL, Duration::from_secs(1)) {
                        Ok(lock) => {
                            overlap.enter();
                            std::thread::yield_now();
                            overlap.leave();
                            // Mix explicit release and release on drop.
                            if overlap.done() % 2 == 0 {
                                let _ = lock.release();
                            }
                        }
                        Err(LockError::Timeout { .. }) => {}
                        Err(e) => {
                            failures.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            panic!("unexpected error under contention: {e}");
                        }
                    }
                }
            });
        }
    });
    assert!(!overlap.overlapped(), "two holders at once");
    assert!(overlap.done() > 0, "nobody ever acquired");
    assert!(
        locks.flush(Duration::from_secs(10)),
        "nodes did not catch up"
    );
    // No lock key is left without a TTL (fencing counters excepted).
    for server in cluster.iter() {
        let mut admin = server.client().expect("client");
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("locks:*")
            .query(&mut admin)
            .expect("KEYS");
        for k in keys
            .iter()
            .filter(|k| !k.ends_with(redlock_redis::FENCE_SUFFIX))
        {
            let ttl: i64 = redis::cmd("PTTL").arg(k).query(&mut admin).expect("PTTL");
            assert!(ttl > 0, "key {k} on {} has no TTL ({ttl})", server.port());
        }
    }
    eprintln!(
        "hot key: {} critical sections in 10 s by 32 threads",
        overlap.done()
    );
}

#[test]
fn a_pipelined_batch_fails_only_the_request_that_failed_even_after_script_flush() {
    let server = RedisServer::start().expect("server");
    let node = backend(&server, &server.url(), NODE_TIMEOUT);
    let mut admin = server.client().expect("client");
    let list = key("batch-list");
    redis::cmd("RPUSH")
        .arg(&list)
        .arg("x")
        .exec(&mut admin)
        .expect("RPUSH");
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .exec(&mut admin)
        .expect("SCRIPT FLUSH");
    let (on_list, fine, multi) = (
        claim(&list),
        claim(&key("batch-fine")),
        claim(&key("batch-multi")),
    );
    let multi = Claim::new(
        Resources::new([key("batch-multi"), key("batch-multi-2")]).expect("keys"),
        multi.token().clone(),
    );
    let batch = [
        redlock_redis::backend::Request::Acquire {
            claim: &on_list,
            ttl: ttl(),
            fence: false,
        },
        redlock_redis::backend::Request::Acquire {
            claim: &fine,
            ttl: ttl(),
            fence: false,
        },
        redlock_redis::backend::Request::Acquire {
            claim: &multi,
            ttl: ttl(),
            fence: true,
        },
        redlock_redis::backend::Request::Release { claim: &fine },
        redlock_redis::backend::Request::Release { claim: &multi },
    ];
    let mut out = Vec::new();
    node.run_batch(&batch, &mut out);
    assert_eq!(out.len(), 5);
    let err = out[0].as_ref().expect_err("a list is not a lock");
    assert_eq!(err.kind(), RedisErrorKind::WrongType, "{err}");
    assert!(matches!(
        out[1],
        Ok(redlock_redis::backend::Response::Acquire(
            redlock_redis::backend::AcquireOutcome::Granted { .. }
        ))
    ));
    assert!(
        matches!(
            out[2],
            Ok(redlock_redis::backend::Response::Acquire(
                redlock_redis::backend::AcquireOutcome::Granted { fence: Some(1) }
            ))
        ),
        "{:?}",
        out[2]
    );
    assert!(matches!(
        out[3],
        Ok(redlock_redis::backend::Response::Held(true))
    ));
    assert!(matches!(
        out[4],
        Ok(redlock_redis::backend::Response::Held(true))
    ));
    // The connection is still good for the next request.
    assert!(node.acquire(&fine, ttl(), false).expect("up").is_granted());
}

#[test]
fn a_batch_after_script_flush_retries_only_its_scripts_by_eval_and_stays_exclusive() {
    use redlock_redis::backend::{AcquireOutcome, Request, Response};
    let server = RedisServer::start().expect("server");
    // One connection: no new one (which would load the scripts) can race
    // the flush. Its node timeout also bounds the wait for that first
    // connection, made in the background: generous, since this test is
    // not about timeouts (CI under load once ran out of 500 ms there).
    let node = RedisBackend::builder(server.url())
        .node_timeout(Duration::from_secs(10))
        .pool_size(1)
        .build()
        .expect("valid");
    let mut admin = server.client().expect("client");
    let warm = claim(&key("flush-warm"));
    assert!(node.acquire(&warm, ttl(), false).expect("up").is_granted());
    assert!(node.release(&warm).expect("up"));
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .exec(&mut admin)
        .expect("SCRIPT FLUSH");
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut admin)
        .expect("CONFIG RESETSTAT");
    let (a, b) = (key("flush-a"), key("flush-b"));
    let pair = Claim::new(
        Resources::new([a.clone(), b.clone()]).expect("keys"),
        Token::random().expect("entropy"),
    );
    let single = claim(&a);
    let batch = [
        Request::Acquire {
            claim: &pair,
            ttl: ttl(),
            fence: false,
        },
        Request::Acquire {
            claim: &single,
            ttl: ttl(),
            fence: false,
        },
        Request::Release { claim: &pair },
        Request::Extend {
            claim: &single,
            ttl: ttl(),
        },
    ];
    let answers = answers_to(&node, &batch);
    // In batch order the pair would have won `a` and the single-key acquire
    // been refused. The scripts were answered NOSCRIPT and ran again after
    // the SET NX: the single-key acquire won, the pair was refused, and its
    // release found nothing of its own. One holder either way, and each
    // answer says what the node did.
    assert_eq!(
        answers,
        [
            Response::Acquire(AcquireOutcome::HeldByOther),
            Response::Acquire(AcquireOutcome::Granted { fence: None }),
            Response::Held(false),
            Response::Held(true),
        ]
    );
    let holder: Vec<u8> = redis::cmd("GET").arg(&a).query(&mut admin).expect("GET");
    assert_eq!(holder, single.token().as_bytes());
    let exists: u32 = redis::cmd("EXISTS")
        .arg(&b)
        .query(&mut admin)
        .expect("EXISTS");
    assert_eq!(exists, 0, "the refused pair left {b} behind");
    // The three scripts went by EVALSHA, then once each by EVAL.
    assert_eq!(command_calls(&mut admin, "evalsha"), 3);
    assert_eq!(command_calls(&mut admin, "eval"), 3);
    // EVAL cached them again: the next batch needs no retry.
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut admin)
        .expect("CONFIG RESETSTAT");
    let batch = [
        Request::Release { claim: &single },
        Request::Acquire {
            claim: &pair,
            ttl: ttl(),
            fence: true,
        },
        Request::Release { claim: &pair },
    ];
    let answers = answers_to(&node, &batch);
    assert_eq!(
        answers,
        [
            Response::Held(true),
            Response::Acquire(AcquireOutcome::Granted { fence: Some(1) }),
            Response::Held(true),
        ]
    );
    assert_eq!(command_calls(&mut admin, "evalsha"), 3);
    assert_eq!(command_calls(&mut admin, "eval"), 0);
}

/// Runs `batch` on `node` as one batch; every request must get an answer.
fn answers_to(
    node: &RedisBackend,
    batch: &[redlock_redis::backend::Request<'_>],
) -> Vec<redlock_redis::backend::Response> {
    let mut out = Vec::new();
    node.run_batch(batch, &mut out);
    out.into_iter()
        .map(|r| r.expect("no request fails"))
        .collect()
}
