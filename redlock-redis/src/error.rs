//! The per-node error of the Redis backend.

use std::error::Error as StdError;
use std::fmt;

use redis::RedisError;
use redlock_core::NodeId;

use crate::address::Secret;
use crate::classify::classify;

/// What went wrong on one Redis node.
///
/// Each kind counts as a failed node for the round it happened in; the kinds
/// tell an outage (the node is down, frozen or loading) from a configuration
/// mistake that retrying will not fix (see
/// [`RedisErrorKind::is_misconfiguration`]).
///
/// # Examples
///
/// ```
/// use redlock_redis::RedisErrorKind;
/// assert!(RedisErrorKind::ReadOnly.is_misconfiguration());
/// assert!(!RedisErrorKind::Timeout.is_misconfiguration());
/// assert_eq!(RedisErrorKind::OutOfMemory.to_string(), "out of memory (OOM)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RedisErrorKind {
    /// The URL could not be parsed or uses an unsupported form.
    InvalidUrl,
    /// Another setting is unusable: a zero node timeout, a root certificate
    /// that is not PEM, `rediss://` without the `tls` feature, ...
    InvalidConfig,
    /// Nothing listens at the address (or the unix socket does not exist).
    ConnectionRefused,
    /// Connecting, sending, reading the reply, or waiting for a pooled
    /// connection took longer than the node timeout (a frozen, overloaded or
    /// unreachable node).
    Timeout,
    /// The node has not yet answered requests sent to it earlier (they timed
    /// out and it may still run them): this request was not sent, so that
    /// nothing piles up behind them, or it is a release sent earlier and
    /// still unanswered. A frozen or overloaded node, like
    /// [`RedisErrorKind::Timeout`]; it clears once the node has answered.
    Behind,
    /// Authentication failed: `NOAUTH` (a password is required) or
    /// `WRONGPASS` / a refused `AUTH` (wrong user or password).
    Auth,
    /// The ACL user may not run a command or touch a key (`NOPERM`).
    NoPermission,
    /// The node is a replica (`READONLY`): give the masters, not replicas.
    ReadOnly,
    /// The node is out of memory under `maxmemory` with a `noeviction`
    /// policy (`OOM`).
    OutOfMemory,
    /// A lock key (or its fencing counter) holds a value of another type,
    /// e.g. a list (`WRONGTYPE`): the key name collides with other data.
    WrongType,
    /// A fencing counter is at or above
    /// [`FENCE_LIMIT`](redlock_core::decide::FENCE_LIMIT) and cannot rise
    /// (`FENCEMAX`, a reply of the backend's scripts): the node refused
    /// the fenced acquire and wrote nothing. Only another writer puts a
    /// counter there; delete the counter key (`R` + [`crate::FENCE_SUFFIX`])
    /// once no holder's token is in use.
    FenceExhausted,
    /// An acquire found the resource's keys in another wire format
    /// (`WIREFORMAT`, a reply of the backend's acquiring scripts): another
    /// version of the library, with another layout of the keys kept beside
    /// a lock, wrote its format in `R` + [`FORMAT_SUFFIX`](crate::keys::FORMAT_SUFFIX)
    /// (see [`keys`](crate::keys), Versions). The node refused and wrote
    /// nothing; the message names the format found. Releases and extends of
    /// locks already held still work. Upgrade every client of the resource
    /// together.
    WireFormat,
    /// The node refuses writes because it cannot persist (`MISCONF`).
    Misconf,
    /// The node is loading its dataset after a restart (`LOADING`).
    Loading,
    /// The node does not know a command the backend needs: not a Redis
    /// master (a Sentinel port, a proxy), or scripting commands (`SCRIPT`,
    /// `EVAL`) are renamed away.
    UnknownCommand,
    /// The server is older than the oldest the backend supports
    /// ([`MIN_REDIS_VERSION`](crate::MIN_REDIS_VERSION): Redis 6.2.0, any
    /// Valkey), as it said in the connection's handshake (`HELLO`), or it
    /// does not know `HELLO` without arguments (Redis before 6.2). Every
    /// connection to it is refused; the message names the version it
    /// reported.
    UnsupportedServer,
    /// The TLS handshake failed (untrusted certificate, wrong host name, ...).
    Tls,
    /// Another I/O failure: the connection was reset or closed, ...
    Io,
    /// Another error reply from the server.
    Server,
    /// A reply of a shape the backend does not expect.
    UnexpectedReply,
}

impl RedisErrorKind {
    /// Whether the error points at a configuration mistake (the address,
    /// credentials, ACL, a replica listed as a master, colliding key names,
    /// TLS setup, a server too old) rather than at a node that is down, frozen or busy.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_redis::RedisErrorKind;
    /// assert!(RedisErrorKind::Auth.is_misconfiguration());
    /// assert!(!RedisErrorKind::ConnectionRefused.is_misconfiguration());
    /// ```
    #[must_use]
    pub fn is_misconfiguration(self) -> bool {
        matches!(
            self,
            RedisErrorKind::InvalidUrl
                | RedisErrorKind::InvalidConfig
                | RedisErrorKind::Auth
                | RedisErrorKind::NoPermission
                | RedisErrorKind::ReadOnly
                | RedisErrorKind::WrongType
                | RedisErrorKind::FenceExhausted
                | RedisErrorKind::WireFormat
                | RedisErrorKind::UnknownCommand
                | RedisErrorKind::UnsupportedServer
                | RedisErrorKind::Tls
        )
    }

    fn describe(self) -> &'static str {
        match self {
            RedisErrorKind::InvalidUrl => "invalid Redis URL",
            RedisErrorKind::InvalidConfig => "invalid configuration",
            RedisErrorKind::ConnectionRefused => "connection refused",
            RedisErrorKind::Timeout => "timed out",
            RedisErrorKind::Behind => "the node has not answered earlier requests",
            RedisErrorKind::Auth => "authentication failed (NOAUTH/WRONGPASS)",
            RedisErrorKind::NoPermission => "permission denied by ACL (NOPERM)",
            RedisErrorKind::ReadOnly => "the node is a read-only replica (READONLY)",
            RedisErrorKind::OutOfMemory => "out of memory (OOM)",
            RedisErrorKind::WrongType => "a lock key holds a value of another type (WRONGTYPE)",
            RedisErrorKind::FenceExhausted => {
                "a fencing counter is at its largest value and cannot rise (FENCEMAX)"
            }
            RedisErrorKind::WireFormat => {
                "the resource's keys are in another wire format (WIREFORMAT)"
            }
            RedisErrorKind::Misconf => "the node refuses writes: it cannot persist (MISCONF)",
            RedisErrorKind::Loading => "the node is loading its dataset (LOADING)",
            RedisErrorKind::UnknownCommand => {
                "unknown command: not a Redis master (a Sentinel port?)"
            }
            RedisErrorKind::UnsupportedServer => "unsupported server version",
            RedisErrorKind::Tls => "TLS failure",
            RedisErrorKind::Io => "I/O error",
            RedisErrorKind::Server => "server error",
            RedisErrorKind::UnexpectedReply => "unexpected reply",
        }
    }
}

impl fmt::Display for RedisErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// When an error happened, for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Checking the settings in `build()`.
    Build,
    /// Opening a connection (TCP/TLS connect, AUTH, SELECT).
    Connect,
    /// Waiting for a pooled connection.
    Checkout,
    /// Running a lock command.
    Command,
}

impl Stage {
    fn describe(self) -> &'static str {
        match self {
            Stage::Build => "",
            Stage::Connect => " while connecting",
            Stage::Checkout => " waiting for a connection",
            Stage::Command => "",
        }
    }
}

/// One Redis node's failure: which node, what kind, and why.
///
/// The message names the node by its secret-free id (see
/// [`RedisBackend`](crate::RedisBackend)); passwords never appear in
/// `Display` or `Debug` output. [`source`](StdError::source) is the
/// underlying `redis::RedisError` where there is one.
///
/// # Examples
///
/// ```
/// use redlock_redis::{RedisBackend, RedisErrorKind};
/// let err = RedisBackend::new("redis://user:s3cret@127.0.0.1:6379/x").unwrap_err();
/// assert_eq!(err.kind(), RedisErrorKind::InvalidUrl);
/// assert!(!err.to_string().contains("s3cret"));
/// assert!(!format!("{err:?}").contains("s3cret"));
/// ```
#[derive(Debug, Clone)]
pub struct RedisNodeError {
    node: NodeId,
    kind: RedisErrorKind,
    stage: Stage,
    code: Option<String>,
    detail: String,
    source: Option<RedisError>,
}

impl RedisNodeError {
    /// An error of our own making (no underlying redis-rs error).
    pub(crate) fn new(
        node: NodeId,
        kind: RedisErrorKind,
        stage: Stage,
        detail: impl Into<String>,
    ) -> Self {
        RedisNodeError {
            node,
            kind,
            stage,
            code: None,
            detail: detail.into(),
            source: None,
        }
    }

    /// Classifies a redis-rs error. Its message is dropped when it contains
    /// `secret` (the password) or echoes command arguments (which would show
    /// the lock token).
    pub(crate) fn from_redis(
        node: NodeId,
        stage: Stage,
        err: RedisError,
        secret: Option<&Secret>,
    ) -> Self {
        let kind = if crate::version::is_unsupported(&err) {
            RedisErrorKind::UnsupportedServer
        } else {
            classify(&err)
        };
        let code = err.code().map(str::to_owned);
        // A plain error reply reads best as the server wrote it.
        let text = match (&code, err.clone().into_server_errors()) {
            (Some(code), Some(_)) => match err.detail() {
                Some(detail) => format!("{code} {detail}"),
                None => code.clone(),
            },
            _ => err.to_string(),
        };
        let (detail, source) =
            if secret.is_some_and(|s| s.occurs_in(&text) || s.occurs_in(&err.to_string())) {
                (
                    "details withheld: the message contained the password".to_owned(),
                    None,
                )
            } else if let Some(cut) = text.find(", with args beginning with") {
                // The server echoes arguments, which would show the lock token.
                (text[..cut].to_owned(), None)
            } else {
                (text, Some(err))
            };
        RedisNodeError {
            node,
            kind,
            stage,
            code,
            detail,
            source,
        }
    }

    /// The node that failed (its secret-free id).
    ///
    /// # Examples
    ///
    /// ```
    /// // A URL that does not parse is named by its scheme alone: where its
    /// // password ends cannot be known.
    /// let err = redlock_redis::RedisBackend::new("redis://app:pa/ss@127.0.0.1").unwrap_err();
    /// assert_eq!(err.node().as_str(), "redis://<unparsable>");
    /// ```
    #[must_use]
    pub fn node(&self) -> &NodeId {
        &self.node
    }

    /// What kind of failure.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_redis::{RedisBackend, RedisErrorKind};
    /// let err = RedisBackend::new("http://127.0.0.1").unwrap_err();
    /// assert_eq!(err.kind(), RedisErrorKind::InvalidUrl);
    /// ```
    #[must_use]
    pub fn kind(&self) -> RedisErrorKind {
        self.kind
    }

    /// The server's error code (`OOM`, `READONLY`, `ERR`, ...) when the
    /// node answered with an error reply.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = redlock_redis::RedisBackend::new("nonsense").unwrap_err();
    /// assert_eq!(err.server_code(), None);
    /// ```
    #[must_use]
    pub fn server_code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// Whether the node did not answer within the node timeout, or was not
    /// asked because it still owes answers to earlier requests
    /// ([`RedisErrorKind::Timeout`] or [`RedisErrorKind::Behind`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let err = redlock_redis::RedisBackend::new("nonsense").unwrap_err();
    /// assert!(!err.is_timeout());
    /// ```
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, RedisErrorKind::Timeout | RedisErrorKind::Behind)
    }

    /// Shorthand for [`RedisErrorKind::is_misconfiguration`] of this error's
    /// kind.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = redlock_redis::RedisBackend::new("nonsense").unwrap_err();
    /// assert!(err.is_misconfiguration());
    /// ```
    #[must_use]
    pub fn is_misconfiguration(&self) -> bool {
        self.kind.is_misconfiguration()
    }
}

impl fmt::Display for RedisNodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "redis node {}: {}{}: {}",
            self.node,
            self.kind,
            self.stage.describe(),
            self.detail
        )
    }
}

impl StdError for RedisNodeError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_ref().map(|e| e as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn reply(line: &str) -> RedisError {
        let value = redis::parse_redis_value(format!("{line}\r\n").as_bytes()).expect("parses");
        value.extract_error().expect_err("an error reply")
    }

    fn refused() -> RedisError {
        RedisError::from(io::Error::from(io::ErrorKind::ConnectionRefused))
    }

    #[test]
    fn display_names_the_node_and_the_reason() {
        let err = RedisNodeError::from_redis(
            NodeId::new("10.0.0.1:6379/0"),
            Stage::Command,
            reply("-OOM command not allowed when used memory > 'maxmemory'."),
            None,
        );
        assert_eq!(err.kind(), RedisErrorKind::OutOfMemory);
        assert_eq!(err.server_code(), Some("OOM"));
        assert_eq!(err.node().as_str(), "10.0.0.1:6379/0");
        assert_eq!(
            err.to_string(),
            "redis node 10.0.0.1:6379/0: out of memory (OOM): \
             OOM command not allowed when used memory > 'maxmemory'."
        );
        assert!(err.source().is_some());

        let refused =
            RedisNodeError::from_redis(NodeId::new("a:1/0"), Stage::Connect, refused(), None);
        assert!(refused
            .to_string()
            .starts_with("redis node a:1/0: connection refused while connecting"));
    }

    #[test]
    fn another_wire_format_is_named_with_the_format_found() {
        let err = RedisNodeError::from_redis(
            NodeId::new("a:6379/0"),
            Stage::Command,
            reply(
                "-WIREFORMAT the resource's keys are in wire format 2, this client speaks 1: \
                 upgrade every client of it together",
            ),
            None,
        );
        assert_eq!(err.kind(), RedisErrorKind::WireFormat);
        assert!(err.is_misconfiguration());
        assert_eq!(err.server_code(), Some("WIREFORMAT"));
        assert_eq!(
            err.to_string(),
            "redis node a:6379/0: the resource's keys are in another wire format (WIREFORMAT): \
             WIREFORMAT the resource's keys are in wire format 2, this client speaks 1: \
             upgrade every client of it together"
        );
    }

    #[test]
    fn an_unsupported_server_is_named_with_what_it_reported() {
        let reply = redis::Value::Array(
            ["server", "redis", "version", "6.0.9"]
                .map(|s| redis::Value::BulkString(s.as_bytes().to_vec()))
                .to_vec(),
        );
        let refused = crate::version::judge_hello(reply).expect_err("too old");
        let err =
            RedisNodeError::from_redis(NodeId::new("a:6379/0"), Stage::Connect, refused, None);
        assert_eq!(err.kind(), RedisErrorKind::UnsupportedServer);
        assert!(err.is_misconfiguration());
        assert_eq!(err.server_code(), None);
        assert_eq!(
            err.to_string(),
            "redis node a:6379/0: unsupported server version while connecting: \
             it reports Redis 6.0.9; the oldest supported is Redis 6.2.0 (any Valkey)"
        );
    }

    #[test]
    fn echoed_arguments_are_cut() {
        let err = RedisNodeError::from_redis(
            NodeId::new("a:26379/0"),
            Stage::Command,
            reply("-ERR unknown command 'SET', with args beginning with: 'k' 'TOKENBYTES' "),
            None,
        );
        assert_eq!(err.kind(), RedisErrorKind::UnknownCommand);
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("TOKENBYTES"), "{shown}");
        assert!(err.source().is_none());
    }

    #[test]
    fn messages_with_the_password_are_withheld() {
        let secret = Secret::new("hunter2".to_owned());
        let err = RedisNodeError::from_redis(
            NodeId::new("a:6379/0"),
            Stage::Connect,
            reply("-ERR something echoed hunter2 back"),
            Some(&secret),
        );
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(err.source().is_none());
    }

    #[test]
    fn misconfiguration_classifier() {
        for kind in [
            RedisErrorKind::ConnectionRefused,
            RedisErrorKind::Timeout,
            RedisErrorKind::Behind,
            RedisErrorKind::Loading,
            RedisErrorKind::OutOfMemory,
            RedisErrorKind::Io,
        ] {
            assert!(!kind.is_misconfiguration(), "{kind}");
        }
        for kind in [
            RedisErrorKind::ReadOnly,
            RedisErrorKind::WrongType,
            RedisErrorKind::UnknownCommand,
            RedisErrorKind::UnsupportedServer,
            RedisErrorKind::InvalidUrl,
        ] {
            assert!(kind.is_misconfiguration(), "{kind}");
        }
    }
}
