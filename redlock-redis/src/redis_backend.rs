//! [`RedisBackend`]: one Redis master as a Redlock node.

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::feed::Feed;
use parking_lot::Mutex;
use redlock_core::backend::{
    AcquireOutcome, Claim, Connect, ConnectionSink, Fencing, Inspect, KeyView, LockBackend,
    ReleaseFeed, ReleaseSink, Request, Response, SharedClaims, Started, Watcher,
};
use redlock_core::{NodeId, Ttl};

use crate::builder::Target;
use crate::ops::Read;
use crate::ordered::{Begun, Ordered, Results};
use crate::plan::Planned;
use crate::pool::NodePool;
use crate::{RedisBackendBuilder, RedisErrorKind, RedisNodeError};

/// The suffixes of a resource's helper keys, and the one character no
/// resource name may have, from [`redlock_core::keys`]: the counter of
/// `invoice:42` is `invoice:42` + [`FENCE_SUFFIX`], U+001F then `fence`.
///
/// # Examples
///
/// ```
/// assert_eq!(format!("doc:7{}", redlock_redis::READERS_SUFFIX), "doc:7\u{1f}readers");
/// assert_eq!(format!("doc:7{}", redlock_redis::FORMAT_SUFFIX), "doc:7\u{1f}format");
/// ```
pub use redlock_core::keys::{
    FENCE_SUFFIX, FORMAT_SUFFIX, READERS_SUFFIX, WAIT_SUFFIX, WATCH_SUFFIX,
};

/// Node timeouts above this are treated as this.
const MAX_NODE_TIMEOUT: Duration = Duration::from_secs(3600);

/// One Redis master, reached through its own small r2d2 connection pool.
///
/// # Commands and keys
///
/// A lock on resource `R` is the Redis string key `R` (no prefix is added)
/// holding the lock's 20 random token bytes (then its manager's identity,
/// when it has one: [`Claim::value`]), with a millisecond TTL. Its
/// helper keys sit beside it: the fencing counter `R␟fence` (see
/// [`FENCE_SUFFIX`]; counters have no TTL and are never deleted), the
/// waiting line `R␟waiting` of managers waiting for it (see
/// [`WAIT_SUFFIX`]), the readers of a [`RwLock`](crate::RwLock) `R␟readers`
/// (see [`READERS_SUFFIX`]; while it has readers, `R` holds the marker
/// `redlock:readers`, never a token) and the format key `R␟format` (see
/// [`FORMAT_SUFFIX`]; a lock key whose format key says another wire format
/// is refused with [`RedisErrorKind::WireFormat`], having written nothing).
///
/// Acquiring one resource without fencing or a waiting line is
/// `SET R token NX PX ttl GET`, one command (a key of another type
/// answers [`RedisErrorKind::WrongType`]); a server older than Redis 7.0
/// gets `SET R token NX PX ttl` and `TYPE R` instead. Everything else is
/// one Lua script per operation, all keys or none: acquire (with fencing,
/// incrementing the counters), acquire while waiting in line, release
/// (compare-and-delete), extend (compare-and-`PEXPIRE`), raising the
/// fencing counters, and the same four for a reader. Each operation, with
/// its script, its keys and arguments and how its reply is read, is one
/// file in `redlock-redis/src/ops/`, next to the command of the node model
/// ([`redlock_core::model::Command`]) that it must equal.
///
/// Scripts are hashed once per process and sent by `EVALSHA`. Each new
/// connection first loads them (`SCRIPT LOAD`, in the round trip that also
/// authenticates and selects the database), which also turns away a
/// Sentinel port with [`RedisErrorKind::UnknownCommand`]; after
/// `NOSCRIPT` (a `SCRIPT FLUSH` mid-run) the same call resends the script
/// with `EVAL` (for a batch, see [`LockBackend::run_batch`] on what that
/// does to the order). Do not name resources so that one is another's
/// counter, mark or reader set (`R` and `R␟fence`, `R␟waiting` or
/// `R␟readers`). An ACL user for the lock needs `SET`, `GET`, `DEL`,
/// `PEXPIRE`, `INCR`, `TYPE`, `EVAL` and `EVALSHA` on those keys (and
/// `SCRIPT`, optionally), for read-write locks also `TIME`, `ZADD`,
/// `ZREM`, `ZREMRANGEBYSCORE`, `ZRANGE`, `ZSCORE` and `ZCARD`; for
/// waiters to be woken when a key is released, also `PUBLISH` and `SUBSCRIBE` on the
/// channels [`RELEASE_CHANNEL`](crate::RELEASE_CHANNEL)`:*` (the release
/// script publishes a released key that another manager waits for on that
/// manager's channel; see
/// [`Builder::wake_ups`](redlock_core::Builder::wake_ups)).
///
/// # Timeouts
///
/// Each call, from waiting for a connection to reading the last reply, is
/// bounded by the node timeout, however the server sends: every socket
/// read and write waits only what is left of it, so a reply trickled a byte
/// at a time or push data streamed without end ends the call at its
/// deadline like silence does. Calls to one node take turns (the manager
/// makes one at a time anyway).
///
/// A node runs this backend's requests in the order they were sent, also
/// those whose answer never came. Closing a connection would not cancel
/// what was written on it (the server still runs the bytes it received, a
/// frozen one when it resumes), and a request sent on another connection
/// could run first: an acquire after its own release, leaving a key nobody
/// releases for its whole TTL. So after a timeout:
///
/// - the connection is kept, and a compare-and-delete release (by `EVAL`,
///   which a `SCRIPT FLUSH` cannot turn into a no-op) is written on it
///   behind every acquire of that call whose reply was not read: whenever
///   the node runs the acquire, its release runs next;
/// - the next calls go on the same connection: each first reads (and drops)
///   the replies still owed, within its node timeout, then sends its own
///   requests as usual;
/// - while the node has not answered (a frozen or very slow node), nothing
///   piles up: acquires, extends and fencing raises fail at once without
///   being sent, with [`RedisErrorKind::Behind`]; releases are sent (once
///   each while unanswered; at most 1024 of them or 1 MiB behind one
///   connection, beyond which they fail unsent and the manager retries
///   them), except the release of a claim whose acquire was refused this
///   way, which has nothing to delete and is answered "not held" (the
///   manager never acquires a claim twice). Each such call costs at most
///   one node timeout, plus at most 2 ms to hand releases to the socket.
///
/// When the server closed or reset a connection, nothing more on it will
/// run: it is dropped, and when the server closed one, the idle ones are
/// replaced too. While the node cannot be reached, the pool retries in the
/// background (every `max(node timeout, 100 ms)`) and calls fail at once
/// with the latest connection error.
///
/// # Bounds on what a server can cost
///
/// - Opening a connection (in the pool's background, or for the release
///   feed): at most the node timeout for the name lookup, the TCP connect
///   (each resolved address in turn, with the time left) and the TLS
///   handshake together, then at most another for the handshake (`AUTH`,
///   `SELECT`, `CLIENT SETINFO`, `SCRIPT LOAD`). A name lookup and a
///   unix-socket connect, which the standard library cannot bound, run on
///   a thread of their own, one at a time per backend.
/// - A reply, with any push data before it, may take 1 MiB. A declared
///   length that would take it past that, a negative length other than the
///   RESP2 nulls (`$-1`, `*-1`), nesting deeper than 16 or a byte that
///   begins no RESP type fails the call at once with
///   [`RedisErrorKind::UnexpectedReply`] and drops the connection. A
///   connection's read buffer is 16 KiB, and grows to the budget at most
///   while one reply needs it.
/// - When a call's deadline passes while the server is sending (part of a
///   reply, or push data nobody asked for), the call fails with
///   [`RedisErrorKind::Timeout`] and the connection is dropped, not kept
///   owing replies: the server is not frozen, and a reply begins only once
///   its request ran. Releases that were owed on it failed with
///   [`RedisErrorKind::Behind`], so the manager sends them again on the
///   next connection.
/// - The release feed's subscriber thread reads 250 ms at a time (it
///   notices within that that its manager is gone), and opens its
///   subscription again when a message that began is not whole within the
///   node timeout.
///
/// [`check_deployment`](crate::check_deployment),
/// [`key_status`](crate::key_status) and the same-server check of
/// [`Redlock::connect`](crate::Redlock) have bounds of their own, in their
/// docs. docs/design.md, "Bounds on what a server can cost", has the
/// reasons.
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
    /// The connection that owes replies, if any: calls take turns on it.
    line: Mutex<Ordered>,
    /// The server refused `SET ... NX ... GET` (older than Redis 7.0).
    old_set: AtomicBool,
    /// Where it connects, for [`Connect::same_node`]'s own connection.
    target: Target,
    /// The manager's release notifications, once its feed started: a
    /// release that found the key waited for says so there.
    sink: Arc<OnceLock<ReleaseSink>>,
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
    /// use redlock_redis::RedisBackend;
    /// use redlock_redis::backend::LockBackend;
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
    /// use redlock_redis::RedisBackend;
    /// use redlock_redis::backend::LockBackend;
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
    /// assert_eq!(redlock_redis::RedisBackend::fence_key("invoice:42"), "invoice:42\u{1f}fence");
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
        target: Target,
    ) -> Self {
        RedisBackend {
            target,
            node,
            timeout,
            pool_size,
            tls,
            pool,
            line: Mutex::new(Ordered::default()),
            old_set: AtomicBool::new(false),
            sink: Arc::default(),
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

impl RedisBackend {
    /// Runs `planned` within one node timeout, in order behind whatever the
    /// node still owes (see [`crate::ordered`]): one result per request. Calls
    /// take turns; one that cannot have its turn within the node timeout
    /// fails with [`RedisErrorKind::Timeout`].
    fn run_planned(&self, planned: &[Planned<'_>]) -> Results {
        let deadline = self.deadline();
        match self.line.try_lock_until(deadline) {
            Some(mut line) => line.run(&self.pool, planned, deadline, &self.old_set),
            None => planned.iter().map(|_| Err(self.pool.busy())).collect(),
        }
    }

    /// Whether the node owes replies on its connection.
    #[cfg(test)]
    pub(crate) fn owes(&self) -> bool {
        self.line.lock().owes()
    }

    /// Runs one request: a script by `EVALSHA`, and by `EVAL` after `NOSCRIPT`.
    fn run_one(&self, planned: Planned<'_>) -> Result<Response, RedisNodeError> {
        match self.run_planned(&[planned]).pop() {
            Some(read) => self.answer(read?, planned.claim()),
            None => Err(self.mismatch()),
        }
    }

    /// The answer to one request on `claim`, from its replies.
    /// [`RedisBackend::answer`] for each of `reads`, into `out`.
    fn answer_all<'c>(
        &self,
        reads: Results,
        claims: impl IntoIterator<Item = &'c Claim>,
        out: &mut Vec<Result<Response, RedisNodeError>>,
    ) {
        out.extend(
            reads
                .into_iter()
                .zip(claims)
                .map(|(read, claim)| read.and_then(|read| self.answer(read, claim))),
        );
    }

    fn answer(&self, read: Read, claim: &Claim) -> Result<Response, RedisNodeError> {
        match read {
            Read::Done(response) => Ok(response),
            Read::Released { held, waited } => {
                if waited {
                    if let Some(sink) = self.sink.get() {
                        for key in claim.keys() {
                            sink.waited(key);
                        }
                    }
                }
                Ok(Response::Held(held))
            }
            Read::Error(err) => Err(self.pool.command_error(err)),
            Read::Wrong { kind, detail } => Err(self.pool.reply_error(kind, detail)),
        }
    }

    /// An answer of the wrong kind for its request (which cannot happen).
    fn mismatch(&self) -> RedisNodeError {
        let detail = "the answer does not match the request".to_owned();
        self.pool
            .reply_error(RedisErrorKind::UnexpectedReply, detail)
    }

    fn inspect_now(&self, key: &str, watcher: Option<Watcher>) -> Result<KeyView, RedisNodeError> {
        let deadline = self.deadline();
        let mut conn = match self.pool.idle() {
            Some(conn) => conn,
            None => {
                // With a pool of one, the connection may be the line's,
                // kept owing the answers of decided rounds.
                let _ = self.catch_up(deadline);
                self.pool.checkout(deadline)?
            }
        };
        let command = redlock_core::model::Command::Inspect { key, watcher };
        let result = {
            let mut session = self.pool.session(&mut conn, deadline);
            let mut ask = |via| {
                session.send(|packed| crate::ops::write(packed, via, &command))?;
                session.read()
            };
            match ask(crate::ops::Via::Hash) {
                Ok(redis::Value::ServerError(err))
                    if crate::ops::is_noscript(&err.clone().into()) =>
                {
                    ask(crate::ops::Via::Body)
                }
                other => other,
            }
        };
        let reply = match result {
            Ok(redis::Value::ServerError(err)) => return Err(self.pool.command_error(err.into())),
            Ok(reply) => reply,
            Err(failure) => {
                // It may still owe the reply: never used again.
                let err = self.pool.failed(&mut conn, failure);
                conn.set_broken();
                return Err(err);
            }
        };
        crate::ops::inspect::read(reply).map_err(|failure| {
            let err = self.pool.failed(&mut conn, failure);
            conn.set_broken();
            err
        })
    }

    fn held_answer(&self, planned: Planned<'_>) -> Result<bool, RedisNodeError> {
        match self.run_one(planned)? {
            Response::Held(held) => Ok(held),
            Response::Acquire(_) => Err(self.mismatch()),
        }
    }
}

/// Fencing counters are keys beside each lock; readers are kept in a sorted
/// set next to the lock key (see "Commands and keys" on [`RedisBackend`]).
impl Fencing for RedisBackend {}

impl SharedClaims for RedisBackend {}

/// The inspect script (`ops/inspect.rs`), on a pooled connection of its
/// own: never behind the requests the node still owes.
impl Inspect for RedisBackend {}

impl LockBackend for RedisBackend {
    type Error = RedisNodeError;

    fn attach(&self, sink: ConnectionSink) {
        self.pool.attach(sink);
    }

    /// Pub/Sub on the manager's own channel,
    /// [`RELEASE_CHANNEL`](crate::RELEASE_CHANNEL)`:<its id>`: one
    /// subscriber connection, on a thread of its own, opened when a caller
    /// of the manager first waits.
    fn release_feed(&self) -> Option<Box<dyn ReleaseFeed>> {
        Some(Box::new(Feed {
            node: self.node.clone(),
            endpoint: self.target.endpoint.clone(),
            timeout: self.timeout,
            reporter: self.pool.reporter(),
            sink: Arc::clone(&self.sink),
        }))
    }

    fn node_id(&self) -> &NodeId {
        &self.node
    }

    /// Runs the inspect script on an idle pooled connection (by `EVALSHA`,
    /// then `EVAL` after `NOSCRIPT`), all within the node timeout. With a
    /// pool of one connection (see
    /// [`pool_size`](crate::RedisBackendBuilder::pool_size)) it waits for
    /// the connection the manager's requests use.
    fn inspect(
        &self,
        key: &str,
        watcher: Option<Watcher>,
    ) -> Option<Result<KeyView, RedisNodeError>> {
        Some(self.inspect_now(key, watcher))
    }

    fn acquire(
        &self,
        claim: &Claim,
        ttl: Ttl,
        fence: bool,
    ) -> Result<AcquireOutcome, RedisNodeError> {
        match self.run_one(Planned::acquire(claim, ttl, fence))? {
            Response::Acquire(outcome) => Ok(outcome),
            Response::Held(_) => Err(self.mismatch()),
        }
    }

    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, RedisNodeError> {
        self.held_answer(Planned::extend(claim, ttl))
    }

    fn release(&self, claim: &Claim) -> Result<bool, RedisNodeError> {
        self.held_answer(Planned::release(claim))
    }

    /// Sends the whole batch in one write and reads the replies: many callers
    /// per round trip. Each request still gets its own answer: an error reply
    /// fails that request alone; a connection failure or timeout (of either
    /// write below) fails them all.
    ///
    /// Scripts go by `EVALSHA` (by `EVAL`, the server would hash the whole
    /// body of every call). When the server has lost its scripts
    /// (`SCRIPT FLUSH`, a restart without the connection noticing), those
    /// requests are answered `NOSCRIPT` and did nothing; exactly those are
    /// sent again by `EVAL`, in batch order, in a second write on the same
    /// connection and within the same node timeout, and answered from that.
    ///
    /// Only then does the node run requests out of batch order: the retried
    /// ones after every request of the first write, including those that
    /// followed them (a single-key `SET NX` acquire, or a script the server
    /// had again by then). This is safe because each request is safe on its
    /// own, whatever ran before it: an acquire only sets keys that are free
    /// (`SET NX`, or a script that checks every key first), a release
    /// deletes and an extend re-`PEXPIRE`s only keys that hold the request's
    /// own token (compare-and-delete, compare-and-`PEXPIRE`), and a fencing
    /// raise acts only while they do. Tokens are unique per lock (the
    /// manager never acquires a claim again once it released it), so a
    /// release retried after an acquire that followed it can only make that
    /// acquire be refused (the key was still held), never let two holders
    /// in; an acquire retried late can only be refused where a later one
    /// won. Every answer says what the node did.
    fn run_batch(&self, requests: &[Request<'_>], out: &mut Vec<Result<Response, RedisNodeError>>) {
        if let [request] = requests {
            out.push(request.run_on(self));
            return;
        }
        let Some(planned) = Planned::all(requests) else {
            out.extend(requests.iter().map(|r| r.run_on(self)));
            return;
        };
        self.answer_all(
            self.run_planned(&planned),
            planned.iter().map(Planned::claim),
            out,
        );
    }

    /// Writes the requests, in one write, on an idle connection of the
    /// node's line when nothing else is under way on it and it owes the
    /// node nothing; the line stays taken (the node's worker waits for it)
    /// until the replies are read, so the node still runs this backend's
    /// requests in the order they were sent. Replies that do not come in
    /// time leave the connection owing them, with a release behind each
    /// acquire, as for any call (see "Order survives failures" on
    /// [`LockBackend`]); a batch whose first write broke gets the
    /// `NOSCRIPT` and Redis 6.2 fallbacks [`LockBackend::run_batch`]
    /// describes.
    fn start<'a>(
        &'a self,
        requests: &[Request<'a>],
    ) -> Option<Box<dyn Started<RedisNodeError> + 'a>> {
        let planned = Planned::all(requests)?;
        let line = self.line.try_lock()?;
        let begun = Ordered::begin(line, &self.pool, planned, self.deadline(), &self.old_set)?;
        Some(Box::new(Pending {
            backend: self,
            begun,
        }))
    }

    fn starts_batches(&self) -> bool {
        true
    }

    /// Reads what the node's connection still owes for the own rounds of
    /// lone callers, decided without those answers
    /// ([`Started::detach`](redlock_core::backend::Started::detach)).
    fn catch_up(&self, deadline: Instant) -> Result<(), RedisNodeError> {
        match self.line.try_lock_until(deadline) {
            Some(mut line) => line.catch_up(&self.pool, deadline, &self.old_set),
            None => Err(self.pool.error_of(crate::session::Failure::Deadline)),
        }
    }

    /// Redis counters are signed 64-bit: values above `i64::MAX` are capped.
    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, RedisNodeError> {
        self.held_answer(Planned::raise_fence(claim, at_least))
    }
}

/// A request [`RedisBackend`] started: [`LockBackend::start`].
struct Pending<'a> {
    backend: &'a RedisBackend,
    begun: Begun<'a>,
}

impl Started<RedisNodeError> for Pending<'_> {
    #[cfg(unix)]
    fn readiness(&self) -> redlock_core::backend::Readiness<'_> {
        self.begun.readiness()
    }

    fn wait(&mut self, until: Instant) -> bool {
        self.begun.wait(until)
    }

    fn finish(self: Box<Self>, deadline: Instant, out: &mut Vec<Result<Response, RedisNodeError>>) {
        let Pending { backend, begun } = *self;
        let claims = claims_of(begun.planned());
        backend.answer_all(begun.finish(deadline), claims.iter().copied(), out);
    }

    fn detach(
        self: Box<Self>,
        deadline: Instant,
        out: &mut Vec<Result<Response, RedisNodeError>>,
    ) -> bool {
        let Pending { backend, begun } = *self;
        let claims = claims_of(begun.planned());
        match begun.detach(deadline) {
            Some(reads) => {
                backend.answer_all(reads, claims.iter().copied(), out);
                false
            }
            None => true,
        }
    }
}

/// The claims of a started batch's requests, in order, kept while the
/// batch is read (a lone caller's one request inline, as
/// [`Plans`](crate::plan::Plans)).
type Claims<'a> = smallvec::SmallVec<[&'a Claim; 1]>;

/// The claims of `planned`'s requests, in order.
fn claims_of<'a>(planned: &[Planned<'a>]) -> Claims<'a> {
    planned.iter().map(Planned::claim).collect()
}

/// Opens the master at a URL (see [`RedisBackend::builder`]) with the
/// manager's node timeout and the default pool size, without waiting for
/// it, so that [`Redlock::connect`](crate::Redlock) works.
impl Connect for RedisBackend {
    fn connect(address: &str, node_timeout: Duration) -> Result<Self, RedisNodeError> {
        Self::builder(address).node_timeout(node_timeout).build()
    }

    /// Asks every master for its `run_id` (`INFO server`) on a connection
    /// of its own, all at once, within four of each one's node timeouts
    /// (connecting, the handshake, `PING`, `INFO`), whatever it sends: two
    /// backends with different node ids and the same `run_id` are one
    /// server under two host names or two databases. A master that is
    /// down, or whose ACL user may not run `INFO`, is not checked.
    fn same_node(backends: &[Self]) -> Option<(usize, usize)> {
        let targets: Vec<&Target> = backends.iter().map(|b| &b.target).collect();
        crate::check::same_server(&targets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::claim;
    use crate::pool::tests::read_words;
    use std::sync::Arc;

    /// A fake Redis 6.2: refuses `SET` with both `NX` and `GET` as a syntax
    /// error, sets keys otherwise. Returns its port and every command it saw.
    /// Its keys are shared by all its connections, as a server's are: the
    /// backend may use any of its pooled connections.
    fn old_server() -> (u16, Arc<parking_lot::Mutex<Vec<String>>>) {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let keys = Arc::new(parking_lot::Mutex::new(std::collections::HashSet::new()));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (log, keys) = (Arc::clone(&log), Arc::clone(&keys));
                std::thread::spawn(move || {
                    let mut reader = std::io::BufReader::new(stream.try_clone().expect("clone"));
                    while let Some(words) = read_words(&mut reader) {
                        log.lock().push(words.join(" ").to_uppercase());
                        let reply = match words[0].to_uppercase().as_str() {
                            "SET" if words.len() == 7 => "-ERR syntax error\r\n".to_owned(),
                            "SET" if keys.lock().insert(words[1].clone()) => "+OK\r\n".to_owned(),
                            "SET" => "$-1\r\n".to_owned(),
                            "TYPE" => "+string\r\n".to_owned(),
                            "SCRIPT" => "-NOPERM not for you\r\n".to_owned(),
                            _ => "+OK\r\n".to_owned(),
                        };
                        if stream.write_all(reply.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (port, seen)
    }

    #[test]
    fn a_server_older_than_7_gets_set_nx_and_type_instead_of_set_get() {
        let (port, seen) = old_server();
        let backend = RedisBackend::builder(format!("redis://127.0.0.1:{port}"))
            .node_timeout(Duration::from_secs(5))
            .build()
            .expect("backend");
        let ttl = Ttl::new(Duration::from_secs(5)).expect("ttl");
        let (a, b) = (claim(&["a"]), claim(&["b"]));
        let granted = AcquireOutcome::Granted { fence: None };
        assert_eq!(backend.acquire(&a, ttl, false).expect("answered"), granted);
        // From then on the old form at once, in batches too.
        let batch = [
            Request::Acquire {
                claim: &b,
                ttl,
                fence: false,
            },
            Request::Acquire {
                claim: &a,
                ttl,
                fence: false,
            },
        ];
        let mut out = Vec::new();
        backend.run_batch(&batch, &mut out);
        let outcomes: Vec<_> = out.into_iter().map(|r| r.expect("answered")).collect();
        assert_eq!(
            outcomes,
            [
                Response::Acquire(granted),
                Response::Acquire(AcquireOutcome::HeldByOther)
            ]
        );
        let sets: Vec<String> = seen
            .lock()
            .iter()
            .filter(|c| c.starts_with("SET") || c.starts_with("TYPE"))
            .map(|c| {
                c.split(' ')
                    .map(|w| if w.len() == 20 { "T" } else { w })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(
            sets,
            [
                "SET A T NX PX 5000 GET",
                "SET A T NX PX 5000",
                "TYPE A",
                "SET B T NX PX 5000",
                "TYPE B",
                "SET A T NX PX 5000",
                "TYPE A",
            ]
        );
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
