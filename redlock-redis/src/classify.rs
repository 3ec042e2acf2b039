//! Classification of redis-rs errors into [`RedisErrorKind`]s.

use std::error::Error as StdError;
use std::io;
use std::sync::Arc;

use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::RedisErrorKind;

/// Error codes that a pre-7.0 server wraps into `ERR Error running script`.
const SCRIPT_WRAPPED_CODES: [&str; 10] = [
    "NOAUTH",
    "WRONGPASS",
    "NOPERM",
    "READONLY",
    "OOM",
    "WRONGTYPE",
    "MISCONF",
    "LOADING",
    "FENCEMAX",
    "WIREFORMAT",
];

/// Maps a redis-rs error to a kind, from its I/O error kind, its redis-rs
/// kind and the server's error code.
pub(crate) fn classify(err: &RedisError) -> RedisErrorKind {
    if err.is_timeout() {
        return RedisErrorKind::Timeout;
    }
    if err.is_connection_refusal() {
        return RedisErrorKind::ConnectionRefused;
    }
    if is_tls_failure(err) {
        return RedisErrorKind::Tls;
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed => RedisErrorKind::Auth,
        ErrorKind::Io => RedisErrorKind::Io,
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => RedisErrorKind::UnexpectedReply,
        ErrorKind::InvalidClientConfig | ErrorKind::Client => RedisErrorKind::InvalidConfig,
        ErrorKind::Server(ServerErrorKind::ReadOnly) => RedisErrorKind::ReadOnly,
        ErrorKind::Server(ServerErrorKind::BusyLoading) => RedisErrorKind::Loading,
        ErrorKind::Server(ServerErrorKind::NoPerm) => RedisErrorKind::NoPermission,
        ErrorKind::Server(_) | ErrorKind::Extension => {
            by_code(err.code().unwrap_or(""), err.detail().unwrap_or(""))
        }
        _ => RedisErrorKind::Server,
    }
}

fn by_code(code: &str, detail: &str) -> RedisErrorKind {
    match code {
        "NOAUTH" | "WRONGPASS" => RedisErrorKind::Auth,
        "NOPERM" => RedisErrorKind::NoPermission,
        "READONLY" => RedisErrorKind::ReadOnly,
        "OOM" => RedisErrorKind::OutOfMemory,
        "WRONGTYPE" => RedisErrorKind::WrongType,
        "FENCEMAX" => RedisErrorKind::FenceExhausted,
        "WIREFORMAT" => RedisErrorKind::WireFormat,
        "MISCONF" => RedisErrorKind::Misconf,
        "LOADING" => RedisErrorKind::Loading,
        "ERR" if detail.starts_with("unknown command") => RedisErrorKind::UnknownCommand,
        "ERR" if detail.starts_with("Error running script") => detail
            .split(|c: char| c.is_whitespace() || c == ':')
            .find(|word| SCRIPT_WRAPPED_CODES.contains(word))
            .map_or(RedisErrorKind::Server, |word| by_code(word, "")),
        _ => RedisErrorKind::Server,
    }
}

/// The error redis-rs wraps (an `io::Error`, a `rustls::Error`, ...).
fn wrapped(err: &RedisError) -> Option<&(dyn StdError + 'static)> {
    let source = err.source()?;
    // redis-rs keeps wrapped errors as `Arc<dyn Error + Send + Sync>`.
    match source.downcast_ref::<Arc<dyn StdError + Send + Sync>>() {
        Some(inner) => Some(&**inner),
        None => Some(source),
    }
}

/// Whether the error is a rustls error, or an I/O error carrying one (a
/// failed handshake).
#[cfg(feature = "tls")]
fn is_tls_failure(err: &RedisError) -> bool {
    let Some(inner) = wrapped(err) else {
        return false;
    };
    inner.is::<rustls::Error>()
        || inner
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .is_some_and(|e| e.is::<rustls::Error>())
}

#[cfg(not(feature = "tls"))]
fn is_tls_failure(err: &RedisError) -> bool {
    let _ = wrapped(err);
    false
}

/// An I/O timeout as redis-rs reports one, for a deadline that ran out
/// before a command could be sent.
pub(crate) fn deadline_passed() -> RedisError {
    RedisError::from(io::Error::new(
        io::ErrorKind::TimedOut,
        "the node timeout ran out before the command was sent",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> RedisError {
        let value = redis::parse_redis_value(format!("{line}\r\n").as_bytes()).expect("parses");
        value.extract_error().expect_err("an error reply")
    }

    fn io(kind: io::ErrorKind) -> RedisError {
        RedisError::from(io::Error::from(kind))
    }

    #[test]
    fn io_errors() {
        assert_eq!(
            classify(&io(io::ErrorKind::ConnectionRefused)),
            RedisErrorKind::ConnectionRefused
        );
        // A unix socket path that does not exist is a refusal too.
        assert_eq!(
            classify(&io(io::ErrorKind::NotFound)),
            RedisErrorKind::ConnectionRefused
        );
        assert_eq!(
            classify(&io(io::ErrorKind::TimedOut)),
            RedisErrorKind::Timeout
        );
        assert_eq!(
            classify(&io(io::ErrorKind::WouldBlock)),
            RedisErrorKind::Timeout
        );
        assert_eq!(
            classify(&io(io::ErrorKind::ConnectionReset)),
            RedisErrorKind::Io
        );
        assert_eq!(
            classify(&io(io::ErrorKind::UnexpectedEof)),
            RedisErrorKind::Io
        );
        assert_eq!(classify(&deadline_passed()), RedisErrorKind::Timeout);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_errors() {
        let handshake = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(classify(&RedisError::from(handshake)), RedisErrorKind::Tls);
        let config = RedisError::from(rustls::Error::General("no".into()));
        assert_eq!(classify(&config), RedisErrorKind::Tls);
    }

    #[test]
    fn client_side_errors() {
        let auth = RedisError::from((
            ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
        assert_eq!(classify(&auth), RedisErrorKind::Auth);
        let parse = RedisError::from((ErrorKind::Parse, "bad reply"));
        assert_eq!(classify(&parse), RedisErrorKind::UnexpectedReply);
        let config = RedisError::from((ErrorKind::InvalidClientConfig, "Missing hostname"));
        assert_eq!(classify(&config), RedisErrorKind::InvalidConfig);
    }

    #[test]
    fn server_replies() {
        let cases = [
            ("-NOAUTH Authentication required.", RedisErrorKind::Auth),
            (
                "-WRONGPASS invalid username-password pair or user is disabled.",
                RedisErrorKind::Auth,
            ),
            (
                "-NOPERM User u has no permissions to run the 'evalsha' command",
                RedisErrorKind::NoPermission,
            ),
            (
                "-READONLY You can't write against a read only replica.",
                RedisErrorKind::ReadOnly,
            ),
            (
                "-OOM command not allowed when used memory > 'maxmemory'.",
                RedisErrorKind::OutOfMemory,
            ),
            (
                "-WRONGTYPE Operation against a key holding the wrong kind of value",
                RedisErrorKind::WrongType,
            ),
            (
                "-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
                RedisErrorKind::Misconf,
            ),
            (
                "-LOADING Redis is loading the dataset in memory",
                RedisErrorKind::Loading,
            ),
            (
                "-ERR unknown command 'EVALSHA', with args beginning with: 'abc' ",
                RedisErrorKind::UnknownCommand,
            ),
            (
                "-ERR Error running script (call to f_1): @user_script:3: WRONGTYPE Operation against a key holding the wrong kind of value",
                RedisErrorKind::WrongType,
            ),
            (
                "-WIREFORMAT the resource's keys are in wire format 2, this client speaks 1",
                RedisErrorKind::WireFormat,
            ),
            ("-ERR syntax error", RedisErrorKind::Server),
            ("-BUSY Redis is busy running a script.", RedisErrorKind::Server),
            ("-SOMETHINGNEW from the future", RedisErrorKind::Server),
        ];
        for (line, kind) in cases {
            assert_eq!(classify(&reply(line)), kind, "{line}");
        }
    }
}
