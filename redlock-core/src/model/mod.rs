//! The reference model of one lock node: what a Redis master does with
//! every command the Redis backend sends, written once, in Rust.
//!
//! A [`Node`] is a key space with Redis's own types and expiry
//! ([`Keyspace`]: strings, counters, sorted sets, `PTTL`) and one
//! [`Node::apply`] for every [`Command`]: `SET ... NX PX ... GET`, each of
//! the backend's scripts (acquire, queued acquire with its waiting line,
//! extend, release, fence raise, the shared claims' acquire, extend,
//! release and raise), and the plain commands another client of the node
//! may send. `PUBLISH` is an output ([`Published`]). Helper keys (fencing
//! counters, waiting lines, readers: [`crate::keys`]) are keys in the same
//! space as users' locks, as on Redis.
//!
//! The layout is versioned ([`crate::keys`], Versions): every script that
//! acquires or joins state (acquire, queued acquire, fence raise, and the
//! shared acquire and raise) first reads each lock key's format key and
//! refuses ([`ErrorReply::WireFormat`], nothing written) unless it is
//! absent or holds [`WIRE_FORMAT`](crate::keys::WIRE_FORMAT); releases,
//! extends and `SET NX` never read it. This version never writes it. A
//! future version that changes the layout writes its number there (with
//! a TTL at least as long as its helper keys') and refuses resources whose
//! helper keys it finds without one. No threads, no clock of its own,
//! no faults: time (milliseconds on the node's clock) is passed in.
//!
//! Who uses it: `redlock-mock`'s in-memory node is this model behind a
//! mutex; the Redis backend's scripts are proven equal to it by the
//! differential tests (`tests/tests/integration/differential.rs`), which
//! run generated command sequences on the model and on real servers of
//! every supported kind and compare every reply and the whole key space
//! after each step. [`Command::of`] is the one mapping from a backend
//! [`Request`] to the command a node runs, for both.
//!
//! # Examples
//!
//! ```
//! use redlock_core::model::{Command, Node, Reply};
//!
//! let mut node = Node::new();
//! let keys = ["job".to_owned()];
//! let acquire = Command::Acquire { keys: &keys, token: b"A", ttl_ms: 100, fence: true };
//! let mut published = Vec::new();
//! assert_eq!(node.apply(0, &acquire, &mut published), Reply::Int(1));
//! // Held by A until 100 ms (inclusive); B is refused.
//! let other = Command::Acquire { keys: &keys, token: b"B", ttl_ms: 100, fence: true };
//! assert_eq!(node.apply(100, &other, &mut published), Reply::Int(-1));
//! assert_eq!(node.apply(101, &other, &mut published), Reply::Int(2));
//! ```

mod keyspace;
mod lua;
mod scripts;

pub use keyspace::{CallError, Entry, Keyspace, Value};
pub use scripts::{READERS_MARKER, READER_PLACE, WRITER_PLACE};

use lua::Decimal;

pub use crate::backend::Watcher;
use crate::backend::{AcquireOutcome, KeyView, Request, Response};
#[cfg(doc)]
use crate::keys::WATCH_SUFFIX;

/// One command the Redis backend sends to a node (or another client of
/// the node could send), as the node sees it.
///
/// The lock keys of a script are the claim's; its helper keys (counters,
/// waiting lines, reader sets) follow from them by [`crate::keys`], as the
/// backend names them.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Command<'a> {
    /// `SET key token NX PX ttl GET` (Redis 7.0 and later): a single-key
    /// acquire without fencing or waiting line. Answers the key's old
    /// value ([`Reply::Bulk`]: refused), or [`Reply::Nil`] (set).
    SetNxGet {
        /// The lock key.
        key: &'a str,
        /// The token.
        token: &'a [u8],
        /// Its TTL in milliseconds.
        ttl_ms: u64,
    },
    /// `SET key token NX PX ttl`: [`Reply::Ok`] when set, else
    /// [`Reply::Nil`] (the form older servers take, followed by
    /// [`Command::Type`]).
    SetNx {
        /// The lock key.
        key: &'a str,
        /// The token.
        token: &'a [u8],
        /// Its TTL in milliseconds.
        ttl_ms: u64,
    },
    /// `TYPE key`: [`Reply::Status`] `string`, `zset` or `none`.
    Type {
        /// The key.
        key: &'a [u8],
    },
    /// The acquire script: all keys or none; with `fence`, the counters.
    Acquire {
        /// The lock keys.
        keys: &'a [String],
        /// The token.
        token: &'a [u8],
        /// The TTL in milliseconds.
        ttl_ms: u64,
        /// Whether to bump the fencing counters.
        fence: bool,
    },
    /// The queued acquire script: the acquire of a caller waiting in the
    /// keys' lines ([`Queued`](crate::backend::Queued)).
    QueuedAcquire {
        /// The lock keys.
        keys: &'a [String],
        /// The token.
        token: &'a [u8],
        /// The TTL in milliseconds.
        ttl_ms: u64,
        /// Whether to bump the fencing counters.
        fence: bool,
        /// The waiting manager's id.
        manager: u64,
        /// How long its place lives, in milliseconds.
        mark_ttl_ms: u64,
        /// Whether to give way to other managers first in a line.
        yields: bool,
        /// Its place in the lines.
        ticket: u64,
    },
    /// The extend script.
    Extend {
        /// The lock keys.
        keys: &'a [String],
        /// The token.
        token: &'a [u8],
        /// The new TTL in milliseconds.
        ttl_ms: u64,
    },
    /// The release script: `leave` takes that manager out of the keys'
    /// lines first; the first live manager waiting for a freed key is told
    /// on `channel:<id>`.
    Release {
        /// The lock keys.
        keys: &'a [String],
        /// The token.
        token: &'a [u8],
        /// The release channels' prefix.
        channel: &'a [u8],
        /// The manager whose lock this is, when it waited in line.
        leave: Option<u64>,
        /// The lock is an election's, of one key: once it is deleted, each
        /// live watcher of the key (`key` + [`WATCH_SUFFIX`], see
        /// [`Command::Inspect`]) is told on `channel:<id>`, in the set's
        /// order, after the first waiter.
        watched: bool,
    },
    /// The fence raise script.
    RaiseFence {
        /// The lock keys.
        keys: &'a [String],
        /// The token.
        token: &'a [u8],
        /// The value to raise the counters to.
        at_least: u64,
    },
    /// The shared acquire script (a reader). With a manager, a refused
    /// reader waits in the keys' lines as a queued acquire does, with a
    /// reader's place ([`READER_PLACE`]), and gives way (with `yields`)
    /// only to the live writers of other managers ahead of it.
    SharedAcquire {
        /// The lock keys.
        keys: &'a [String],
        /// The token.
        token: &'a [u8],
        /// The TTL in milliseconds.
        ttl_ms: u64,
        /// Whether to bump the fencing counters.
        fence: bool,
        /// The reader's manager, when it waits in line.
        manager: Option<u64>,
        /// Whether to give way to other managers' writers in a line.
        yields: bool,
        /// How long its place lives, in milliseconds (with a manager).
        mark_ttl_ms: u64,
        /// Its ticket: its place in the lines (with a manager).
        ticket: u64,
    },
    /// The shared extend script.
    SharedExtend {
        /// The lock keys.
        keys: &'a [String],
        /// The token.
        token: &'a [u8],
        /// The new TTL in milliseconds.
        ttl_ms: u64,
    },
    /// The shared release script: `leave` takes that manager out of the
    /// keys' lines first, as [`Command::Release`] does.
    SharedRelease {
        /// The lock keys.
        keys: &'a [String],
        /// The token.
        token: &'a [u8],
        /// The release channels' prefix.
        channel: &'a [u8],
        /// The manager whose read this is, when it waited in line.
        leave: Option<u64>,
    },
    /// The shared fence raise script.
    SharedRaiseFence {
        /// The lock keys.
        keys: &'a [String],
        /// The token.
        token: &'a [u8],
        /// The value to raise the counters to.
        at_least: u64,
    },
    /// `SET key value [PX px]`, as another client may write any key.
    Set {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// The TTL in milliseconds, if any.
        px: Option<u64>,
    },
    /// `ZADD key score member`, as another client may write any key.
    ZAdd {
        /// The key.
        key: &'a [u8],
        /// The score (an integer here).
        score: i64,
        /// The member.
        member: &'a [u8],
    },
    /// `DEL key`.
    Del {
        /// The key.
        key: &'a [u8],
    },
    /// The inspect script: who holds lock key `key`, read at one instant.
    /// Answers [`Reply::Array`] of three: the key's value when it is a
    /// string, else [`Reply::Nil`] (a lock's [`Claim::value`]: its token,
    /// then its manager's identity); its `PTTL` ([`Reply::Int`]: -2 when
    /// absent, -1 without expiry); the value of its fencing counter
    /// (`key` + [`FENCE_SUFFIX`](crate::keys::FENCE_SUFFIX)) when that is a
    /// string, else [`Reply::Nil`]. With a `watcher`, the reader then
    /// joins the key's watchers (`key` + [`WATCH_SUFFIX`]): the set's
    /// members whose time is up are removed, the watcher's id is added
    /// (or moved) with the time `now + ttl_ms`, and the set expires with
    /// its last member; a watchers key of another type is left as it is
    /// (`redis.pcall`). Writes nothing else.
    ///
    /// [`Claim::value`]: crate::backend::Claim::value
    Inspect {
        /// The lock key.
        key: &'a str,
        /// The manager that watches the key from now on, if any.
        watcher: Option<Watcher>,
    },
}

/// A node's reply to a [`Command`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// An integer.
    Int(i64),
    /// Nothing (`nil`).
    Nil,
    /// `OK`.
    Ok,
    /// A status such as `TYPE`'s.
    Status(&'static str),
    /// A string.
    Bulk(Vec<u8>),
    /// An error reply.
    Error(ErrorReply),
    /// A list of replies (a script's table).
    Array(Vec<Reply>),
}

/// An error reply, by where it came from: servers word these differently
/// (Redis 6.2 wraps a script's failed `redis.call` in `ERR Error running
/// script`), so compare by [`ErrorReply::code`] found in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorReply {
    /// A command failed (inside a script: its `redis.call`).
    Call(CallError),
    /// The script refused with `redis.error_reply`: `WRONGTYPE` (a helper
    /// key of another shape) or `FENCEMAX` (a counter at its limit).
    Script(&'static str),
    /// An acquiring script refused with `redis.error_reply('WIREFORMAT
    /// ...')`: a lock key's format key ([`crate::keys::format_key`]) says
    /// another wire format than [`WIRE_FORMAT`](crate::keys::WIRE_FORMAT)
    /// (see [`crate::keys`], Versions). Carries the format found when the
    /// value is a decimal of 1 to 9 digits without a leading zero (the
    /// scripts name it in their message), else `None` (another value, or a
    /// key of another type).
    WireFormat(Option<u32>),
}

impl ErrorReply {
    /// The error code: the word every server puts in the reply's text.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::model::{CallError, ErrorReply};
    /// assert_eq!(ErrorReply::Script("FENCEMAX").code(), "FENCEMAX");
    /// assert_eq!(ErrorReply::Call(CallError::WrongType).code(), "WRONGTYPE");
    /// assert_eq!(ErrorReply::WireFormat(Some(2)).code(), "WIREFORMAT");
    /// ```
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            ErrorReply::Call(e) => e.code(),
            ErrorReply::Script(code) => code,
            ErrorReply::WireFormat(_) => "WIREFORMAT",
        }
    }
}

/// A message a command published (`PUBLISH channel message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The channel.
    pub channel: Vec<u8>,
    /// The message.
    pub message: Vec<u8>,
}

/// One node: its key space (and buffers its commands reuse).
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// The node's keys.
    pub keys: Keyspace,
    scratch: scripts::Scratch,
}

impl Node {
    /// An empty node.
    ///
    /// # Examples
    ///
    /// ```
    /// let node = redlock_core::model::Node::new();
    /// assert_eq!(node.keys.live(0).count(), 0);
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Node::default()
    }

    /// The first live manager in the waiting line at key `line` (a
    /// resource's name and [`WAIT_SUFFIX`](crate::keys::WAIT_SUFFIX)): the
    /// one a release would tell, as the release script finds it.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::model::{Command, Node};
    /// let mut node = Node::new();
    /// let keys = ["r".to_owned()];
    /// let queued = |token, manager| Command::QueuedAcquire {
    ///     keys: &keys, token, ttl_ms: 100, fence: false,
    ///     manager, mark_ttl_ms: 50, yields: true, ticket: manager,
    /// };
    /// node.apply(0, &queued(b"A", 1), &mut Vec::new());
    /// node.apply(1, &queued(b"B", 2), &mut Vec::new());
    /// assert_eq!(node.first_in_line(2, "r\u{1f}waiting".as_bytes()), Some(&b"2"[..]));
    /// // Its place lives for the marks' TTL.
    /// assert_eq!(node.first_in_line(52, "r\u{1f}waiting".as_bytes()), None);
    /// ```
    #[must_use]
    pub fn first_in_line(&self, now: i64, line: &[u8]) -> Option<&[u8]> {
        self.in_line(now, line).into_iter().next()
    }

    /// The live managers in the waiting line at key `line`, in order
    /// (writers and readers: a manager's place says which, see
    /// [`WRITER_PLACE`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::model::{Command, Node};
    /// let mut node = Node::new();
    /// let keys = ["r".to_owned()];
    /// let queued = |token, manager| Command::QueuedAcquire {
    ///     keys: &keys, token, ttl_ms: 100, fence: false,
    ///     manager, mark_ttl_ms: 50, yields: true, ticket: manager,
    /// };
    /// node.apply(0, &queued(b"A", 1), &mut Vec::new());
    /// node.apply(1, &queued(b"B", 2), &mut Vec::new());
    /// node.apply(1, &queued(b"C", 3), &mut Vec::new());
    /// assert_eq!(node.in_line(2, "r\u{1f}waiting".as_bytes()), [&b"2"[..], b"3"]);
    /// ```
    #[must_use]
    pub fn in_line(&self, now: i64, line: &[u8]) -> Vec<&[u8]> {
        let Some(Entry {
            value: Value::Str(v),
            ..
        }) = self.keys.entry(now, line)
        else {
            return Vec::new();
        };
        if !lua::is_line(v) {
            return Vec::new();
        }
        lua::words(v)
            .map(|(_, id)| id)
            .filter(|id| self.keys.entry(now, &scripts::place(line, id)).is_some())
            .collect()
    }

    /// Runs `command` at `now` (milliseconds on the node's clock), with
    /// what it publishes appended to `published`.
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    pub fn apply(
        &mut self,
        now: i64,
        command: &Command<'_>,
        published: &mut Vec<Published>,
    ) -> Reply {
        let (ks, sc) = (&mut self.keys, &mut self.scratch);
        let ttl = |ms: u64| i64::try_from(ms).unwrap_or(i64::MAX);
        let result = match *command {
            Command::SetNxGet { key, token, ttl_ms } => {
                return match ks.get(now, key.as_bytes()) {
                    Err(e) => Reply::Error(ErrorReply::Call(e)),
                    Ok(Some(old)) => Reply::Bulk(old.to_vec()),
                    Ok(None) => {
                        ks.set(now, key.as_bytes(), token, Some(ttl(ttl_ms)));
                        Reply::Nil
                    }
                }
            }
            Command::SetNx { key, token, ttl_ms } => {
                if ks.entry(now, key.as_bytes()).is_some() {
                    return Reply::Nil;
                }
                ks.set(now, key.as_bytes(), token, Some(ttl(ttl_ms)));
                return Reply::Ok;
            }
            Command::Type { key } => {
                return Reply::Status(ks.entry(now, key).map_or("none", |e| e.value.type_name()))
            }
            Command::Set { key, value, px } => {
                ks.set(now, key, value, px.map(ttl));
                return Reply::Ok;
            }
            Command::ZAdd { key, score, member } => {
                return match ks.zadd(now, key, score as f64, member) {
                    Ok(new) => Reply::Int(i64::from(new)),
                    Err(e) => Reply::Error(ErrorReply::Call(e)),
                }
            }
            Command::Del { key } => return Reply::Int(i64::from(ks.del(now, key))),
            Command::Inspect { key, watcher } => {
                let reply = inspect(ks, now, key);
                if let Some(watcher) = watcher {
                    scripts::watch(ks, now, key, watcher);
                }
                return reply;
            }
            Command::Acquire {
                keys,
                token,
                ttl_ms,
                fence,
            } => scripts::acquire(ks, sc, now, keys, token, ttl(ttl_ms), fence),
            Command::QueuedAcquire {
                keys,
                token,
                ttl_ms,
                fence,
                manager,
                mark_ttl_ms,
                yields,
                ticket,
            } => {
                let me = Decimal::of_u64(manager);
                let line = scripts::Line {
                    me: me.bytes(),
                    mark_ttl: ttl(mark_ttl_ms),
                    yields,
                    ticket: scripts::ticket_arg(ticket),
                };
                scripts::queued_acquire(ks, sc, now, keys, token, ttl(ttl_ms), fence, line)
            }
            Command::Extend {
                keys,
                token,
                ttl_ms,
            } => scripts::extend(ks, now, keys, token, ttl(ttl_ms)),
            Command::Release {
                keys,
                token,
                channel,
                leave,
                watched,
            } => {
                let me = leave.map(Decimal::of_u64);
                let leave = me.as_ref().map(Decimal::bytes);
                let reply = scripts::release(ks, sc, now, keys, token, channel, leave, published);
                if let ([key], true, Ok(Reply::Int(1 | 3))) = (keys, watched, &reply) {
                    scripts::tell_watchers(ks, now, key, channel, published);
                }
                reply
            }
            Command::RaiseFence {
                keys,
                token,
                at_least,
            } => scripts::raise_fence(ks, sc, now, keys, token, Decimal::of_u64(at_least).bytes()),
            Command::SharedAcquire {
                keys,
                token,
                ttl_ms,
                fence,
                manager,
                yields,
                mark_ttl_ms,
                ticket,
            } => {
                let me = manager.map(Decimal::of_u64);
                let line = me.as_ref().map(|me| scripts::Line {
                    me: me.bytes(),
                    mark_ttl: ttl(mark_ttl_ms),
                    yields,
                    ticket: scripts::ticket_arg(ticket),
                });
                scripts::shared_acquire(ks, sc, now, keys, token, ttl(ttl_ms), fence, line)
            }
            Command::SharedExtend {
                keys,
                token,
                ttl_ms,
            } => scripts::shared_extend(ks, sc, now, keys, token, ttl(ttl_ms)),
            Command::SharedRelease {
                keys,
                token,
                channel,
                leave,
            } => {
                let me = leave.map(Decimal::of_u64);
                let leave = me.as_ref().map(Decimal::bytes);
                scripts::shared_release(ks, sc, now, keys, token, channel, leave, published)
            }
            Command::SharedRaiseFence {
                keys,
                token,
                at_least,
            } => scripts::shared_raise_fence(
                ks,
                sc,
                now,
                keys,
                token,
                Decimal::of_u64(at_least).bytes(),
            ),
        };
        result.unwrap_or_else(|reply| reply)
    }
}

/// [`Command::Inspect`] of lock key `key` at `now`.
fn inspect(ks: &Keyspace, now: i64, key: &str) -> Reply {
    let string = |key: &[u8]| match ks.entry(now, key) {
        Some(Entry {
            value: Value::Str(v),
            ..
        }) => Reply::Bulk(v.clone()),
        _ => Reply::Nil,
    };
    let pttl = match ks.entry(now, key.as_bytes()) {
        None => -2,
        Some(Entry {
            expires_at: None, ..
        }) => -1,
        Some(Entry {
            expires_at: Some(at),
            ..
        }) => at.saturating_sub(now).max(0),
    };
    let mut counter = Vec::with_capacity(key.len() + crate::keys::FENCE_SUFFIX.len());
    counter.extend_from_slice(key.as_bytes());
    counter.extend_from_slice(crate::keys::FENCE_SUFFIX.as_bytes());
    Reply::Array(vec![
        string(key.as_bytes()),
        Reply::Int(pttl),
        string(&counter),
    ])
}

/// What a [`Command::Inspect`] reply says, for
/// [`Inspect`](crate::backend::Inspect) backends: `None` for a reply of
/// another shape. A fencing counter that is not a canonical decimal (some
/// other client wrote it) reads as none.
///
/// # Examples
///
/// ```
/// use redlock_core::model::{inspection, Command, Node};
/// let mut node = Node::new();
/// let keys = ["job".to_owned()];
/// let acquire = Command::Acquire { keys: &keys, token: b"0123456789abcdefghijweb-1", ttl_ms: 100, fence: true };
/// node.apply(0, &acquire, &mut Vec::new());
/// let view = inspection(node.apply(40, &Command::Inspect { key: "job", watcher: None }, &mut Vec::new())).unwrap();
/// assert_eq!(view.value.as_deref(), Some(&b"0123456789abcdefghijweb-1"[..]));
/// assert_eq!(view.ttl, Some(std::time::Duration::from_millis(60)));
/// assert_eq!(view.fence, Some(1));
/// ```
#[must_use]
pub fn inspection(reply: Reply) -> Option<KeyView> {
    let Reply::Array(items) = reply else {
        return None;
    };
    let [value, Reply::Int(pttl), counter] = <[Reply; 3]>::try_from(items).ok()? else {
        return None;
    };
    let value = match value {
        Reply::Bulk(v) => Some(v),
        Reply::Nil => None,
        _ => return None,
    };
    let fence = match counter {
        Reply::Bulk(v) => std::str::from_utf8(&v)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse().ok()),
        Reply::Nil => None,
        _ => return None,
    };
    let ttl = match (pttl, &value) {
        (_, None) | (..=-2, _) => None,
        (-1, Some(_)) => Some(std::time::Duration::MAX),
        (ms, Some(_)) => Some(std::time::Duration::from_millis(ms.unsigned_abs())),
    };
    Some(KeyView {
        value: value.filter(|_| ttl.is_some()),
        ttl,
        fence,
    })
}

/// What a [`Command`]'s reply means to the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The answer to the request.
    Done(Response),
    /// A release's answer: whether every key held the token, and whether a
    /// manager waited for a freed key.
    Released {
        /// Every key held the token.
        held: bool,
        /// A manager waited for a freed key (and was told).
        waited: bool,
    },
    /// The node refused with an error reply.
    Refused(ErrorReply),
}

/// A reply of a shape the command never gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unexpected(pub Reply);

impl<'a> Command<'a> {
    /// The command a node runs for `request`: the one mapping from the
    /// backend contract to node commands, which the Redis backend sends
    /// and the in-memory node applies. Releases are told on `channel`.
    /// `None` for a kind of request the model does not know.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{Resources, Ttl};
    /// use redlock_core::backend::{Claim, Request, Token};
    /// use redlock_core::model::Command;
    /// let claim = Claim::new(Resources::one("k")?, Token::from_bytes([1; 20]));
    /// let ttl = Ttl::new(Duration::from_secs(1))?;
    /// let request = Request::Acquire { claim: &claim, ttl, fence: false };
    /// assert!(matches!(Command::of(&request, b"ch"), Some(Command::SetNxGet { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    #[inline]
    pub fn of(request: &Request<'a>, channel: &'a [u8]) -> Option<Self> {
        Some(match *request {
            Request::Acquire { claim, ttl, fence } => {
                let (keys, token) = (claim.keys(), claim.value());
                let ttl_ms = ttl.as_millis();
                let queue = claim.queue();
                if claim.is_shared() {
                    Command::SharedAcquire {
                        keys,
                        token,
                        ttl_ms,
                        fence,
                        manager: queue.map(|q| q.manager()),
                        yields: queue.is_some_and(|q| q.yields()),
                        mark_ttl_ms: queue.map_or(0, |q| q.mark_ttl().as_millis()),
                        ticket: queue.map_or(0, |q| q.ticket()),
                    }
                } else if let Some(q) = queue {
                    Command::QueuedAcquire {
                        keys,
                        token,
                        ttl_ms,
                        fence,
                        manager: q.manager(),
                        mark_ttl_ms: q.mark_ttl().as_millis(),
                        yields: q.yields(),
                        ticket: q.ticket(),
                    }
                } else if let ([key], false) = (keys, fence) {
                    Command::SetNxGet { key, token, ttl_ms }
                } else {
                    Command::Acquire {
                        keys,
                        token,
                        ttl_ms,
                        fence,
                    }
                }
            }
            Request::Extend { claim, ttl } => {
                let (keys, token) = (claim.keys(), claim.value());
                let ttl_ms = ttl.as_millis();
                if claim.is_shared() {
                    Command::SharedExtend {
                        keys,
                        token,
                        ttl_ms,
                    }
                } else {
                    Command::Extend {
                        keys,
                        token,
                        ttl_ms,
                    }
                }
            }
            Request::Release { claim } => {
                let (keys, token) = (claim.keys(), claim.value());
                if claim.is_shared() {
                    Command::SharedRelease {
                        keys,
                        token,
                        channel,
                        leave: claim.queue().map(|q| q.manager()),
                    }
                } else {
                    Command::Release {
                        keys,
                        token,
                        channel,
                        leave: claim.queue().map(|q| q.manager()),
                        watched: claim.resources().is_watched(),
                    }
                }
            }
            Request::RaiseFence { claim, at_least } => {
                let (keys, token) = (claim.keys(), claim.value());
                // Redis counters are signed 64-bit.
                let at_least = at_least.min(i64::MAX.unsigned_abs());
                if claim.is_shared() {
                    Command::SharedRaiseFence {
                        keys,
                        token,
                        at_least,
                    }
                } else {
                    Command::RaiseFence {
                        keys,
                        token,
                        at_least,
                    }
                }
            }
            // Kinds of request added later: not modelled yet.
            #[allow(unreachable_patterns)]
            _ => return None,
        })
    }

    /// What `reply` means to the manager.
    ///
    /// # Errors
    ///
    /// [`Unexpected`] for a reply this command never gets.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::backend::{AcquireOutcome, Response};
    /// use redlock_core::model::{Command, Outcome, Reply};
    /// let keys = ["k".to_owned()];
    /// let acquire = Command::Acquire { keys: &keys, token: b"t", ttl_ms: 5, fence: true };
    /// let granted = Outcome::Done(Response::Acquire(AcquireOutcome::Granted { fence: Some(3) }));
    /// assert_eq!(acquire.outcome(Reply::Int(3)), Ok(granted));
    /// ```
    #[inline]
    pub fn outcome(&self, reply: Reply) -> Result<Outcome, Unexpected> {
        if let Reply::Error(e) = reply {
            return Ok(Outcome::Refused(e));
        }
        let acquired = |granted: bool, fence: Option<u64>| {
            Outcome::Done(Response::Acquire(if granted {
                AcquireOutcome::Granted { fence }
            } else {
                AcquireOutcome::HeldByOther
            }))
        };
        Ok(match (*self, reply) {
            (Command::SetNxGet { .. }, Reply::Nil) => acquired(true, None),
            (Command::SetNxGet { .. }, Reply::Bulk(_)) => acquired(false, None),
            (Command::SetNx { .. }, Reply::Ok) => acquired(true, None),
            (Command::SetNx { .. }, Reply::Nil) => acquired(false, None),
            (
                Command::Acquire { fence, .. }
                | Command::QueuedAcquire { fence, .. }
                | Command::SharedAcquire { fence, .. },
                Reply::Int(n),
            ) if n >= -1 => acquired(n >= 0, fence.then(|| n.unsigned_abs())),
            (Command::Release { .. } | Command::SharedRelease { .. }, Reply::Int(n @ 0..=3)) => {
                Outcome::Released {
                    held: n & 1 == 1,
                    waited: n & 2 == 2,
                }
            }
            (
                Command::Extend { .. }
                | Command::RaiseFence { .. }
                | Command::SharedExtend { .. }
                | Command::SharedRaiseFence { .. },
                Reply::Int(n @ 0..=1),
            ) => Outcome::Done(Response::Held(n == 1)),
            (_, reply) => return Err(Unexpected(reply)),
        })
    }
}

#[cfg(test)]
mod tests;
