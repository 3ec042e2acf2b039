//! The Redis backend's connection errors outside any request (its pool's
//! background connects) reach the manager's event hook and the node's last
//! error, redacted.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redlock_core::{Event, EventHandler};
use redlock_redis::{RedisBackend, Redlock};
use redlock_tests::harness::ServerOptions;

use crate::redis_common::{cluster, NODE_TIMEOUT};

struct Connections(Mutex<mpsc::Sender<(String, String)>>);

impl EventHandler for Connections {
    fn on_event(&self, event: &Event<'_>) {
        if let Event::Connection { node, error } = event {
            let _ = self.0.lock().send((node.to_string(), error.to_string()));
        }
    }
}

#[test]
fn background_connect_failures_reach_the_hook_without_the_password() {
    let servers = cluster(2);
    let secured = ServerOptions::new()
        .password("s3cret-pw")
        .start()
        .expect("server");
    // Node 3: the right port, a wrong password: every connect fails.
    let wrong = secured.url_with_credentials(None, Some("not-the-password"));
    let mut backends: Vec<RedisBackend> = servers
        .iter()
        .map(|s| {
            RedisBackend::builder(s.url())
                .node_timeout(NODE_TIMEOUT)
                .build()
                .expect("backend")
        })
        .collect();
    backends.push(
        RedisBackend::builder(&wrong)
            .node_timeout(NODE_TIMEOUT)
            .build()
            .expect("backend"),
    );
    let (tx, rx) = mpsc::channel();
    let locks = Redlock::builder(backends)
        .node_timeout(NODE_TIMEOUT)
        .events(Arc::new(Connections(Mutex::new(tx))))
        .build()
        .expect("manager");
    let third = locks.nodes().nth(2).expect("three nodes").to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let (node, error) = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let seen = rx
            .recv_timeout(left)
            .expect("a connection event within 20 s");
        if seen.0 == third {
            break seen;
        }
    };
    assert_eq!(node, third);
    assert!(!error.contains("not-the-password"), "{error}");
    assert!(!error.is_empty());
    let stats = locks.stats();
    let last = stats.nodes[2].last_error.clone().unwrap_or_default();
    assert!(!last.contains("not-the-password"), "{last}");
    assert!(!last.is_empty(), "{stats:?}");
}

/// The README's "on Redis, one dependency" reaches the `tracing` hook:
/// `redlock-redis` with its feature `tracing` re-exports `TracingEvents`,
/// and a manager over real masters runs with it.
#[test]
fn tracing_events_come_with_the_redis_crate() {
    let servers = cluster(3);
    let locks = Redlock::builder(crate::redis_common::backends(&servers, NODE_TIMEOUT))
        .node_timeout(NODE_TIMEOUT)
        .events(Arc::new(redlock_redis::TracingEvents))
        .build()
        .expect("manager");
    let lock = locks
        .try_lock("locks:tracing", Duration::from_secs(10))
        .expect("free");
    lock.release().expect("held");
}
