//! Blocking redis-rs clients for talking to the harness's servers directly.

use std::time::Duration;

use anyhow::Context as _;

/// Connect, read and write timeout of [`RedisServer::client`](super::RedisServer::client).
pub const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// A [`redis::Client`] for `url`; for `rediss://` URLs it trusts `ca_pem`
/// (a PEM certificate authority, e.g. [`test_ca_pem`](super::test_ca_pem))
/// instead of the system's roots.
///
/// # Errors
///
/// Fails when the URL does not parse or the TLS settings are invalid.
///
/// # Examples
///
/// ```
/// let client = redlock_tests::harness::open_client("redis://127.0.0.1:6379", None).unwrap();
/// # let _ = client;
/// ```
pub fn open_client(url: &str, ca_pem: Option<&str>) -> anyhow::Result<redis::Client> {
    let client = match ca_pem {
        Some(ca) if url.starts_with("rediss://") => {
            install_ring_provider();
            redis::Client::build_with_tls(
                url,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(ca.as_bytes().to_vec()),
                },
            )
        }
        _ => redis::Client::open(url),
    };
    client.with_context(|| format!("bad client settings for {}", redact(url)))
}

/// Opens one blocking connection to `url` whose connect, read and write
/// timeouts are all `timeout` (redis-rs clears the read and write timeouts
/// after connecting, so they are set again here).
///
/// The underlying [`redis::RedisError`] stays reachable with
/// `err.downcast_ref::<redis::RedisError>()`.
///
/// # Errors
///
/// Fails when the server cannot be reached, refuses the credentials, or the
/// TLS handshake fails.
///
/// # Examples
///
/// ```no_run
/// use redlock_tests::harness::{connect, DEFAULT_CLIENT_TIMEOUT};
/// let mut con = connect("redis://127.0.0.1:6379", None, DEFAULT_CLIENT_TIMEOUT).unwrap();
/// let pong: String = redis::cmd("PING").query(&mut con).unwrap();
/// ```
pub fn connect(
    url: &str,
    ca_pem: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<redis::Connection> {
    let client = open_client(url, ca_pem)?;
    let con = client
        .get_connection_with_timeout(timeout)
        .with_context(|| format!("cannot connect to {}", redact(url)))?;
    con.set_read_timeout(Some(timeout))
        .context("setting the read timeout")?;
    con.set_write_timeout(Some(timeout))
        .context("setting the write timeout")?;
    Ok(con)
}

/// rustls needs a process-wide crypto provider when more than one could be
/// compiled in; the harness uses `ring`. Installing it twice is harmless.
fn install_ring_provider() {
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}

/// `url` with any password replaced by `***`, for error messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // Everything up to the last `@` may be a password, whatever it holds
    // (`/`, `?`, `#` unencoded too).
    match rest.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("redis://u:pw@127.0.0.1:1"),
            "redis://***@127.0.0.1:1"
        );
        assert_eq!(redact("redis://:pw@h:1"), "redis://***@h:1");
        assert_eq!(redact("rediss://h:1"), "rediss://h:1");
        for c in ['/', '?', '#', '@', ':'] {
            let url = format!("redis://u:ab{c}cd@h:1");
            assert_eq!(redact(&url), "redis://***@h:1", "{url}");
        }
    }
}
