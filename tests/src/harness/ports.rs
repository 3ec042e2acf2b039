//! Free loopback ports.

use std::net::{Ipv4Addr, TcpListener};

use anyhow::Context as _;

/// A loopback port that was free a moment ago: the kernel's choice for
/// `127.0.0.1:0`, released again before returning.
///
/// Another process can take the port before it is used again; callers retry
/// with a new port when binding fails (as [`RedisServer`](super::RedisServer)
/// does).
///
/// # Errors
///
/// Fails when no loopback socket can be bound at all.
///
/// # Examples
///
/// ```
/// let port = redlock_tests::harness::free_port().unwrap();
/// assert_ne!(port, 0);
/// ```
pub fn free_port() -> anyhow::Result<u16> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding 127.0.0.1:0 for a port")?;
    Ok(listener.local_addr()?.port())
}
