//! Redis URLs: parsing, the normalized secret-free node id, and redaction.

use std::fmt;
use std::net::IpAddr;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};
use redlock_core::NodeId;

use crate::error::Stage;
use crate::{RedisErrorKind, RedisNodeError};

/// A string that must never be printed: a URL with credentials, a password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: String) -> Self {
        Secret(value)
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret occurs in `text` (never for an empty secret).
    pub(crate) fn occurs_in(&self, text: &str) -> bool {
        !self.0.is_empty() && text.contains(&self.0)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A parsed Redis URL.
pub(crate) struct Address {
    /// The parsed settings: address, credentials, database.
    pub(crate) info: ConnectionInfo,
    /// The normalized, secret-free name.
    pub(crate) node: NodeId,
    /// Whether the URL asks for TLS (`rediss://`).
    pub(crate) tls: bool,
    /// The password, to keep it out of error messages.
    pub(crate) password: Option<Secret>,
}

/// The client name reported to the server with `CLIENT SETINFO` (Redis 7.2+;
/// older servers ignore it).
pub(crate) const LIB_NAME: &str = "redlock-redis";

/// Parses `url` into connection settings and its node id.
pub(crate) fn parse(url: &str) -> Result<Address, RedisNodeError> {
    let invalid = |detail: &str| {
        RedisNodeError::new(
            NodeId::new(redact(url)),
            RedisErrorKind::InvalidUrl,
            Stage::Build,
            detail,
        )
    };
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    let tls = matches!(scheme, "rediss" | "valkeys");
    if tls && !cfg!(feature = "tls") {
        return Err(RedisNodeError::new(
            NodeId::new(redact(url)),
            RedisErrorKind::InvalidConfig,
            Stage::Build,
            "rediss:// needs the `tls` feature of redlock-redis",
        ));
    }
    let Some(parsed) = redis::parse_redis_url(url) else {
        return Err(invalid(
            "expected redis://, rediss://, redis+unix:// or unix:// followed by an address",
        ));
    };
    // redis-rs's URL messages never contain the URL or its password.
    let info = parsed
        .into_connection_info()
        .map_err(|e| invalid(&e.to_string()))?;
    let settings = info.redis_settings();
    let db = settings.db();
    let password = settings
        .password()
        .filter(|p| !p.is_empty())
        .map(|p| Secret::new(p.to_owned()));
    let node = match info.addr() {
        ConnectionAddr::Tcp(host, port) => format!("{}:{port}/{db}", normalize_host(host)),
        ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            ..
        } => {
            if *insecure {
                return Err(invalid(
                    "#insecure (no certificate verification) is not supported",
                ));
            }
            format!("rediss://{}:{port}/{db}", normalize_host(host))
        }
        ConnectionAddr::Unix(path) => format!("unix:{}/{db}", path.display()),
        _ => return Err(invalid("unsupported kind of address")),
    };
    Ok(Address {
        info,
        node: NodeId::new(node),
        tls,
        password,
    })
}

/// Lower-cases host names and writes IP addresses in their canonical form,
/// so that equal addresses give equal node ids.
fn normalize_host(host: &str) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
        Ok(IpAddr::V4(v4)) => v4.to_string(),
        Err(_) => bare.trim_end_matches('.').to_ascii_lowercase(),
    }
}

/// `url` without user info and query (which may carry `pass=`): for naming a
/// URL that could not be parsed, or a builder in `Debug` output.
pub(crate) fn redact(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or("");
    let Some((scheme, rest)) = url.split_once("://") else {
        return if url.contains('@') || url.contains(':') {
            "<unparsable URL>".to_owned()
        } else {
            url.to_owned()
        };
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => format!("{scheme}://{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(url: &str) -> String {
        match parse(url) {
            Ok(address) => address.node.as_str().to_owned(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn node_ids_are_normalized() {
        assert_eq!(id("redis://127.0.0.1"), "127.0.0.1:6379/0");
        assert_eq!(id("redis://127.0.0.1:6379/0"), "127.0.0.1:6379/0");
        assert_eq!(id("redis://127.0.0.1:6379/"), "127.0.0.1:6379/0");
        assert_eq!(
            id("redis://Redis-A.Example.COM:7000/3"),
            "redis-a.example.com:7000/3"
        );
        assert_eq!(
            id("redis://redis-a.example.com.:7000/3"),
            "redis-a.example.com:7000/3"
        );
        assert_eq!(id("redis://[::1]:6380"), "[::1]:6380/0");
        assert_eq!(id("redis://[0:0:0:0:0:0:0:1]:6380"), "[::1]:6380/0");
        assert_eq!(id("redis://user:pw@10.0.0.1:6379/2"), "10.0.0.1:6379/2");
        assert_eq!(id("redis://:pw@10.0.0.1"), "10.0.0.1:6379/0");
        assert_eq!(id("valkey://10.0.0.1"), "10.0.0.1:6379/0");
        assert_eq!(id("unix:///tmp/redis.sock"), "unix:/tmp/redis.sock/0");
        assert_eq!(
            id("redis+unix:///tmp/redis.sock?db=4"),
            "unix:/tmp/redis.sock/4"
        );
        assert_eq!(
            id("redis+unix:///tmp/redis.sock?db=4&user=u&pass=p"),
            "unix:/tmp/redis.sock/4"
        );
    }

    #[test]
    fn same_master_same_id() {
        let a = id("redis://user:one@LOCALHOST:6379/0");
        let b = id("redis://other:two@localhost");
        assert_eq!(a, b);
        assert_ne!(id("redis://localhost/1"), id("redis://localhost/2"));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_ids_are_marked() {
        assert_eq!(
            id("rediss://Cache.Example:6380/1"),
            "rediss://cache.example:6380/1"
        );
        assert!(parse("rediss://127.0.0.1/#insecure").is_err());
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_needs_the_feature() {
        let err = parse("rediss://127.0.0.1").err().map(|e| e.kind());
        assert_eq!(err, Some(RedisErrorKind::InvalidConfig));
    }

    #[test]
    fn credentials_are_parsed_but_kept_secret() {
        let address = parse("redis://app:s3cret@127.0.0.1:6379/1").expect("parses");
        let settings = address.info.redis_settings();
        assert_eq!(settings.username(), Some("app"));
        assert_eq!(settings.password(), Some("s3cret"));
        assert_eq!(settings.db(), 1);
        assert_eq!(
            address.password.as_ref().map(Secret::expose),
            Some("s3cret")
        );
        assert_eq!(format!("{:?}", address.password), "Some(<redacted>)");
        assert!(!address.node.as_str().contains("s3cret"));
    }

    #[test]
    fn bad_urls_are_rejected_without_their_password() {
        for url in [
            "redis://user:s3cret@127.0.0.1:6379/notanumber",
            "redis://user:s3cret@127.0.0.1:99999/0",
            "http://user:s3cret@127.0.0.1",
            "user:s3cret@127.0.0.1",
            "redis://user:s3cret@/0",
            "",
        ] {
            let err = parse(url).err().expect(url);
            assert_eq!(err.kind(), RedisErrorKind::InvalidUrl, "{url}");
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("s3cret"), "{shown}");
        }
    }

    #[test]
    fn redaction() {
        assert_eq!(redact("redis://u:p@h:1/0"), "redis://***@h:1/0");
        assert_eq!(redact("redis://h:1/0?pass=p"), "redis://h:1/0");
        assert_eq!(redact("redis://a@b:p@h/0"), "redis://***@h/0");
        assert_eq!(redact("unix:///s.sock?pass=p"), "unix:///s.sock");
        assert_eq!(redact("u:p@h"), "<unparsable URL>");
        assert_eq!(redact("nonsense"), "nonsense");
    }
}
