//! Real `redis-server` processes and a fault-injecting TCP proxy for tests.
//!
//! Every server runs on a free loopback port in its own temporary directory
//! and is always stopped: dropping a [`RedisServer`] (also while a test
//! panics) kills the process and reaps it. Nothing here relies on a server
//! that is already running, and nothing uses a fixed port, so tests can run
//! in parallel.
//!
//! - [`RedisServer`]: one server; [`ServerOptions`] picks the variant
//!   (no persistence, AOF with `appendfsync always`, TLS, password, an ACL
//!   user, extra `redis.conf` lines, a shipped `redis.conf` to start from).
//!   Controls: [`RedisServer::kill`],
//!   [`RedisServer::pause`] / [`RedisServer::resume`],
//!   [`RedisServer::restart`], [`RedisServer::client`].
//! - [`RedisCluster`]: `n` independent servers of one variant, or one of
//!   each [`ServerKind`] asked for ([`RedisCluster::start_kinds`]).
//! - [`ServerKind`]: which server a test runs on (Redis 7.0 from Debian,
//!   Redis 6.2, Valkey 9.1), and where its binary is.
//! - [`Proxy`]: a TCP proxy in front of one server that passes traffic
//!   through, delays it, blackholes it or cuts connections, switchable at
//!   run time.
//!
//! `redis-server` must be installed (or named by the `REDIS_SERVER`
//! environment variable); without it starting a server fails with a message
//! saying so. A server of another [`ServerKind`] needs its binary installed
//! by `scripts/install-servers.sh` (which scripts/test.sh runs). It is never
//! a silent skip.
//!
//! # Examples
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_tests::harness::{Direction, Proxy, RedisCluster, RedisServer, ServerOptions};
//!
//! # fn main() -> anyhow::Result<()> {
//! let cluster = RedisCluster::start(5, &ServerOptions::new())?;
//! let urls = cluster.urls(); // redis://127.0.0.1:<port>, one per node
//! cluster.node(2).pause()?; // SIGSTOP
//! cluster.node(2).resume()?; // SIGCONT
//! cluster.node(3).kill()?; // SIGKILL, reaped
//!
//! let aof = ServerOptions::new().aof().password("s3cret").start()?;
//! let mut admin = aof.client()?;
//! redis::cmd("SET").arg("k").arg("v").exec(&mut admin)?;
//! aof.restart()?; // the key survives: appendfsync always
//!
//! let proxy = Proxy::in_front_of(&aof)?;
//! proxy.delay(Duration::from_millis(200), Direction::Both);
//! let slow_url = proxy.url(); // same credentials, the proxy's port
//! # let _ = (urls, slow_url);
//! # Ok(())
//! # }
//! ```

mod client;
mod cluster;
mod hostile;
mod kind;
mod options;
mod ports;
mod process;
mod proxy;
mod server;
mod tls;

use std::time::{Duration, Instant};

pub use client::{connect, open_client, DEFAULT_CLIENT_TIMEOUT};
pub use cluster::RedisCluster;
pub use hostile::{Hello, HostileServer, Misbehaviour};
pub use kind::ServerKind;
pub use options::{AclUser, Persistence, ServerOptions};
pub use ports::free_port;
pub use process::process_exists;
pub use proxy::{Direction, Proxy, ProxyMode};
pub use server::RedisServer;
pub use tls::test_ca_pem;

/// Polls `condition` every few milliseconds until it holds or `timeout`
/// passes.
///
/// # Errors
///
/// Fails, naming `what`, when `condition` still does not hold after
/// `timeout`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// redlock_tests::harness::wait_until(Duration::from_secs(1), "true", || true).unwrap();
/// ```
pub fn wait_until(
    timeout: Duration,
    what: &str,
    mut condition: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The next connection `listener` (non-blocking) accepts, polling every
/// 2 ms (every `poll` after an error), or `None` once `stop` is set: the
/// accept loop of the harness's fake servers.
pub(crate) fn accept_until_stopped(
    listener: &std::net::TcpListener,
    stop: &std::sync::atomic::AtomicBool,
    poll: Duration,
) -> Option<std::net::TcpStream> {
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => return Some(stream),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => std::thread::sleep(poll),
        }
    }
    None
}
