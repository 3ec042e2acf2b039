//! [`RedisBackend`]: one Redis master as a Redlock node.

use std::fmt;
use std::time::{Duration, Instant};

use redis::Value;
use redlock_core::{AcquireOutcome, Claim, Connect, LockBackend, NodeId, Request, Response, Ttl};

use crate::pool::{Failure, NodePool, Session};
use crate::scripts::{ACQUIRE, EXTEND, RAISE_FENCE, RELEASE};
use crate::{RedisBackendBuilder, RedisErrorKind, RedisNodeError};

/// The suffix of a resource's fencing counter key: the counter of `invoice:42`
/// is `invoice:42:fence`.
pub const FENCE_SUFFIX: &str = ":fence";

/// Node timeouts above this are treated as this.
const MAX_NODE_TIMEOUT: Duration = Duration::from_secs(3600);

/// One Redis master, reached through its own small r2d2 connection pool.
///
/// # Commands and keys
///
/// A lock on resource `R` is the Redis string key `R` (no prefix is added)
/// holding the lock's 20 random token bytes, with a millisecond TTL.
///
/// - Acquire one resource without fencing: `SET R token NX PX ttl`. When it
///   is refused, `TYPE R` tells a lock held by someone else from a key of
///   another type ([`RedisErrorKind::WrongType`]).
/// - Acquire several resources, or with fencing: one Lua script that sets
///   every key or none; with fencing it also `INCR`s each resource's
///   counter `R:fence` (see [`FENCE_SUFFIX`]; counters have no TTL and are
///   never deleted) and returns the largest.
/// - Release: a Lua compare-and-delete over all keys; extend: a Lua
///   compare-and-`PEXPIRE`, all keys or none; raising fencing counters: a Lua
///   script that acts only while every key holds the token.
///
/// Scripts are hashed once per process and sent by `EVALSHA`. Each new
/// connection first loads them (`SCRIPT LOAD`, one round trip), which also
/// turns away a Sentinel port with [`RedisErrorKind::UnknownCommand`]; after
/// `NOSCRIPT` (a `SCRIPT FLUSH` mid-run) the same call resends the script
/// with `EVAL`. Do not name resources so that one is another's
/// counter (`R` and `R:fence`). An ACL user for the lock needs `SET`, `GET`,
/// `DEL`, `PEXPIRE`, `INCR`, `TYPE`, `EVAL` and `EVALSHA` on those keys
/// (and `SCRIPT`, optionally).
///
/// # Timeouts
///
/// Each call, from waiting for a pooled connection to reading the last
/// reply, is bounded by the node timeout. A connection that saw any failure
/// other than a plain error reply (a timeout, a reset) is discarded, so a
/// late reply is never read as the answer to a later command; when the
/// server closed a connection, the idle ones are replaced too. While the
/// node cannot be reached, the pool retries in the background (every
/// `max(node timeout, 100 ms)`) and calls fail at once with the latest
/// connection error.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redlock_redis::{RedisBackend, Redlock};
///
/// let backends = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"]
///     .into_iter()
///     .map(|url| RedisBackend::builder(url).node_timeout(Duration::from_millis(20)).build())
///     .collect::<Result<Vec<_>, _>>()?;
/// let locks = Redlock::builder(backends).node_timeout(Duration::from_millis(20)).build()?;
/// let lock = locks.lock("invoice:42", Duration::from_secs(10))?;
/// lock.release()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisBackend {
    node: NodeId,
    timeout: Duration,
    pool_size: u32,
    tls: bool,
    pool: NodePool,
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend")
            .field("node", &self.node)
            .field("node_timeout", &self.timeout)
            .field("pool_size", &self.pool_size)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl RedisBackend {
    /// The master at `url` with the default settings (see
    /// [`RedisBackend::builder`]).
    ///
    /// # Errors
    ///
    /// As [`RedisBackendBuilder::build`].
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_redis::{LockBackend, RedisBackend};
    /// let backend = RedisBackend::new("redis://Redis-A.internal")?;
    /// assert_eq!(backend.node_id().as_str(), "redis-a.internal:6379/0");
    /// # Ok::<(), redlock_redis::RedisNodeError>(())
    /// ```
    pub fn new(url: impl AsRef<str>) -> Result<Self, RedisNodeError> {
        Self::builder(url).build()
    }

    /// A builder for the master at `url`:
    ///
    /// - `redis://[user][:password@]host[:port][/db]` (port 6379 and db 0 by
    ///   default),
    /// - `rediss://...` for TLS (with the `tls` feature),
    /// - `redis+unix:///path/to/socket` or `unix:///path/to/socket`, with
    ///   optional `?db=N&user=U&pass=P`.
    ///
    /// The node id is the normalized address without credentials:
    /// `host:port/db` (host lower-cased), `rediss://host:port/db` for TLS,
    /// `unix:/path/db` for a socket. Two URLs for the same master give the
    /// same id, which the manager rejects as a duplicate.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_redis::{LockBackend, RedisBackend};
    /// let a = RedisBackend::builder("redis://user:pw@LOCALHOST:6379/0").build()?;
    /// let b = RedisBackend::builder("redis://localhost").build()?;
    /// assert_eq!(a.node_id(), b.node_id());
    /// let c = RedisBackend::builder("unix:///run/redis.sock?db=2").build()?;
    /// assert_eq!(c.node_id().as_str(), "unix:/run/redis.sock/2");
    /// # Ok::<(), redlock_redis::RedisNodeError>(())
    /// ```
    pub fn builder(url: impl AsRef<str>) -> RedisBackendBuilder {
        RedisBackendBuilder::new(url.as_ref())
    }

    /// The name of `resource`'s fencing counter key.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_redis::RedisBackend::fence_key("invoice:42"), "invoice:42:fence");
    /// ```
    #[must_use]
    pub fn fence_key(resource: &str) -> String {
        format!("{resource}{FENCE_SUFFIX}")
    }

    /// The timeout that bounds each call to this node.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let backend = redlock_redis::RedisBackend::new("redis://127.0.0.1")?;
    /// assert_eq!(backend.node_timeout(), Duration::from_millis(50));
    /// # Ok::<(), redlock_redis::RedisNodeError>(())
    /// ```
    #[must_use]
    pub fn node_timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn from_parts(
        node: NodeId,
        timeout: Duration,
        pool_size: u32,
        tls: bool,
        pool: NodePool,
    ) -> Self {
        RedisBackend {
            node,
            timeout,
            pool_size,
            tls,
            pool,
        }
    }

    pub(crate) fn effective_timeout(timeout: Duration) -> Duration {
        timeout.min(MAX_NODE_TIMEOUT)
    }

    fn deadline(&self) -> Instant {
        let now = Instant::now();
        now.checked_add(self.timeout).unwrap_or(now)
    }
}

/// `SET key token NX PX ttl` and `TYPE key` in one write: when the `SET` is
/// refused, the `TYPE` reply tells a held lock from a key of another type
/// (which would otherwise look like contention forever), at no extra round
/// trip.
fn acquire_one(
    session: &mut Session<'_>,
    key: &str,
    token: &[u8],
    ttl: Ttl,
) -> Result<AcquireOutcome, Failure> {
    let mut packed = Vec::new();
    write_set_nx(&mut packed, key, token, ttl);
    let mut replies = session.pipeline(&packed, 2)?.into_iter();
    match read_set_nx(key, replies.next(), replies.next())? {
        Read::Done(Response::Acquire(outcome)) => Ok(outcome),
        Read::Error(err) => Err(Failure::Redis(err)),
        Read::Wrong { kind, detail } => Err(Failure::Reply { kind, detail }),
        Read::Done(_) => Err(Failure::unexpected("SET NX PX", &Value::Nil)),
    }
}

/// Appends `SET key token NX PX ttl` and `TYPE key` to `packed`.
fn write_set_nx(packed: &mut Vec<u8>, key: &str, token: &[u8], ttl: Ttl) {
    let mut set = redis::cmd("SET");
    set.arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl.as_millis());
    set.write_packed_command(packed);
    redis::cmd("TYPE").arg(key).write_packed_command(packed);
}

/// Reads the replies to [`write_set_nx`]'s two commands.
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

/// How to read the reply to one pipelined request.
enum Reading<'a> {
    /// Two replies: `SET NX PX`, then `TYPE`.
    SetNx(&'a str),
    Acquire {
        fence: bool,
    },
    Held(&'static str),
}

/// A pipelined request's reply, read.
enum Read {
    Done(Response),
    /// The server's error reply to this request alone.
    Error(redis::RedisError),
    /// A reply that is an error for this request alone (a list at the key).
    Wrong {
        kind: RedisErrorKind,
        detail: String,
    },
}

/// Appends the commands that carry `request` in a pipeline to `packed`
/// (scripts by `EVAL`, see [`LuaScript::eval`](crate::scripts)) and says how
/// to read their replies; `None` for a kind of request this backend does not
/// know.
fn plan<'a>(request: &Request<'a>, packed: &mut Vec<u8>) -> Option<Reading<'a>> {
    let (cmd, reading) = match *request {
        Request::Acquire { claim, ttl, fence } => {
            let token = claim.token().as_bytes();
            if let ([key], false) = (claim.keys(), fence) {
                write_set_nx(packed, key, token, ttl);
                return Some(Reading::SetNx(key));
            }
            let counters = if fence { fence_keys(claim) } else { Vec::new() };
            let mut keys = lock_keys(claim);
            keys.extend(counters.iter().map(String::as_str));
            let ttl = ttl.as_millis().to_string();
            let count = claim.keys().len().to_string();
            let args = [token.as_slice(), ttl.as_bytes(), count.as_bytes()];
            (ACQUIRE.eval(&keys, &args), Reading::Acquire { fence })
        }
        Request::Extend { claim, ttl } => {
            let ttl = ttl.as_millis().to_string();
            let args = [claim.token().as_bytes().as_slice(), ttl.as_bytes()];
            (
                EXTEND.eval(&lock_keys(claim), &args),
                Reading::Held("the extend script"),
            )
        }
        Request::Release { claim } => {
            let args = [claim.token().as_bytes().as_slice()];
            (
                RELEASE.eval(&lock_keys(claim), &args),
                Reading::Held("the release script"),
            )
        }
        Request::RaiseFence { claim, at_least } => {
            let at_least = at_least.min(i64::MAX.unsigned_abs()).to_string();
            let counters = fence_keys(claim);
            let mut keys = lock_keys(claim);
            keys.extend(counters.iter().map(String::as_str));
            let args = [claim.token().as_bytes().as_slice(), at_least.as_bytes()];
            (
                RAISE_FENCE.eval(&keys, &args),
                Reading::Held("the fencing script"),
            )
        }
        _ => return None,
    };
    cmd.write_packed_command(packed);
    Some(reading)
}

/// Reads one request's replies from `replies`. A reply of the wrong shape
/// fails the whole pipeline (and discards the connection): the replies may be
/// out of step.
fn read(reading: &Reading<'_>, replies: &mut impl Iterator<Item = Value>) -> Result<Read, Failure> {
    if let Reading::SetNx(key) = *reading {
        return read_set_nx(key, replies.next(), replies.next());
    }
    let reply = replies.next().unwrap_or(Value::Nil);
    if let Value::ServerError(err) = reply {
        return Ok(Read::Error(err.into()));
    }
    Ok(match *reading {
        Reading::Acquire { fence } => match reply {
            Value::Int(-1) => Read::Done(Response::Acquire(AcquireOutcome::HeldByOther)),
            Value::Int(top) if top >= 0 => Read::Done(Response::Acquire(AcquireOutcome::Granted {
                fence: fence.then(|| u64::try_from(top).unwrap_or(0)),
            })),
            other => return Err(Failure::unexpected("the acquire script", &other)),
        },
        Reading::Held(script) => Read::Done(Response::Held(held(reply, script)?)),
        Reading::SetNx(_) => return Err(Failure::unexpected("SET NX PX", &reply)),
    })
}

/// A script's 1 / 0 answer.
fn held(reply: Value, script: &str) -> Result<bool, Failure> {
    match reply {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        other => Err(Failure::unexpected(script, &other)),
    }
}

fn lock_keys(claim: &Claim) -> Vec<&str> {
    claim.keys().iter().map(String::as_str).collect()
}

fn fence_keys(claim: &Claim) -> Vec<String> {
    claim
        .keys()
        .iter()
        .map(|k| RedisBackend::fence_key(k))
        .collect()
}

impl LockBackend for RedisBackend {
    type Error = RedisNodeError;

    fn node_id(&self) -> &NodeId {
        &self.node
    }

    fn acquire(
        &self,
        claim: &Claim,
        ttl: Ttl,
        fence: bool,
    ) -> Result<AcquireOutcome, RedisNodeError> {
        let token = claim.token().as_bytes();
        self.pool.run(self.deadline(), |session| {
            if let ([key], false) = (claim.keys(), fence) {
                return acquire_one(session, key, token, ttl);
            }
            let counters = if fence { fence_keys(claim) } else { Vec::new() };
            let mut keys = lock_keys(claim);
            keys.extend(counters.iter().map(String::as_str));
            let ttl = ttl.as_millis().to_string();
            let count = claim.keys().len().to_string();
            let reply = ACQUIRE.run(session, &keys, &[token, ttl.as_bytes(), count.as_bytes()])?;
            match reply {
                Value::Int(-1) => Ok(AcquireOutcome::HeldByOther),
                Value::Int(top) if top >= 0 => Ok(AcquireOutcome::Granted {
                    fence: fence.then(|| u64::try_from(top).unwrap_or(0)),
                }),
                other => Err(Failure::unexpected("the acquire script", &other)),
            }
        })
    }

    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, RedisNodeError> {
        let token = claim.token().as_bytes();
        let ttl = ttl.as_millis().to_string();
        self.pool.run(self.deadline(), |session| {
            let reply = EXTEND.run(session, &lock_keys(claim), &[token, ttl.as_bytes()])?;
            held(reply, "the extend script")
        })
    }

    fn release(&self, claim: &Claim) -> Result<bool, RedisNodeError> {
        let token = claim.token().as_bytes();
        self.pool.run(self.deadline(), |session| {
            let reply = RELEASE.run(session, &lock_keys(claim), &[token])?;
            held(reply, "the release script")
        })
    }

    /// Sends the whole batch in one write and reads the replies: many callers
    /// per round trip. Each request still gets its own answer: an error reply
    /// fails that request alone; a connection failure or timeout fails them
    /// all. Scripts go by `EVAL` here, so no `NOSCRIPT` can make a request
    /// run after the ones behind it.
    fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, RedisNodeError>>) {
        if let [request] = requests {
            out.push(request.run_on(self));
            return;
        }
        let mut packed = Vec::new();
        let mut readings = Vec::with_capacity(requests.len());
        for request in requests {
            let Some(reading) = plan(request, &mut packed) else {
                out.extend(requests.iter().map(|r| r.run_on(self)));
                return;
            };
            readings.push(reading);
        }
        let count = readings
            .iter()
            .map(|r| if matches!(r, Reading::SetNx(_)) { 2 } else { 1 })
            .sum();
        let reads: Result<Vec<Read>, RedisNodeError> = self.pool.run(self.deadline(), |session| {
            let replies = session.pipeline(&packed, count)?;
            if replies.len() != count {
                return Err(Failure::unexpected("a pipeline", &Value::Nil));
            }
            let mut replies = replies.into_iter();
            readings
                .iter()
                .map(|reading| read(reading, &mut replies))
                .collect()
        });
        match reads {
            Err(err) => out.extend(requests.iter().map(|_| Err(err.clone()))),
            Ok(reads) => out.extend(reads.into_iter().map(|read| match read {
                Read::Done(response) => Ok(response),
                Read::Error(err) => Err(self.pool.command_error(err)),
                Read::Wrong { kind, detail } => Err(self.pool.reply_error(kind, detail)),
            })),
        }
    }

    /// Redis counters are signed 64-bit: values above `i64::MAX` are capped.
    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, RedisNodeError> {
        let token = claim.token().as_bytes();
        let at_least = at_least.min(i64::MAX.unsigned_abs()).to_string();
        let counters = fence_keys(claim);
        self.pool.run(self.deadline(), |session| {
            let mut keys = lock_keys(claim);
            keys.extend(counters.iter().map(String::as_str));
            let reply = RAISE_FENCE.run(session, &keys, &[token, at_least.as_bytes()])?;
            held(reply, "the fencing script")
        })
    }
}

/// Opens the master at a URL (see [`RedisBackend::builder`]) with the
/// manager's node timeout and the default pool size, without waiting for
/// it, so that [`Redlock::connect`](crate::Redlock) works.
impl Connect for RedisBackend {
    fn connect(address: &str, node_timeout: Duration) -> Result<Self, RedisNodeError> {
        Self::builder(address).node_timeout(node_timeout).build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redlock_core::{Resources, Token};

    fn claim(keys: &[&str]) -> Claim {
        Claim::new(
            Resources::new(keys.iter().copied()).expect("keys"),
            Token::from_bytes([7; 20]),
        )
    }

    #[test]
    fn fence_keys_follow_the_documented_names() {
        let claim = claim(&["b", "a"]);
        assert_eq!(fence_keys(&claim), ["a:fence", "b:fence"]);
        assert_eq!(lock_keys(&claim), ["a", "b"]);
    }

    #[test]
    fn a_down_node_fails_fast_with_a_typed_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let backend = RedisBackend::builder(format!("redis://127.0.0.1:{port}"))
            .node_timeout(Duration::from_millis(500))
            .build()
            .expect("builds without the node");
        let claim = claim(&["k"]);
        let ttl = Ttl::new(Duration::from_secs(1)).expect("ttl");
        let started = Instant::now();
        let err = backend.acquire(&claim, ttl, false).expect_err("down");
        assert_eq!(err.kind(), RedisErrorKind::ConnectionRefused);
        assert_eq!(err.node(), backend.node_id());
        assert!(started.elapsed() < Duration::from_millis(500));
        for result in [
            backend.release(&claim).map(|_| ()),
            backend.extend(&claim, ttl).map(|_| ()),
            backend.raise_fence(&claim, 3).map(|_| ()),
        ] {
            let err = result.expect_err("down");
            assert_eq!(err.kind(), RedisErrorKind::ConnectionRefused);
        }
    }

    #[test]
    fn nothing_secret_is_shown() {
        let url = "redis://user:s3cret@127.0.0.1:1/0";
        let builder = RedisBackend::builder(url);
        let shown = format!("{builder:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        let backend = builder.build().expect("valid");
        let shown = format!("{backend:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(backend.node_id().as_str(), "127.0.0.1:1/0");
        let claim = claim(&["k"]);
        let err = backend
            .release(&claim)
            .expect_err("nothing listens on port 1");
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        let err = RedisBackend::new("redis://user:s3cret@127.0.0.1:1/zero").expect_err("bad db");
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn huge_timeouts_do_not_overflow() {
        let backend = RedisBackend::builder("redis://127.0.0.1:1")
            .node_timeout(Duration::MAX)
            .build()
            .expect("valid");
        assert_eq!(backend.node_timeout(), MAX_NODE_TIMEOUT);
        let _ = backend.deadline();
    }
}
