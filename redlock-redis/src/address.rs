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
            NodeId::new(unparsable(url)),
            RedisErrorKind::InvalidUrl,
            Stage::Build,
            detail,
        )
    };
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    let tls = matches!(scheme, "rediss" | "valkeys");
    if tls && !cfg!(feature = "tls") {
        return Err(RedisNodeError::new(
            NodeId::new(unparsable(url)),
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
                return Err(parsed_but(
                    url,
                    "#insecure (no certificate verification) is not supported",
                ));
            }
            format!("rediss://{}:{port}/{db}", normalize_host(host))
        }
        ConnectionAddr::Unix(path) => format!("unix:{}/{db}", path.display()),
        _ => return Err(parsed_but(url, "unsupported kind of address")),
    };
    Ok(Address {
        info,
        node: NodeId::new(node),
        tls,
        password,
    })
}

/// The error for a URL that parses but asks for what is not supported.
fn parsed_but(url: &str, detail: &str) -> RedisNodeError {
    RedisNodeError::new(
        NodeId::new(redact(url)),
        RedisErrorKind::InvalidUrl,
        Stage::Build,
        detail,
    )
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

/// How a URL is shown in `Debug` output and error messages.
///
/// A URL that parses loses everything between `://` and its last `@` (the
/// user info, whatever delimiters a raw password holds) and its query and
/// fragment (`pass=` of the unix forms); when a `?` or `#` comes before
/// that `@` (a password in the query, or a raw delimiter), all but the
/// scheme is hidden. A URL that does not parse is shown by its scheme alone
/// (see [`unparsable`]): where its password ends cannot be known.
pub(crate) fn redact(url: &str) -> String {
    let parses = redis::parse_redis_url(url).is_some_and(|u| u.into_connection_info().is_ok());
    let Some((scheme, rest)) = url.split_once("://").filter(|_| parses) else {
        return unparsable(url);
    };
    let cut = |text: &str| text.split(['?', '#']).next().unwrap_or("").to_owned();
    match rest.rfind('@') {
        Some(at) if rest[..at].contains(['?', '#']) => format!("{scheme}://***"),
        Some(at) => format!("{scheme}://***@{}", cut(&rest[at + 1..])),
        None => format!("{scheme}://{}", cut(rest)),
    }
}

/// The name of a URL that does not parse: `<scheme>://<unparsable>`, or
/// `<unparsable URL>` when what comes before `://` is not a plain scheme
/// (it could be a password typed in the wrong place).
pub(crate) fn unparsable(url: &str) -> String {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    let plain = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    };
    match scheme.filter(|s| plain(s)) {
        Some(scheme) => format!("{scheme}://<unparsable>"),
        None => "<unparsable URL>".to_owned(),
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

    /// Every URL form the crate accepts, with `secret` as its password
    /// written raw (not percent-encoded).
    fn forms(secret: &str) -> Vec<String> {
        vec![
            format!("redis://app:{secret}@127.0.0.1:6379/1"),
            format!("redis://:{secret}@127.0.0.1"),
            format!("redis://app:{secret}@127.0.0.1:6379/1?protocol=resp2"),
            format!("rediss://app:{secret}@cache.example:6380/0"),
            format!("rediss://:{secret}@cache.example"),
            format!("valkey://app:{secret}@127.0.0.1"),
            format!("redis+unix:///run/redis.sock?db=1&user=app&pass={secret}"),
            format!("unix:///run/redis.sock?pass={secret}&db=2"),
        ]
    }

    /// The two halves of every test password: neither may be shown.
    const HALVES: [&str; 2] = ["Ab1x", "Zq9y"];

    fn assert_hidden(url: &str, shown: &str) {
        for half in HALVES {
            assert!(!shown.contains(half), "{url} shown as {shown}");
        }
    }

    #[test]
    fn passwords_with_url_delimiters_are_never_shown() {
        for c in ['/', '?', '#', '@', ':', '%', ' '] {
            let secret = format!("{}{c}{}", HALVES[0], HALVES[1]);
            for url in forms(&secret) {
                assert_hidden(&url, &redact(&url));
                let builder = crate::RedisBackend::builder(&url);
                assert_hidden(&url, &format!("{builder:?}"));
                match builder.build() {
                    Ok(backend) => {
                        assert_hidden(&url, &format!("{backend:?}"));
                        use redlock_core::backend::LockBackend;
                        assert_hidden(&url, backend.node_id().as_str());
                    }
                    Err(err) => {
                        assert_hidden(&url, &format!("{err} {err:?}"));
                        assert_hidden(&url, err.node().as_str());
                    }
                }
            }
        }
    }

    #[test]
    fn a_url_that_does_not_parse_is_named_by_its_scheme_alone() {
        for url in [
            "redis://app:ab/cd@h",
            "redis://:1234/5@h",
            "redis://app:ab?cd@h",
            "redis://app:ab#cd@h",
            "redis://user:s3cret@127.0.0.1:6379/notanumber",
        ] {
            let err = parse(url).err().expect(url);
            assert_eq!(err.kind(), RedisErrorKind::InvalidUrl, "{url}");
            assert_eq!(err.node().as_str(), "redis://<unparsable>", "{url}");
            assert_eq!(redact(url), "redis://<unparsable>", "{url}");
        }
        // A scheme that could itself be a typed-in secret is not shown.
        assert_eq!(redact("user:pw@h://x"), "<unparsable URL>");
        assert_eq!(redact("nonsense"), "<unparsable URL>");
    }

    #[test]
    fn redaction() {
        assert_eq!(redact("redis://u:p@h:1/0"), "redis://***@h:1/0");
        assert_eq!(redact("redis://h:1/0?pass=p"), "redis://h:1/0");
        assert_eq!(redact("redis://a@b:p@h/0"), "redis://***@h/0");
        assert_eq!(redact("unix:///s.sock?pass=p"), "unix:///s.sock");
        assert_eq!(redact("redis://u:p@h:1/0#x"), "redis://***@h:1/0");
        assert_eq!(
            redact("redis+unix:///s.sock?db=1&pass=p@q"),
            "redis+unix://***"
        );
        assert_eq!(redact("u:p@h"), "<unparsable URL>");
    }
}
