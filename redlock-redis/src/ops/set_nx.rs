//! Acquire one resource without fencing or a waiting line: `SET NX PX`,
//! no script.
//!
//! `SET R token NX PX ttl GET`, one command: nil when it was set, the
//! holder's token when it was refused, and a `WRONGTYPE` error
//! ([`RedisErrorKind::WrongType`]) for a key of another type (which would
//! otherwise look like contention forever). A server older than Redis 7.0
//! refuses `NX` with `GET` as a syntax error (having done nothing,
//! [`refuses_set_get`]); the backend then sends `SET R token NX PX ttl`
//! followed by `TYPE R` in the same write, for that request and from then
//! on (the fallback form: two replies).
//!
//! Must equal the node model's
//! [`Command::SetNxGet`], and in
//! the fallback form [`Command::SetNx`]
//! then [`Command::Type`]: the
//! differential tests (`tests/tests/integration/differential.rs`) send
//! them to every server kind, and this file's test decodes the model's own
//! replies to them with [`read`].

use redis::{RedisError, Value};
use redlock_core::backend::{AcquireOutcome, Response};
use redlock_core::model::Command;

use super::script::{Resp, GET, NX_PX, SET};
use super::Read;
use crate::session::Failure;
use crate::RedisErrorKind;

/// The node model's command this operation must equal (checked by the
/// test below against [`Command::of`]'s choice and the model's replies).
#[cfg(test)]
pub(crate) const MODEL: &str = "SetNxGet";

/// The model's commands of the fallback form, in the order they are sent.
#[cfg(test)]
pub(crate) const FALLBACK_MODEL: [&str; 2] = ["SetNx", "Type"];

/// Appends `command` (a [`Command::SetNxGet`], [`Command::SetNx`] or
/// [`Command::Type`]; any other is not written): one plain command.
pub(super) fn write(packed: &mut Vec<u8>, command: &Command<'_>) {
    match *command {
        Command::SetNxGet { key, token, ttl_ms } => {
            Resp(packed)
                .command(7)
                .words(SET)
                .bulk(key.as_bytes())
                .bulk(token)
                .words(NX_PX)
                .int(ttl_ms)
                .words(GET);
        }
        Command::SetNx { key, token, ttl_ms } => {
            Resp(packed)
                .command(6)
                .words(SET)
                .bulk(key.as_bytes())
                .bulk(token)
                .words(NX_PX)
                .int(ttl_ms);
        }
        Command::Type { key } => {
            Resp(packed).command(2).bulk(b"TYPE").bulk(key);
        }
        _ => {}
    }
}

/// Appends the acquire `command` (a [`Command::SetNxGet`]; any other is
/// not written) in its form: as it is with `set_get`, else as `SET ... NX
/// PX` and `TYPE`.
pub(crate) fn write_acquire(packed: &mut Vec<u8>, set_get: bool, command: &Command<'_>) {
    match *command {
        Command::SetNxGet { key, token, ttl_ms } if !set_get => {
            write(packed, &Command::SetNx { key, token, ttl_ms });
            let key = key.as_bytes();
            write(packed, &Command::Type { key });
        }
        Command::SetNxGet { .. } => write(packed, command),
        _ => {}
    }
}

/// How many replies the acquire gets in its form.
pub(crate) fn replies(set_get: bool) -> usize {
    if set_get {
        1
    } else {
        2
    }
}

/// Reads the replies to the acquire of `key` in its form.
pub(crate) fn read(
    key: &str,
    set_get: bool,
    replies: &mut impl Iterator<Item = Value>,
) -> Result<Read, Failure> {
    if set_get {
        return read_set_get(key, replies.next());
    }
    read_set_nx(key, replies.next(), replies.next())
}

/// Whether an error reply is a server older than 7.0 refusing `SET` with
/// both `NX` and `GET` (a syntax error: it did nothing).
pub(super) fn refuses_set_get(err: &RedisError) -> bool {
    err.code() == Some("ERR") && err.detail().is_some_and(|d| d.contains("syntax error"))
}

/// Reads the reply to `SET ... NX PX ... GET`.
fn read_set_get(key: &str, set: Option<Value>) -> Result<Read, Failure> {
    Ok(match set {
        // Nothing was there: set.
        Some(Value::Nil) => Read::Done(Response::Acquire(AcquireOutcome::Granted { fence: None })),
        // The holder's token: refused.
        Some(Value::BulkString(_)) => Read::Done(Response::Acquire(AcquireOutcome::HeldByOther)),
        Some(Value::ServerError(err)) => {
            let err = redis::RedisError::from(err);
            if err.code() == Some("WRONGTYPE") {
                Read::Wrong {
                    kind: RedisErrorKind::WrongType,
                    detail: format!("key {key:?} holds a value of another type, not a lock"),
                }
            } else {
                Read::Error(err)
            }
        }
        Some(other) => return Err(Failure::unexpected("SET NX PX GET", &other)),
        None => return Err(Failure::unexpected("SET NX PX GET", &Value::Nil)),
    })
}

/// Reads the replies to the two commands of the fallback form.
fn read_set_nx(key: &str, set: Option<Value>, kind: Option<Value>) -> Result<Read, Failure> {
    let (Some(set), Some(kind)) = (set, kind) else {
        return Err(Failure::unexpected("SET NX PX", &Value::Nil));
    };
    Ok(match set {
        Value::ServerError(err) => Read::Error(err.into()),
        Value::Okay => Read::Done(Response::Acquire(AcquireOutcome::Granted { fence: None })),
        Value::Nil => match kind {
            Value::SimpleString(t) if t == "string" || t == "none" => {
                Read::Done(Response::Acquire(AcquireOutcome::HeldByOther))
            }
            Value::SimpleString(t) => Read::Wrong {
                kind: RedisErrorKind::WrongType,
                detail: format!("key {key:?} holds a {t}, not a lock"),
            },
            Value::ServerError(err) => Read::Error(err.into()),
            other => return Err(Failure::unexpected("TYPE", &other)),
        },
        other => return Err(Failure::unexpected("SET NX PX", &other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::pairing::{claim, claim_by, describe, served, ttl, variant, CHANNEL};
    use redlock_core::backend::Request;
    use redlock_core::model::Node;

    #[test]
    fn reads_the_models_replies_to_its_commands_in_both_forms() {
        let (a, b) = (claim(&["k"]), claim_by(&["k"], 8));
        for set_get in [true, false] {
            let mut node = Node::new();
            for (claim, expected) in [
                (&a, "Acquire(Granted { fence: None })"),
                (&b, "Acquire(HeldByOther)"),
            ] {
                let request = Request::Acquire {
                    claim,
                    ttl: ttl(),
                    fence: false,
                };
                let command = Command::of(&request, CHANNEL).expect("known");
                assert_eq!(variant(&command), MODEL);
                let Command::SetNxGet { key, token, ttl_ms } = command else {
                    unreachable!("checked above");
                };
                let sent = if set_get {
                    vec![command]
                } else {
                    let bytes = key.as_bytes();
                    vec![
                        Command::SetNx { key, token, ttl_ms },
                        Command::Type { key: bytes },
                    ]
                };
                if !set_get {
                    let names: Vec<String> = sent.iter().map(variant).collect();
                    assert_eq!(names, FALLBACK_MODEL);
                }
                assert_eq!(sent.len(), replies(set_get));
                let mut replies = sent.iter().map(|c| served(&mut node, 0, c));
                assert_eq!(describe(read("k", set_get, &mut replies)), expected);
            }
        }
    }
}
