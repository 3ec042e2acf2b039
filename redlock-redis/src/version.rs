//! The oldest server the backend works with, and the check of a server's
//! `HELLO` reply against it, made in every connection's handshake.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::sync::Arc;

use redis::{RedisError, ServerErrorKind, Value};

/// The oldest Redis the backend supports: `6.2.0`. Any Valkey is supported
/// (Valkey began as a fork of Redis 7.2.4).
///
/// Every new connection asks the server what it is (`HELLO`, in the
/// round trip of the handshake): a server that reports an older Redis, or
/// does not know `HELLO` without arguments (Redis before 6.2; before 6.0
/// it does not know `HELLO` at all), is refused with
/// [`RedisErrorKind::UnsupportedServer`](crate::RedisErrorKind::UnsupportedServer)
/// naming the node and what it reported. Where the check cannot be made
/// (an ACL user without `+hello`, or a reply without a version, as from a
/// compatible server or proxy that answers `HELLO` its own way), the
/// connection goes ahead.
///
/// # Examples
///
/// ```
/// assert_eq!(redlock_redis::MIN_REDIS_VERSION, "6.2.0");
/// ```
pub const MIN_REDIS_VERSION: &str = "6.2.0";

/// [`MIN_REDIS_VERSION`] as numbers.
const MIN: Version = Version(6, 2, 0);

/// The first Redis that takes `SET` with both `NX` and `GET`.
const SET_NX_GET: Version = Version(7, 0, 0);

/// A version `major.minor.patch`; missing parts count as 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Version(u32, u32, u32);

impl Version {
    /// Reads `7.0.15`, `6.2`, `7.2.4-rc1` (the part after a `-` is
    /// ignored); `None` for anything that does not begin with a number.
    fn parse(text: &str) -> Option<Version> {
        let core = text.split(['-', ' ']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u32>());
        let major = parts.next()?.ok()?;
        let minor = parts.next().map_or(Some(0), Result::ok)?;
        let patch = parts.next().map_or(Some(0), Result::ok)?;
        Some(Version(major, minor, patch))
    }
}

/// What a server's `HELLO` reply said about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerFacts {
    /// `server`: `redis`, `valkey`, ...
    name: String,
    version: Version,
}

impl ServerFacts {
    /// Whether the server is known to refuse `SET` with both `NX` and
    /// `GET` (a Redis older than 7.0): the backend then acquires a single
    /// key by script from the first request on.
    pub(crate) fn refuses_set_nx_get(&self) -> bool {
        self.name != "valkey" && self.version < SET_NX_GET
    }
}

/// Judges the reply to `HELLO` (no arguments) in the handshake.
///
/// - `Ok(Some(facts))`: a supported server;
/// - `Ok(None)`: the check cannot be made (`NOPERM`, or a reply without a
///   version); the connection goes ahead;
/// - `Err`: an [`unsupported`] error for a server older than
///   [`MIN_REDIS_VERSION`] or one that does not know `HELLO` without
///   arguments, else the server's own error (`NOAUTH` ...).
pub(crate) fn judge_hello(reply: Value) -> Result<Option<ServerFacts>, RedisError> {
    let fields = match reply {
        Value::ServerError(err) => {
            let detail = err.details().unwrap_or("").to_owned();
            return match err.kind() {
                Some(ServerErrorKind::NoPerm) => Ok(None),
                _ if err.code() == "ERR" && detail.starts_with("unknown command") => Err(
                    unsupported("it does not know HELLO: older than Redis 6.0".to_owned()),
                ),
                _ if err.code() == "ERR" && detail.starts_with("wrong number of arguments") => Err(
                    unsupported("it needs arguments to HELLO: older than Redis 6.2".to_owned()),
                ),
                _ => Err(err.into()),
            };
        }
        Value::Array(items) => {
            let mut pairs = Vec::with_capacity(items.len() / 2);
            let mut items = items.into_iter();
            while let (Some(key), Some(value)) = (items.next(), items.next()) {
                pairs.push((key, value));
            }
            pairs
        }
        Value::Map(pairs) => pairs,
        _ => return Ok(None),
    };
    let text = |value: &Value| match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    };
    let field = |name: &str| {
        fields
            .iter()
            .find(|(key, _)| text(key).is_some_and(|k| k.eq_ignore_ascii_case(name)))
            .and_then(|(_, value)| text(value))
    };
    let Some(shown) = field("version") else {
        return Ok(None);
    };
    let name = field("server").unwrap_or_else(|| "redis".to_owned());
    let Some(version) = Version::parse(&shown) else {
        return Ok(None);
    };
    let facts = ServerFacts { name, version };
    if facts.name != "valkey" && version < MIN {
        return Err(unsupported(format!(
            "it reports {} {shown}",
            if facts.name == "redis" {
                "Redis"
            } else {
                &facts.name
            }
        )));
    }
    Ok(Some(facts))
}

/// Why a server was refused: carried inside a redis-rs I/O error (the
/// pool's connections fail with `RedisError`) and recognized by
/// [`is_unsupported`].
#[derive(Debug)]
struct Unsupported(String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; the oldest supported is Redis {MIN_REDIS_VERSION} (any Valkey)",
            self.0
        )
    }
}

impl StdError for Unsupported {}

/// The error of a server refused for its version: `detail` says what it
/// reported.
fn unsupported(detail: String) -> RedisError {
    RedisError::from(io::Error::new(
        io::ErrorKind::Unsupported,
        Unsupported(detail),
    ))
}

/// Whether `err` is one of [`judge_hello`]'s refusals.
pub(crate) fn is_unsupported(err: &RedisError) -> bool {
    let Some(source) = err.source() else {
        return false;
    };
    // redis-rs keeps wrapped errors as `Arc<dyn Error + Send + Sync>`.
    let inner: &(dyn StdError + 'static) =
        match source.downcast_ref::<Arc<dyn StdError + Send + Sync>>() {
            Some(inner) => &**inner,
            None => source,
        };
    inner
        .downcast_ref::<io::Error>()
        .and_then(io::Error::get_ref)
        .is_some_and(|e| e.is::<Unsupported>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(server: &str, version: &str) -> Value {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        Value::Array(vec![
            bulk("server"),
            bulk(server),
            bulk("version"),
            bulk(version),
            bulk("proto"),
            Value::Int(2),
            bulk("modules"),
            Value::Array(Vec::new()),
        ])
    }

    fn error(line: &str) -> Value {
        redis::parse_redis_value(format!("{line}\r\n").as_bytes()).expect("parses")
    }

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(Version::parse("7.0.15"), Some(Version(7, 0, 15)));
        assert_eq!(Version::parse("6.2"), Some(Version(6, 2, 0)));
        assert_eq!(Version::parse("7.2.4-rc1"), Some(Version(7, 2, 4)));
        assert_eq!(Version::parse("255.255.255"), Some(Version(255, 255, 255)));
        assert_eq!(Version::parse("unstable"), None);
        assert_eq!(Version::parse("7.x"), None);
        assert!(Version(6, 1, 99) < MIN && MIN <= Version(6, 2, 0));
        assert_eq!(Version::parse(MIN_REDIS_VERSION), Some(MIN));
    }

    #[test]
    fn supported_servers_pass_and_say_what_they_take() {
        for (server, version, old_set) in [
            ("redis", "6.2.0", true),
            ("redis", "6.2.14", true),
            ("redis", "7.0.15", false),
            ("valkey", "9.1.2", false),
            ("valkey", "7.2.4", false),
        ] {
            let facts = judge_hello(hello(server, version))
                .expect("supported")
                .expect("checked");
            assert_eq!(facts.refuses_set_nx_get(), old_set, "{server} {version}");
        }
        // RESP3's map is read as well.
        let map = Value::Map(vec![(
            Value::SimpleString("version".into()),
            Value::SimpleString("7.0.0".into()),
        )]);
        assert!(judge_hello(map).expect("supported").is_some());
    }

    #[test]
    fn old_servers_are_refused_naming_what_they_report() {
        for (reply, shown) in [
            (hello("redis", "6.0.9"), "it reports Redis 6.0.9"),
            (hello("redis", "5.0.14"), "it reports Redis 5.0.14"),
            (hello("keydb", "6.0.16"), "it reports keydb 6.0.16"),
            (
                error("-ERR unknown command 'HELLO', with args beginning with: "),
                "it does not know HELLO: older than Redis 6.0",
            ),
            (
                error("-ERR wrong number of arguments for 'hello' command"),
                "it needs arguments to HELLO: older than Redis 6.2",
            ),
        ] {
            let err = judge_hello(reply).expect_err(shown);
            assert!(is_unsupported(&err), "{err}");
            assert_eq!(
                err.to_string(),
                format!("{shown}; the oldest supported is Redis 6.2.0 (any Valkey)")
            );
        }
    }

    #[test]
    fn what_cannot_be_checked_goes_ahead_and_other_errors_stay_theirs() {
        let noperm = error("-NOPERM User u has no permissions to run the 'hello' command");
        assert_eq!(judge_hello(noperm).expect("not checked"), None);
        assert_eq!(
            judge_hello(Value::SimpleString("OK".into())).expect("not checked"),
            None
        );
        assert_eq!(judge_hello(hello("redis", "unstable")).expect("ok"), None);
        let noauth = error("-NOAUTH HELLO must be called with the client already authenticated");
        let err = judge_hello(noauth).expect_err("not authenticated");
        assert!(!is_unsupported(&err));
        assert_eq!(err.code(), Some("NOAUTH"));
        assert!(!is_unsupported(&RedisError::from(io::Error::from(
            io::ErrorKind::Unsupported
        ))));
    }
}
