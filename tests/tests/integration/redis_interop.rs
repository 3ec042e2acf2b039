//! Our lock keys interoperate with any client that locks the same key with
//! plain `SET key token NX PX ttl` and unlocks by compare-and-delete (the
//! single-instance pattern of the Redis documentation): each side is refused
//! while the other holds, and neither deletes the other's key
//! (docs/migrating.md).

use std::time::Duration;

use redlock_redis::LockError;
use redlock_tests::harness::RedisServer;

use crate::redis_common::{cluster, exists, key, manager, NODE_TIMEOUT};

/// The compare-and-delete of the Redis documentation.
const UNLOCK: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end"#;

const TTL: Duration = Duration::from_secs(10);

/// The other client: `SET key token NX PX ttl` on one server; whether it got it.
fn foreign_lock(server: &RedisServer, name: &str, token: &str) -> bool {
    let mut conn = server.client().expect("client");
    let reply: Option<String> = redis::cmd("SET")
        .arg(name)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query(&mut conn)
        .expect("SET");
    reply.is_some()
}

/// The other client's unlock on one server: how many keys it deleted.
fn foreign_unlock(server: &RedisServer, name: &str, token: &str) -> i64 {
    let mut conn = server.client().expect("client");
    redis::Script::new(UNLOCK)
        .key(name)
        .arg(token)
        .invoke(&mut conn)
        .expect("unlock script")
}

#[test]
fn a_plain_set_nx_lock_refuses_us_and_our_lock_refuses_it() {
    let servers = cluster(3);
    let locks = manager(&servers, NODE_TIMEOUT);
    let name = key("interop");

    // They hold (on every server): we are refused, and leave their key alone.
    for server in servers.iter() {
        assert!(foreign_lock(server, &name, "their-token"));
    }
    let refused = locks.try_lock(name.as_str(), TTL);
    assert!(
        matches!(refused, Err(LockError::Contended(_))),
        "{refused:?}"
    );
    assert!(
        servers.iter().all(|s| exists(s, &name)),
        "their key deleted"
    );

    // They unlock with compare-and-delete: we get it.
    for server in servers.iter() {
        assert_eq!(foreign_unlock(server, &name, "their-token"), 1);
    }
    let ours = locks.try_lock(name.as_str(), TTL).expect("free now");
    // try_lock returns at a quorum; let the acquire run on every node.
    assert!(locks.flush(Duration::from_secs(5)), "nodes caught up");

    // We hold: their SET NX is refused and their unlock deletes nothing.
    for server in servers.iter() {
        assert!(
            !foreign_lock(server, &name, "their-token"),
            "{}",
            server.url()
        );
        assert_eq!(foreign_unlock(server, &name, "their-token"), 0);
        assert!(exists(server, &name));
    }

    // Our release frees it for them (on every node once the release, which
    // returns at a quorum, has run everywhere).
    ours.release().expect("release");
    assert!(locks.flush(Duration::from_secs(5)), "nodes caught up");
    for server in servers.iter() {
        assert!(foreign_lock(server, &name, "their-token"));
    }
}
