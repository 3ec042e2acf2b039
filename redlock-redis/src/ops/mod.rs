//! Each operation the backend sends to a node, one file each: its Lua
//! (if any), how its keys and arguments are packed, how its reply is read,
//! and the node model's command it must equal
//! ([`redlock_core::model::Command`]; each file's `MODEL`, checked by its
//! test against [`Command::of`] and the model's own replies, and the Lua
//! proven equal to the model by the differential tests,
//! `tests/tests/integration/differential.rs`, on every server kind):
//!
//! | operation | file | model command |
//! |---|---|---|
//! | acquire one resource, no fencing, no line: `SET NX PX [GET]` (and its `TYPE` fallback) | [`set_nx`] | `SetNxGet` (`SetNx` + `Type`) |
//! | acquire several resources, or with fencing | [`acquire`] | `Acquire` |
//! | acquire for a caller waiting in line | [`queued_acquire`] | `QueuedAcquire` |
//! | extend | [`extend`] | `Extend` |
//! | release (and the release written behind an unanswered acquire) | [`release`] | `Release` |
//! | raise the fencing counters | [`raise_fence`] | `RaiseFence` |
//! | the same four for a shared claim (a reader) | [`shared_acquire`], [`shared_extend`], [`shared_release`], [`shared_raise_fence`] | `Shared*` |
//! | who holds a lock key (its value, `PTTL` and fencing counter) | [`inspect`] | `Inspect` |
//!
//! Common to all: [`script`] (how a script is sent, `EVALSHA` with the
//! `EVAL` fallback on `NOSCRIPT`, and the RESP writer), [`lua`] (the Lua
//! fragments several scripts share), [`setup`] (plain commands only the
//! differential tests send); here, the dispatch from a model command to
//! its operation ([`write()`], [`read()`]), the scripts a new connection loads
//! ([`preload`]) and what a read reply is ([`Read`]). Which operation a
//! request goes as, and in which form, is `crate::plan`'s.
//!
//! # Keys
//!
//! A lock on resource `R` is the Redis string key `R` (no prefix is
//! added) holding the lock's 20 random token bytes (then its manager's
//! identity, when it has one: `Claim::value`), with a millisecond
//! TTL. Its helper keys follow from it ([`redlock_core::keys`]): the
//! fencing counter `R␟fence`, the waiting mark `R␟waiting` (and a waiting
//! manager's place in it, `R␟waiting:<id>`), the reader set `R␟readers`
//! and the format key `R␟format`.
//!
//! Every script reads (and so type-checks) all its keys before it writes
//! any, so an error reply leaves the node unchanged (for the keys the
//! backend sends: a name never contains `keys::SEPARATOR`, so no lock key
//! is another's helper key in one command; checked by the differential
//! tests).
//!
//! # Shared claims
//!
//! Shared claims (the readers of a [`RwLock`](crate::RwLock), see
//! [`Claim::shared`](redlock_core::backend::Claim::shared)): the readers
//! of `R` are the sorted set `R␟readers` (see
//! [`READERS_SUFFIX`](crate::READERS_SUFFIX)), each member a reader's
//! token scored by its expiry in ms on the server's clock (`TIME`). While
//! any reader lives, `R` itself holds the 15-byte marker `redlock:readers`
//! (`READERS_MARKER` here, never a token), and `R` and `R␟readers` expire
//! with the latest reader. So every exclusive operation refuses or ignores
//! `R` while it has readers, unchanged: `SET NX` and the acquire scripts
//! see it held, and release, extend and fencing raises never find their
//! token in it. Four more operations ([`shared_acquire`],
//! [`shared_extend`], [`shared_release`], [`shared_raise_fence`]) act on
//! all keys or none.
//!
//! # Wire format
//!
//! Every script that acquires or joins state (the acquire and queued
//! acquire, the shared acquire, both fence raises) first `GET`s the format
//! key of each lock key, `R␟format` (a permit reads its semaphore's), and
//! refuses with `WIREFORMAT` ([`RedisErrorKind::WireFormat`]),
//! having written nothing, unless it is absent or holds this version's
//! [`WIRE_FORMAT`](redlock_core::keys::WIRE_FORMAT), `1` (the fragment
//! `check_format!` in [`lua`]). Nothing here writes it; release, extend
//! and `SET ... NX` never read it (see [`keys`](crate::keys), Versions).

use redis::Value;
use redlock_core::backend::Response;
use redlock_core::model::{Command, Outcome, Reply};

use crate::session::Failure;
use crate::RedisErrorKind;

#[macro_use]
mod lua;
pub(crate) mod script;

pub(crate) mod acquire;
pub(crate) mod extend;
pub(crate) mod inspect;
pub(crate) mod queued_acquire;
pub(crate) mod raise_fence;
pub(crate) mod release;
pub(crate) mod set_nx;
mod setup;
pub(crate) mod shared_acquire;
pub(crate) mod shared_extend;
pub(crate) mod shared_raise_fence;
pub(crate) mod shared_release;

pub(crate) use acquire::ACQUIRE;
pub(crate) use extend::EXTEND;
pub(crate) use inspect::{INSPECT, INSPECT_WATCH};
pub(crate) use queued_acquire::QUEUED_ACQUIRE;
pub(crate) use raise_fence::RAISE_FENCE;
pub(crate) use release::{write_release, RELEASE};
#[cfg(test)]
pub(crate) use script::Keys;
pub(crate) use script::{is_noscript, Arg, Resp, Via};
pub(crate) use shared_acquire::SHARED_ACQUIRE;
pub(crate) use shared_extend::SHARED_EXTEND;
pub(crate) use shared_raise_fence::SHARED_RAISE_FENCE;
pub(crate) use shared_release::SHARED_RELEASE;

/// The value a lock key `R` holds while it has readers (shared claims, see
/// [`shared_acquire`]): 15 bytes, so never a token (20 bytes), which is
/// why the exclusive scripts, comparing `R` with their token, never take it
/// for theirs, and `SET NX` and the acquire scripts see `R` held. Written
/// out in each shared script (`local marker = ...`); this copy is for the
/// tests that check they agree.
#[cfg(test)]
pub(crate) const READERS_MARKER: &str = "redlock:readers";

/// A script argument: the number of lock keys `n`.
fn n(keys: &[String]) -> Arg<'static> {
    Arg::Int(keys.len() as u64)
}

/// Appends `command` to `packed` in RESP, its script sent `via`: the
/// writer of the operation that carries it. One writer for every
/// [`Command`] of the node model: the backend's requests go through it
/// (`crate::plan`), and so do the differential tests
/// ([`command_words`]).
pub(crate) fn write(packed: &mut Vec<u8>, via: Via, command: &Command<'_>) {
    match command {
        Command::SetNxGet { .. } | Command::SetNx { .. } | Command::Type { .. } => {
            set_nx::write(packed, command);
        }
        Command::Acquire { .. } => acquire::write(packed, via, command),
        Command::QueuedAcquire { .. } => queued_acquire::write(packed, via, command),
        Command::Extend { .. } => extend::write(packed, via, command),
        Command::Release { .. } => release::write(packed, via, command),
        Command::RaiseFence { .. } => raise_fence::write(packed, via, command),
        Command::SharedAcquire { .. } => shared_acquire::write(packed, via, command),
        Command::SharedExtend { .. } => shared_extend::write(packed, via, command),
        Command::SharedRelease { .. } => shared_release::write(packed, via, command),
        Command::SharedRaiseFence { .. } => shared_raise_fence::write(packed, via, command),
        Command::Inspect { .. } => inspect::write(packed, via, command),
        Command::Set { .. } | Command::ZAdd { .. } | Command::Del { .. } => {
            setup::write(packed, command);
        }
        // A command of a later model this writer does not know: a command
        // no server knows, answered with an error.
        _ => {
            Resp(packed).command(1).bulk(b"REDLOCK-UNKNOWN-COMMAND");
        }
    }
}

/// Reads the reply to a script's `command`, by the operation that sent it.
/// A reply of the wrong shape fails the whole call (and discards the
/// connection): the replies may be out of step. (`SET NX`'s replies are
/// read by [`set_nx::read`].)
pub(crate) fn read(command: &Command<'_>, reply: Value) -> Result<Read, Failure> {
    match command {
        Command::Acquire { .. } => acquire::read(command, reply),
        Command::QueuedAcquire { .. } => queued_acquire::read(command, reply),
        Command::Extend { .. } => extend::read(command, reply),
        Command::Release { .. } => release::read(command, reply),
        Command::RaiseFence { .. } => raise_fence::read(command, reply),
        Command::SharedAcquire { .. } => shared_acquire::read(command, reply),
        Command::SharedExtend { .. } => shared_extend::read(command, reply),
        Command::SharedRelease { .. } => shared_release::read(command, reply),
        Command::SharedRaiseFence { .. } => shared_raise_fence::read(command, reply),
        _ => Err(Failure::unexpected("a command without a script", &reply)),
    }
}

/// Reads a script's reply: an error reply is the request's own; an
/// integer is read as the node model reads it ([`Command::outcome`], the
/// decoding the in-memory node uses too: one decoding per command); any
/// other reply is unexpected of `what`.
fn read_int(what: &str, command: &Command<'_>, reply: Value) -> Result<Read, Failure> {
    if let Value::ServerError(err) = reply {
        return Ok(Read::Error(err.into()));
    }
    let unexpected = || Failure::unexpected(what, &reply);
    let model = match &reply {
        Value::Int(n) => Reply::Int(*n),
        _ => return Err(unexpected()),
    };
    match command.outcome(model) {
        Ok(Outcome::Done(response)) => Ok(Read::Done(response)),
        Ok(Outcome::Released { held, waited }) => Ok(Read::Released { held, waited }),
        Ok(Outcome::Refused(_)) | Err(_) => Err(unexpected()),
    }
}

/// A request's replies, read.
pub(crate) enum Read {
    Done(Response),
    /// The release script's answer: whether every key held the token, and
    /// whether a manager waited for a deleted one.
    Released {
        held: bool,
        waited: bool,
    },
    /// The server's error reply to this request alone.
    Error(redis::RedisError),
    /// A reply that is an error for this request alone (a list at the key).
    Wrong {
        kind: RedisErrorKind,
        detail: String,
    },
}

impl Read {
    /// Whether the server did nothing and the request must go again in the
    /// fallback form: `NOSCRIPT` (the server did not have the script an
    /// `EVALSHA` named), or a syntax error (a server older than 7.0 refusing
    /// `SET` with both `NX` and `GET`, [`set_nx::refuses_set_get`]).
    pub(crate) fn must_retry(&self) -> bool {
        matches!(self, Read::Error(err) if is_noscript(err) || set_nx::refuses_set_get(err))
    }
}

/// The bodies of every script, for a new connection to load (`SCRIPT LOAD`,
/// in the same round trip as the rest of its handshake) so that `EVALSHA`
/// hits from the first call (also after a server restart).
///
/// This also vets the node: a Sentinel (or another server without
/// scripting) answers "unknown command" here in plain text, rather than
/// later echoing the binary lock token in a reply that cannot be parsed. A
/// `NOPERM` (an ACL user without `SCRIPT`) is tolerated: the calls fall back
/// to `EVAL`.
pub(crate) fn preload() -> [&'static str; 11] {
    [
        ACQUIRE.code,
        QUEUED_ACQUIRE.code,
        RELEASE.code,
        EXTEND.code,
        RAISE_FENCE.code,
        SHARED_ACQUIRE.code,
        SHARED_EXTEND.code,
        SHARED_RELEASE.code,
        SHARED_RAISE_FENCE.code,
        INSPECT.code,
        INSPECT_WATCH.code,
    ]
}

/// The words of `command` as the backend sends it (scripts by `EVALSHA`,
/// or with `body` by `EVAL`), for tests that send it themselves.
///
/// # Examples
///
/// ```
/// use redlock_core::model::Command;
/// let words = redlock_redis::testing::command_words(
///     &Command::SetNxGet { key: "k", token: b"t", ttl_ms: 5 },
///     false,
/// );
/// assert_eq!(words, [&b"SET"[..], b"k", b"t", b"NX", b"PX", b"5", b"GET"]);
/// ```
#[must_use]
pub fn command_words(command: &Command<'_>, body: bool) -> Vec<Vec<u8>> {
    let mut packed = Vec::new();
    write(
        packed.as_mut(),
        if body { Via::Body } else { Via::Hash },
        command,
    );
    split_resp(&packed)
}

/// The bulk words of commands written by [`Resp`].
fn split_resp(mut packed: &[u8]) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    let line = |p: &[u8]| p.iter().position(|b| *b == b'\r').unwrap_or(p.len());
    while let Some(&first) = packed.first() {
        let end = line(packed);
        let n: usize = std::str::from_utf8(&packed[1..end])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        packed = packed.get(end + 2..).unwrap_or_default();
        if first == b'$' {
            words.push(packed.get(..n).unwrap_or_default().to_vec());
            packed = packed.get(n + 2..).unwrap_or_default();
        }
    }
    words
}

/// What the tests of each operation share: claims, and the node model
/// answering a request as a server would, read by the operation.
#[cfg(test)]
pub(crate) mod pairing {
    use std::time::Duration;

    use redis::Value;
    use redlock_core::backend::{Claim, Request, Token};
    use redlock_core::model::{Command, Node, Reply};
    use redlock_core::{Resources, Ttl};

    use super::Read;
    use crate::session::Failure;
    use crate::RELEASE_CHANNEL;

    pub(crate) const CHANNEL: &[u8] = RELEASE_CHANNEL.as_bytes();

    /// A TTL of 10 s.
    pub(crate) fn ttl() -> Ttl {
        Ttl::new(Duration::from_secs(10)).expect("a valid TTL")
    }

    /// A claim on `keys` with a fixed token (for this crate's tests).
    pub(crate) fn claim(keys: &[&str]) -> Claim {
        claim_by(keys, 7)
    }

    /// A claim on `keys` with the token of `byte`s.
    pub(crate) fn claim_by(keys: &[&str], byte: u8) -> Claim {
        Claim::new(
            Resources::new(keys.iter().copied()).expect("keys"),
            Token::from_bytes([byte; 20]),
        )
    }

    /// The name of `command`'s variant.
    pub(crate) fn variant(command: &Command<'_>) -> String {
        let shown = format!("{command:?}");
        shown
            .split([' ', '{', '('])
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    /// The model node's reply to `command` at `now`, as a server sends it
    /// (an error reply only shown: no test here expects one).
    pub(crate) fn served(node: &mut Node, now: i64, command: &Command<'_>) -> Value {
        match node.apply(now, command, &mut Vec::new()) {
            Reply::Int(n) => Value::Int(n),
            Reply::Nil => Value::Nil,
            Reply::Ok => Value::Okay,
            Reply::Status(s) => Value::SimpleString(s.to_owned()),
            Reply::Bulk(b) => Value::BulkString(b),
            // Not expected in these tests: shown, so that the read fails.
            other => Value::SimpleString(format!("{other:?}")),
        }
    }

    /// A read, in words.
    pub(crate) fn describe(read: Result<Read, Failure>) -> String {
        match read {
            Ok(Read::Done(response)) => format!("{response:?}"),
            Ok(Read::Released { held, waited }) => format!("released held={held} waited={waited}"),
            Ok(Read::Error(err)) => format!("error {err}"),
            Ok(Read::Wrong { detail, .. }) => format!("wrong {detail}"),
            Err(_) => "failed".to_owned(),
        }
    }

    /// Sends each request, as the model command [`Command::of`] makes of
    /// it, to one model node, and reads the node's reply by the operation
    /// that writes that command (`SET NX` by [`super::set_nx::read`], the
    /// scripts by [`super::read`]): each read must answer as given, and
    /// some step's command must be `model`.
    pub(crate) fn replay(model: &str, steps: &[(Request<'_>, &str)]) {
        let mut node = Node::new();
        let mut seen = false;
        for (request, expected) in steps {
            let command = Command::of(request, CHANNEL).expect("a known request");
            seen |= variant(&command) == model;
            let reply = served(&mut node, 0, &command);
            let read = match command {
                Command::SetNxGet { key, .. } => {
                    super::set_nx::read(key, true, &mut std::iter::once(reply))
                }
                _ => super::read(&command, reply),
            };
            assert_eq!(describe(read), *expected, "{command:?}");
        }
        assert!(seen, "no step sends {model}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_sha1_hex_and_distinct() {
        let hashes = [
            &ACQUIRE.hash,
            &QUEUED_ACQUIRE.hash,
            &RELEASE.hash,
            &EXTEND.hash,
            &RAISE_FENCE.hash,
            &SHARED_ACQUIRE.hash,
            &SHARED_EXTEND.hash,
            &SHARED_RELEASE.hash,
            &SHARED_RAISE_FENCE.hash,
            &INSPECT.hash,
            &INSPECT_WATCH.hash,
        ];
        for hash in hashes {
            assert_eq!(hash.len(), 40);
            assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
        }
        let distinct: std::collections::HashSet<_> = hashes.into_iter().collect();
        assert_eq!(distinct.len(), 11);
        assert_eq!(preload().len(), 11);
    }

    #[test]
    fn the_shared_scripts_write_the_marker_that_is_never_a_token() {
        assert_ne!(READERS_MARKER.len(), 20);
        let quoted = format!("local marker = '{READERS_MARKER}'");
        for script in [
            &SHARED_ACQUIRE,
            &SHARED_EXTEND,
            &SHARED_RELEASE,
            &SHARED_RAISE_FENCE,
        ] {
            assert!(script.code.contains(&quoted), "{}", script.code);
        }
        // The exclusive scripts know nothing of readers.
        for script in [&ACQUIRE, &QUEUED_ACQUIRE, &RELEASE, &EXTEND, &RAISE_FENCE] {
            assert!(!script.code.contains("readers"));
        }
    }

    #[test]
    fn the_scripts_spell_the_fence_limit_as_the_core_defines_it() {
        let limit = redlock_core::decide::FENCE_LIMIT;
        let refused = format!("v >= '{}'", limit - 1);
        let most = format!("want > '{limit}'");
        let digits = format!("#v == {}", limit.to_string().len());
        for script in [&ACQUIRE, &QUEUED_ACQUIRE, &SHARED_ACQUIRE] {
            assert!(script.code.contains(&refused), "{}", script.code);
            assert!(script.code.contains(&digits), "{}", script.code);
        }
        for script in [&RAISE_FENCE, &SHARED_RAISE_FENCE] {
            assert!(script.code.contains(&most), "{}", script.code);
        }
        // Below 2^53: Lua's doubles hold every counter exactly.
        assert!(limit < 1 << 53);
    }

    #[test]
    fn the_scripts_spell_the_wire_format_as_the_core_defines_it() {
        use redlock_core::keys::{FORMAT_SUFFIX, SEPARATOR, WIRE_FORMAT};
        let ours = format!("f ~= '{WIRE_FORMAT}'");
        let speaks = format!("this client speaks {WIRE_FORMAT}:");
        // Lua's decimal escape for the separator, then the suffix's name.
        let escape = format!("\\{:03}", u32::from(SEPARATOR));
        let name = FORMAT_SUFFIX.strip_prefix(SEPARATOR).unwrap_or_default();
        let key = format!("'^[^{escape}]*') .. '{escape}{name}'");
        let acquiring = [
            &ACQUIRE,
            &QUEUED_ACQUIRE,
            &RAISE_FENCE,
            &SHARED_ACQUIRE,
            &SHARED_RAISE_FENCE,
        ];
        for script in acquiring {
            for text in [&ours, &speaks, &key, &"WIREFORMAT ".to_owned()] {
                assert!(
                    script.code.contains(text.as_str()),
                    "{text}: {}",
                    script.code
                );
            }
            // Before anything else is read: the first `GET` is the format's.
            let first_get = script.code.find("'GET'").unwrap_or_default();
            let format_get = script.code.find(&key).unwrap_or(usize::MAX);
            assert!(
                format_get > first_get && format_get - first_get < 40,
                "{}",
                script.code
            );
        }
        // Releases and extends never read it: a holder can always let go.
        for script in [&RELEASE, &EXTEND, &SHARED_RELEASE, &SHARED_EXTEND] {
            assert!(!script.code.contains("WIREFORMAT"), "{}", script.code);
            assert!(!script.code.contains(&escape), "{}", script.code);
        }
    }

    #[test]
    fn every_operation_names_a_distinct_model_command() {
        let models = [
            set_nx::MODEL,
            acquire::MODEL,
            queued_acquire::MODEL,
            extend::MODEL,
            release::MODEL,
            raise_fence::MODEL,
            shared_acquire::MODEL,
            shared_extend::MODEL,
            shared_release::MODEL,
            shared_raise_fence::MODEL,
        ];
        let distinct: std::collections::HashSet<_> = models.into_iter().collect();
        assert_eq!(distinct.len(), models.len());
    }
}
