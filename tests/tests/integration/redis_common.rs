//! Shared setup for the real-Redis tests: managers over harness servers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redlock_redis::backend::{Claim, Token};
use redlock_redis::{RedisBackend, Redlock, Resources};
use redlock_tests::harness::{RedisCluster, RedisServer, ServerOptions};

/// A per-node timeout that tolerates a loaded 2-core CI machine running
/// several servers per test; tests about timeouts set their own.
pub(crate) const NODE_TIMEOUT: Duration = Duration::from_millis(500);

pub(crate) fn cluster(n: usize) -> RedisCluster {
    RedisCluster::start(n, &ServerOptions::new()).expect("redis-server cluster")
}

pub(crate) fn backend(server: &RedisServer, url: &str, timeout: Duration) -> RedisBackend {
    let mut builder = RedisBackend::builder(url).node_timeout(timeout);
    if let Some(ca) = server.ca_pem() {
        builder = builder.tls_root_certificate(ca.as_bytes());
    }
    builder.build().expect("valid backend")
}

pub(crate) fn backends(cluster: &RedisCluster, timeout: Duration) -> Vec<RedisBackend> {
    cluster
        .iter()
        .map(|s| backend(s, &s.url(), timeout))
        .collect()
}

pub(crate) fn manager_over(backends: Vec<RedisBackend>, timeout: Duration) -> Redlock {
    Redlock::builder(backends)
        .node_timeout(timeout)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
        .build()
        .expect("valid manager")
}

pub(crate) fn manager(cluster: &RedisCluster, timeout: Duration) -> Redlock {
    manager_over(backends(cluster, timeout), timeout)
}

/// Counts critical sections and flags any overlap.
#[derive(Debug, Default, Clone)]
pub(crate) struct Overlap {
    inside: Arc<AtomicUsize>,
    overlapped: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
}

impl Overlap {
    pub(crate) fn enter(&self) {
        if self.inside.fetch_add(1, Ordering::SeqCst) != 0 {
            self.overlapped.store(true, Ordering::SeqCst);
        }
    }
    pub(crate) fn leave(&self) {
        self.inside.fetch_sub(1, Ordering::SeqCst);
        self.done.fetch_add(1, Ordering::SeqCst);
    }
    pub(crate) fn overlapped(&self) -> bool {
        self.overlapped.load(Ordering::SeqCst)
    }
    pub(crate) fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }
}

/// A unique key per test, so tests can share nothing and run in parallel.
pub(crate) fn key(name: &str) -> String {
    format!("locks:{name}")
}

/// A claim on `key` with a fresh token, for direct backend calls.
pub(crate) fn claim(key: &str) -> Claim {
    Claim::new(
        Resources::one(key).expect("key"),
        Token::random().expect("entropy"),
    )
}

/// How many times the server behind `admin` ran `command` since it started
/// (or since the last `CONFIG RESETSTAT`).
pub(crate) fn command_calls(admin: &mut redis::Connection, command: &str) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(admin)
        .expect("INFO");
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

/// [`command_calls`] on `server`, over a fresh connection.
pub(crate) fn calls(server: &RedisServer, command: &str) -> u64 {
    command_calls(&mut server.client().expect("client"), command)
}

/// Whether `server` has the key `name`.
pub(crate) fn exists(server: &RedisServer, name: &str) -> bool {
    let mut admin = server.client().expect("client");
    redis::cmd("EXISTS")
        .arg(name)
        .query::<u32>(&mut admin)
        .expect("EXISTS")
        == 1
}

/// How many clients `server` has besides the one asking that have sent
/// a command (`CLIENT LIST`: a handshake under way shows none yet).
pub(crate) fn clients(server: &RedisServer) -> usize {
    let mut admin = server.client().expect("client");
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut admin)
        .expect("CLIENT LIST");
    list.lines()
        .filter(|line| !line.contains(" cmd=client") && !line.contains(" cmd=NULL"))
        .count()
}
