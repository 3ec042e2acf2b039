//! The ordered line to one node: every request a backend sends its node
//! runs there in the order it was sent, also when its answer never came.
//!
//! Closing a connection does not cancel what was written on it: the server
//! still runs the bytes in its receive buffer, possibly long after (a frozen
//! node resumed by `SIGCONT`, a request held up in the network). A request
//! sent on another connection meanwhile may run first. So a connection that
//! timed out with replies due is never dropped while the server may still
//! run what it carries: it *owes* replies, and every later call goes on it,
//! behind them.
//!
//! - After a call times out, the connection is kept, and a compare-and-delete
//!   release (by `EVAL`, which a `SCRIPT FLUSH` cannot turn into a no-op;
//!   for a reader, the removal of its token from the reader sets) is
//!   written on it behind every acquire whose reply was not read. Whenever
//!   the node runs that acquire, its release runs right after.
//! - A later call first reads (and discards) the owed replies, within its
//!   node timeout. Once they are all in, the connection is in step again
//!   and the call proceeds on it as usual.
//! - While replies are still owed, nothing is piled on the connection:
//!   acquires, extends and fencing raises fail at once, unsent
//!   ([`RedisErrorKind::Behind`](crate::RedisErrorKind::Behind)); releases
//!   are written (a release must never be lost, and compare-and-delete
//!   makes a repeat harmless), but not one whose earlier copy is still owed,
//!   nor one of a claim whose acquire was refused here unsent (answered "not
//!   held"), and not beyond a bound ([`MAX_OWED_RELEASES`],
//!   [`MAX_OWED_BYTES`]).
//! - When the server closed or reset the connection, nothing more on it
//!   will run: it is dropped, and the next call connects again.
//! - When a call's deadline passes while the server is sending (part of a
//!   reply, or push data), or a reply breaks the protocol or its budget,
//!   the connection is dropped too: such a server is not frozen (a reply
//!   begins only once its request ran), and one that never finishes would
//!   otherwise keep the connection owing forever. The releases owed on it
//!   were answered as failures, so the manager sends them again on the
//!   next connection.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;
use redis::Value;

use redlock_core::backend::{Claim, Response, Token};

use crate::ops::{is_noscript, write_release, Read, Via};
use crate::plan::{receive, replies_to, send, write, Cut, Form, Planned, Plans, Reads, Replies};
use crate::pool::{NodePool, Pooled};
use crate::session::{Conn, Failure};
use crate::RedisNodeError;

/// One result per request of a batch (inline for one: see [`Plans`]).
pub(crate) type Results = smallvec::SmallVec<[Result<Read, RedisNodeError>; 1]>;

/// The most releases written behind unanswered requests, and still unanswered
/// themselves, on one connection.
pub(crate) const MAX_OWED_RELEASES: usize = 1024;

/// The most bytes written on a connection while it owes replies: beyond, a
/// release fails unsent (the manager retries it) rather than filling the
/// socket buffers of a node that reads nothing.
pub(crate) const MAX_OWED_BYTES: usize = 1024 * 1024;

/// The most claims remembered as refused unsent while the node is behind.
const MAX_REFUSED: usize = 4096;

/// How long a write behind unanswered requests may take when the call's
/// node timeout is spent already. A socket with room takes the bytes at
/// once; only a node that stopped reading long ago (and so is behind by
/// many requests) fills its buffers.
const WRITE_BEHIND: Duration = Duration::from_millis(2);

/// What one node's connection still owes, and what the backend refused
/// while it does. Calls hold it one at a time.
#[derive(Default)]
pub(crate) struct Ordered {
    owing: Option<Owing>,
    /// Tokens of acquires refused unsent while the node was behind: the
    /// manager never acquires a claim twice, so their releases have
    /// nothing to delete here. Forgotten once the node caught up.
    refused: HashSet<Token>,
    /// Releases left unread ([`Begun::detach`]) on a connection that broke
    /// before their answers came: nobody else knows of them, so they are
    /// sent again after the next call (at most [`MAX_OWED_RELEASES`]).
    lost: Vec<Claim>,
}

/// A connection with replies due.
struct Owing {
    conn: Pooled,
    dues: Dues,
    /// Bytes written since the connection began to owe.
    written: usize,
    /// Whether it owes only the answers of decided rounds that nobody read
    /// ([`Begun::detach`]): a node not known to be slow, so a caller may
    /// send its next request behind them.
    detached: bool,
    /// How many writes ([`Ordered::begin`]) were left unread on it, one
    /// behind the other.
    left: usize,
}

/// Replies due on an owing connection, in order.
enum Due {
    /// This many replies nobody waits for any more.
    Stale(usize),
    /// The reply to a release written behind.
    Release(Token),
    /// The reply to a release whose round was decided without it
    /// ([`Begun::detach`]): sent again by `EVAL` if the server had lost the
    /// script, since nobody else will.
    Left(Claim),
}

/// The replies an owing connection is due, in order.
#[derive(Default)]
struct Dues {
    due: VecDeque<Due>,
    /// The releases among `due`, by token.
    releases: HashSet<Token>,
}

impl Dues {
    /// How many replies are due.
    fn count(&self) -> usize {
        self.due
            .iter()
            .map(|d| match d {
                Due::Stale(n) => *n,
                Due::Release(_) | Due::Left(_) => 1,
            })
            .sum()
    }

    /// Whether nothing is due.
    fn is_empty(&self) -> bool {
        self.due.is_empty()
    }

    /// The releases left unread among the dues, taken out: the connection
    /// broke, and they may not have run.
    fn take_left(&mut self) -> impl Iterator<Item = Claim> + '_ {
        self.releases.clear();
        self.due.drain(..).filter_map(|d| match d {
            Due::Left(claim) => Some(claim),
            _ => None,
        })
    }

    /// Takes `reply`, the next one due; a release left by its round that
    /// the server did not run for want of its script, to send again.
    fn took(&mut self, reply: &Value) -> Option<Claim> {
        match self.due.front_mut()? {
            Due::Stale(n) if *n > 1 => {
                *n -= 1;
                None
            }
            Due::Stale(_) => {
                self.due.pop_front();
                None
            }
            Due::Release(token) => {
                self.releases.remove(token);
                self.due.pop_front();
                None
            }
            Due::Left(claim) => {
                self.releases.remove(claim.token());
                let again =
                    matches!(reply, Value::ServerError(err) if is_noscript(&err.clone().into()));
                match self.due.pop_front() {
                    Some(Due::Left(claim)) if again => Some(claim),
                    _ => None,
                }
            }
        }
    }
}

impl Owing {
    /// Reads what is due, within the session's deadline.
    fn catch_up(&mut self, pool: &NodePool, deadline: Instant) -> Result<(), Failure> {
        pool.session(&mut self.conn, deadline).flush()?;
        while !self.dues.is_empty() {
            let reply = pool.session(&mut self.conn, deadline).read()?;
            if let Some(claim) = self.dues.took(&reply) {
                self.release_behind(pool, deadline, &[&claim])?;
            }
        }
        Ok(())
    }

    /// Writes a release of each of `claims` behind what is owed, even if
    /// `deadline` passed (see [`WRITE_BEHIND`]). They are owed from then
    /// on: bytes a write could not send yet go out before anything else.
    fn release_behind(
        &mut self,
        pool: &NodePool,
        deadline: Instant,
        claims: &[&Claim],
    ) -> Result<(), Failure> {
        if claims.is_empty() {
            return Ok(());
        }
        let mut session = pool.session(&mut self.conn, deadline);
        let mut size = 0;
        let sent = session.send_anyway(WRITE_BEHIND, |packed| {
            for claim in claims {
                // Cleanups behind acquires whose answers never came:
                // their callers keep their place in line.
                write_release(packed, claim, Via::Body, false);
            }
            size = packed.len();
        });
        match sent {
            Err(failure) if failure.breaks_connection() => return Err(failure),
            // Nothing was written: nothing is owed for them (the manager
            // keeps the releases and sends them again).
            Err(Failure::Deadline) => return Ok(()),
            _ => {}
        }
        self.written += size;
        for claim in claims {
            self.dues.releases.insert(claim.token().clone());
            self.dues.due.push_back(Due::Release(claim.token().clone()));
        }
        Ok(())
    }

    /// Whether another release may be written behind.
    fn has_room(&self, more: usize) -> bool {
        self.dues.releases.len() + more < MAX_OWED_RELEASES && self.written < MAX_OWED_BYTES
    }
}

impl Ordered {
    /// Runs `planned` within `deadline`, in order behind anything owed: one
    /// result per request.
    ///
    /// `old_set` records that the server refused `SET ... NX ... GET`
    /// (older than Redis 7.0); see [`exchange`].
    pub(crate) fn run(
        &mut self,
        pool: &NodePool,
        planned: &[Planned<'_>],
        deadline: Instant,
        old_set: &AtomicBool,
    ) -> Results {
        let conn = match self.owing.take() {
            None => pool.checkout(deadline),
            Some(mut owing) => match owing.catch_up(pool, deadline) {
                Ok(()) => {
                    self.refused.clear();
                    Ok(owing.conn)
                }
                Err(failure) if failure.breaks_connection() => {
                    // The server closed it (nothing more on it will run),
                    // stalled on it, or broke the protocol.
                    let _ = pool.failed(&mut owing.conn, failure);
                    self.keep_lost(owing.dues.take_left());
                    drop(owing);
                    pool.checkout(deadline)
                }
                Err(_) => {
                    owing.detached = false;
                    return self.behind(pool, owing, planned, deadline);
                }
            },
        };
        let mut conn = match conn {
            Ok(conn) => conn,
            Err(err) => return planned.iter().map(|_| Err(err.clone())).collect(),
        };
        let form = form(old_set, &conn);
        let sent = write(&mut pool.session(&mut conn, deadline), planned, form);
        let exchanged = exchange(
            pool,
            &mut conn,
            planned,
            deadline,
            old_set,
            form,
            (sent, Replies::new()),
        );
        let out = self.settle(pool, conn, planned, deadline, exchanged);
        self.send_lost(pool, deadline, old_set);
        out
    }

    /// Keeps `claims` (releases that may not have run) to send again.
    fn keep_lost(&mut self, claims: impl Iterator<Item = Claim>) {
        let room = MAX_OWED_RELEASES.saturating_sub(self.lost.len());
        self.lost.extend(claims.take(room));
    }

    /// Sends the lost releases again, by `deadline`; whether none is left.
    fn send_lost(&mut self, pool: &NodePool, deadline: Instant, old_set: &AtomicBool) -> bool {
        if self.lost.is_empty() {
            return true;
        }
        let lost = std::mem::take(&mut self.lost);
        let releases: Vec<Planned<'_>> = lost.iter().map(Planned::release).collect();
        let results = self.run(pool, &releases, deadline, old_set);
        let failed = lost
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_err())
            .map(|(c, _)| c.clone());
        let failed: Vec<Claim> = failed.collect();
        self.keep_lost(failed.into_iter());
        self.lost.is_empty()
    }

    /// Sends `planned` (one request or several, in one write) on an idle
    /// connection without waiting, when the connection owes nothing and
    /// the pool has one idle: see [`Begun::finish`]. `None` when it would
    /// have to wait (for the line or a connection) or nothing could be
    /// written.
    pub(crate) fn begin<'a>(
        line: MutexGuard<'a, Ordered>,
        pool: &'a NodePool,
        planned: Plans<'a>,
        deadline: Instant,
        old_set: &'a AtomicBool,
    ) -> Option<Begun<'a>> {
        let mut line = line;
        if !line.lost.is_empty() {
            // Its worker sends them first.
            return None;
        }
        let (mut conn, behind) = match line.owing.take() {
            None => (pool.idle()?, None),
            // Behind one write left unread at most (one request, or one
            // poller's batch): a node that did not answer two is slow, and
            // its worker catches up on it.
            Some(owing) if owing.detached && owing.left <= 1 => {
                (owing.conn, Some((owing.dues, owing.left)))
            }
            Some(owing) => {
                line.owing = Some(owing);
                return None;
            }
        };
        let form = form(old_set, &conn);
        let sent = write(&mut pool.session(&mut conn, deadline), &planned, form);
        if matches!(sent, Err(Failure::Deadline)) {
            // Nothing was written.
            if let Some((dues, left)) = behind {
                line.owing = Some(Owing {
                    conn,
                    dues,
                    written: 0,
                    detached: true,
                    left,
                });
            }
            return None;
        }
        let (behind, left) = behind.unwrap_or_default();
        // Room for every reply at once (they are read one at a time).
        let replies = Replies::with_capacity(replies_to(&planned, form));
        Some(Begun {
            line,
            behind,
            left,
            again: Vec::new(),
            conn: Some(conn),
            planned,
            form,
            sent,
            replies,
            deadline,
            old_set,
            pool,
        })
    }

    /// What becomes of `conn` after an exchange of `planned` that ended
    /// `exchanged`: the results, and, when the node may still run requests
    /// whose replies were not read, the connection kept as owing them with
    /// a release behind each unanswered acquire.
    fn settle(
        &mut self,
        pool: &NodePool,
        mut conn: Pooled,
        planned: &[Planned<'_>],
        deadline: Instant,
        exchanged: Result<Reads, Cut>,
    ) -> Results {
        let cut = match exchanged {
            Ok(reads) => return reads.into_iter().map(Ok).collect(),
            Err(cut) => cut,
        };
        let timed_out = cut.failure.timed_out();
        let err = pool.failed(&mut conn, cut.failure);
        if timed_out && cut.owed > 0 {
            let mut owing = Owing {
                conn,
                dues: Dues {
                    due: VecDeque::from([Due::Stale(cut.owed)]),
                    releases: HashSet::new(),
                },
                written: 0,
                detached: false,
                left: 0,
            };
            let acquires: Vec<&Claim> = cut
                .unanswered
                .iter()
                .filter_map(|&i| planned.get(i))
                .filter(|p| p.is_acquire())
                .map(Planned::claim)
                .collect();
            match owing.release_behind(pool, deadline, &acquires) {
                Ok(()) => self.owing = Some(owing),
                Err(failure) => drop(pool.failed(&mut owing.conn, failure)),
            }
        }
        planned.iter().map(|_| Err(err.clone())).collect()
    }

    /// Answers `planned` while the node still owes replies: see the module
    /// docs.
    fn behind(
        &mut self,
        pool: &NodePool,
        mut owing: Owing,
        planned: &[Planned<'_>],
        deadline: Instant,
    ) -> Results {
        let mut releases: Vec<&Claim> = Vec::new();
        let out = planned
            .iter()
            .map(|request| {
                let claim = request.claim();
                let token = claim.token();
                match request {
                    _ if request.is_release() && self.refused.contains(token) => {
                        Ok(Read::Done(Response::Held(false)))
                    }
                    _ if request.is_release() => {
                        let written = owing.dues.releases.contains(token)
                            || releases.iter().any(|c| c.token() == token);
                        if !written && owing.has_room(releases.len()) {
                            releases.push(claim);
                        }
                        Err(pool.behind())
                    }
                    _ => {
                        if request.is_acquire() && self.refused.len() < MAX_REFUSED {
                            self.refused.insert(token.clone());
                        }
                        Err(pool.behind())
                    }
                }
            })
            .collect();
        match owing.release_behind(pool, deadline, &releases) {
            Ok(()) => self.owing = Some(owing),
            Err(failure) => drop(pool.failed(&mut owing.conn, failure)),
        }
        out
    }

    /// Reads, by `deadline`, what the line's connection owes (the answers
    /// decided rounds left, [`Begun::detach`], or those of timed-out
    /// calls); the connection then goes back to the pool.
    pub(crate) fn catch_up(
        &mut self,
        pool: &NodePool,
        deadline: Instant,
        old_set: &AtomicBool,
    ) -> Result<(), RedisNodeError> {
        if let Some(mut owing) = self.owing.take() {
            match owing.catch_up(pool, deadline) {
                Ok(()) => self.refused.clear(),
                Err(failure) if failure.breaks_connection() => {
                    // Nothing more on it will run: caught up, but for the
                    // releases left unread on it.
                    let _ = pool.failed(&mut owing.conn, failure);
                    self.keep_lost(owing.dues.take_left());
                }
                Err(failure) => {
                    // Slow: from now on as any connection that owes.
                    owing.detached = false;
                    self.owing = Some(owing);
                    return Err(pool.error_of(failure));
                }
            }
        }
        if self.send_lost(pool, deadline, old_set) {
            Ok(())
        } else {
            Err(pool.error_of(Failure::Deadline))
        }
    }

    /// Whether the connection owes replies (for tests).
    #[cfg(test)]
    pub(crate) fn owes(&self) -> bool {
        self.owing.is_some()
    }
}

/// The first write's form: scripts by hash, a single-key acquire by
/// `SET ... GET` unless the server is known to be too old: it refused one
/// before, or said in `conn`'s handshake that it is older than Redis 7.0
/// (then no batch ever has its acquires redone after the requests behind
/// them).
fn form(old_set: &AtomicBool, conn: &Conn) -> Form {
    if conn.refuses_set_nx_get() {
        old_set.store(true, Ordering::Relaxed);
    }
    Form {
        via: Via::Hash,
        set_get: !old_set.load(Ordering::Relaxed),
    }
}

/// The longest a [`Begun`] request's read waits at a time.
const READ_SLICE: Duration = Duration::from_millis(1);

/// The requests [`Ordered::begin`] wrote, holding the node's line (nothing
/// else is sent to the node until their replies are read) and the
/// connection.
pub(crate) struct Begun<'a> {
    line: MutexGuard<'a, Ordered>,
    /// The answers of decided rounds owed on the connection before this
    /// request's own ([`Begun::detach`]), read and dropped first.
    behind: Dues,
    /// How many writes left unread those are.
    left: usize,
    /// Releases among them the server did not run for want of their
    /// script: sent again once this request's answer is in.
    again: Vec<Claim>,
    /// Taken when the answers are read.
    conn: Option<Pooled>,
    planned: Plans<'a>,
    form: Form,
    /// How writing and reading went so far.
    sent: Result<(), Failure>,
    /// The replies read so far.
    replies: Replies,
    deadline: Instant,
    old_set: &'a AtomicBool,
    pool: &'a NodePool,
}

impl<'a> Begun<'a> {
    /// The requests, in the order they were written.
    pub(crate) fn planned(&self) -> &[Planned<'a>] {
        &self.planned
    }

    /// What a caller waiting for these replies together with other nodes'
    /// may wait on ([`Started::readiness`](redlock_core::backend::Started::readiness)):
    /// the connection's socket while replies are still to come.
    #[cfg(unix)]
    pub(crate) fn readiness(&self) -> redlock_core::backend::Readiness<'_> {
        use redlock_core::backend::Readiness;
        match &self.conn {
            Some(conn)
                if self.sent.is_ok()
                    && self.replies.len() < replies_to(&self.planned, self.form) =>
            {
                conn.readiness()
            }
            _ => Readiness::Now,
        }
    }

    /// Reads the replies until they are all in (or reading failed), or
    /// until `until` passes first (then `false`, unless the call's own
    /// deadline passed: its timeout is then the answer). A read that times
    /// out loses nothing, so [`Begun::finish`] goes on from there. Each
    /// read waits [`READ_SLICE`] at most, so the socket keeps one short
    /// read timeout from one call to the next instead of being set again
    /// for every wait.
    pub(crate) fn wait(&mut self, until: Instant) -> bool {
        if self.sent.is_err() {
            return true;
        }
        let count = replies_to(&self.planned, self.form);
        let until = until.min(self.deadline);
        let Some(conn) = self.conn.as_mut() else {
            return true;
        };
        while self.replies.len() < count {
            let now = Instant::now();
            if now >= until {
                return until >= self.deadline;
            }
            let slice = until.min(now.checked_add(READ_SLICE).unwrap_or(until));
            match self.pool.session(conn, slice).read() {
                Ok(reply) if !self.behind.is_empty() => {
                    self.again.extend(self.behind.took(&reply));
                }
                Ok(reply) => self.replies.push(reply),
                // A slice's end, not the call's: its deadline decides.
                Err(failure) if failure.out_of_time() => {}
                Err(failure) => {
                    self.sent = Err(failure);
                    return true;
                }
            }
        }
        true
    }

    /// Reads the replies by `deadline` (at the latest the node timeout
    /// from the start), as [`Ordered::run`] would have: one result per
    /// request.
    pub(crate) fn finish(mut self, deadline: Instant) -> Results {
        self.wait(deadline);
        self.settle(deadline)
    }

    /// Reads what is left by `deadline` and settles the connection as
    /// [`Ordered::run`] would; once only (the connection is taken).
    fn settle(&mut self, deadline: Instant) -> Results {
        let no_answer = |pool: &NodePool| {
            Err(pool.error_of(Failure::Reply {
                kind: crate::RedisErrorKind::UnexpectedReply,
                detail: "no answer to the request".to_owned(),
            }))
        };
        let Some(mut conn) = self.conn.take() else {
            return self.planned.iter().map(|_| no_answer(self.pool)).collect();
        };
        let deadline = deadline.min(self.deadline);
        let sent = std::mem::replace(&mut self.sent, Ok(()));
        if sent.as_ref().is_err_and(Failure::breaks_connection) {
            // Nothing more on it will run.
            let left: Vec<Claim> = self.behind.take_left().collect();
            self.line.keep_lost(left.into_iter());
        }
        let replies = std::mem::take(&mut self.replies);
        let planned = std::mem::take(&mut self.planned);
        let exchanged = match self.catch_up(&mut conn, deadline, &sent, &planned) {
            Err(cut) => {
                if cut.failure.breaks_connection() {
                    let left: Vec<Claim> = self.behind.take_left().collect();
                    self.line.keep_lost(left.into_iter());
                }
                Err(cut)
            }
            Ok(()) => exchange(
                self.pool,
                &mut conn,
                &planned,
                deadline,
                self.old_set,
                self.form,
                (sent, replies),
            ),
        };
        let exchanged = match exchanged {
            Ok(reads) if !self.again.is_empty() => {
                // The releases to send again go behind, left as a decided
                // round's answers are.
                let owing = Owing {
                    conn,
                    dues: Dues::default(),
                    written: 0,
                    detached: true,
                    left: 0,
                };
                self.send_again(owing, deadline);
                return reads.into_iter().map(Ok).collect();
            }
            other => other,
        };
        self.line
            .settle(self.pool, conn, &planned, deadline, exchanged)
    }

    /// Writes the releases to send again behind what `owing` owes, and
    /// keeps it as the line's owing connection (or drops it, when that
    /// write broke it).
    fn send_again(&mut self, mut owing: Owing, deadline: Instant) {
        let again = std::mem::take(&mut self.again);
        let claims: Vec<&Claim> = again.iter().collect();
        match owing.release_behind(self.pool, deadline, &claims) {
            Ok(()) => self.line.owing = Some(owing),
            Err(failure) => drop(self.pool.failed(&mut owing.conn, failure)),
        }
    }
}

impl Begun<'_> {
    /// Reads the replies still due before this request's own, by
    /// `deadline`; a failure cuts the request as an exchange would, with
    /// everything on the connection still owed.
    fn catch_up(
        &mut self,
        conn: &mut Pooled,
        deadline: Instant,
        sent: &Result<(), Failure>,
        planned: &[Planned<'_>],
    ) -> Result<(), Cut> {
        if self.behind.is_empty() || sent.is_err() {
            return Ok(());
        }
        let mut session = self.pool.session(conn, deadline);
        while !self.behind.is_empty() {
            match session.read() {
                Ok(reply) => self.again.extend(self.behind.took(&reply)),
                Err(failure) => {
                    return Err(Cut {
                        failure,
                        owed: self.behind.count() + replies_to(planned, self.form),
                        unanswered: (0..planned.len()).collect(),
                    })
                }
            }
        }
        Ok(())
    }

    /// Takes the replies the server has sent already, without waiting:
    /// those due before this request's, then its own `count`.
    fn take_ready(&mut self, count: usize) {
        let Some(conn) = self.conn.as_mut().filter(|_| self.sent.is_ok()) else {
            return;
        };
        let mut session = self.pool.session(conn, self.deadline);
        while self.replies.len() < count {
            match session.read_ready() {
                Ok(Some(reply)) if !self.behind.is_empty() => {
                    self.again.extend(self.behind.took(&reply));
                }
                Ok(Some(reply)) => self.replies.push(reply),
                Ok(None) => return,
                Err(failure) => {
                    self.sent = Err(failure);
                    return;
                }
            }
        }
    }

    /// Leaves these requests' answers (and any due before them) to be read
    /// by whoever uses the node's line next, without waiting: the
    /// connection is kept owing them. `None` once left; the answers when
    /// they are all in already, or the requests failed.
    pub(crate) fn detach(mut self, deadline: Instant) -> Option<Results> {
        let count = replies_to(&self.planned, self.form);
        // Answers in already are taken: only those still out are left.
        self.take_ready(count);
        if self.sent.is_err() || (self.behind.is_empty() && self.replies.len() >= count) {
            return Some(self.settle(deadline));
        }
        let conn = self.conn.take()?;
        let mut dues = std::mem::take(&mut self.behind);
        // The writes left unread before this one, if their answers are
        // still due, and this one.
        let left = if dues.is_empty() { 1 } else { self.left + 1 };
        // Each request's replies are due in turn: a release's one reply is
        // its own due (sent again if the server lost its script), those of
        // any other request are dropped; the replies in already are taken
        // as the first of them.
        for request in &self.planned {
            let n = request.replies(self.form);
            if n == 0 {
                continue;
            }
            if request.is_release() && n == 1 {
                let claim = request.claim().clone();
                dues.releases.insert(claim.token().clone());
                dues.due.push_back(Due::Left(claim));
            } else {
                dues.due.push_back(Due::Stale(n));
            }
        }
        for reply in std::mem::take(&mut self.replies) {
            self.again.extend(dues.took(&reply));
        }
        let owing = Owing {
            conn,
            dues,
            written: 0,
            detached: true,
            left,
        };
        self.send_again(owing, deadline);
        None
    }
}

impl Drop for Begun<'_> {
    /// A request nobody read the answer of (its caller panicked between
    /// sending and reading) is settled as a timed-out call's: the
    /// connection is kept owing its reply, with a release behind an
    /// acquire, so that no later call reads that reply as its own.
    fn drop(&mut self) {
        if self.conn.is_some() {
            let _ = self.settle(Instant::now());
        }
    }
}

/// Runs `planned` on `conn` within `deadline`: its commands in one write
/// (scripts by `EVALSHA`, a single-key acquire by `SET ... GET` unless the
/// server is too old), then, if the server did nothing for some
/// (`NOSCRIPT`, or a syntax error for `SET ... GET`), those requests again
/// in the fallback form in a second write (see
/// [`LockBackend::run_batch`](redlock_core::backend::LockBackend::run_batch)). One
/// read per request.
fn exchange(
    pool: &NodePool,
    conn: &mut Pooled,
    planned: &[Planned<'_>],
    deadline: Instant,
    old_set: &AtomicBool,
    form: Form,
    (sent, replies): (Result<(), Failure>, Replies),
) -> Result<Reads, Cut> {
    let mut session = pool.session(conn, deadline);
    let mut reads = receive(&mut session, planned, form, sent, replies)?;
    if !reads.iter().any(Read::must_retry) {
        return Ok(reads);
    }
    let retried: Vec<usize> = (0..reads.len())
        .filter(|&i| reads[i].must_retry())
        .collect();
    let again: Vec<Planned<'_>> = retried.iter().map(|&i| planned[i]).collect();
    if form.set_get && again.iter().any(|p| matches!(p, Planned::SetNx { .. })) {
        old_set.store(true, Ordering::Relaxed);
    }
    match send(&mut session, &again, Form::FALLBACK) {
        Ok(answers) => {
            for (i, answer) in retried.into_iter().zip(answers) {
                reads[i] = answer;
            }
            Ok(reads)
        }
        Err(mut cut) => {
            cut.unanswered = cut.unanswered.iter().map(|&i| retried[i]).collect();
            Err(cut)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufReader, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use parking_lot::Mutex as Shared;
    use redlock_core::backend::LockBackend;
    use redlock_core::Ttl;

    use crate::plan::tests::claim;
    use crate::pool::tests::read_words;
    use crate::{RedisBackend, RedisErrorKind};

    /// Every command a fake server read: the connection's number and the
    /// words (tokens and script bodies shortened).
    type Log = Arc<Shared<Vec<(usize, String)>>>;

    /// A fake Redis that answers the first `SET` only after `delay` (the
    /// commands behind it on its connection wait too), every later `SET`
    /// at once with nil (set), `EVAL` with 1 and `EVALSHA` with 0 (so the
    /// answers show which command they are for), and the handshake with OK
    /// (`NOPERM` for `SCRIPT`).
    fn slow_first_set(delay: std::time::Duration) -> (u16, Log) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let log: Log = Arc::default();
        let seen = Arc::clone(&log);
        let first = Arc::new(Shared::new(true));
        std::thread::spawn(move || {
            for (index, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                let (seen, first) = (Arc::clone(&seen), Arc::clone(&first));
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                    while let Some(words) = read_words(&mut reader) {
                        let verb = words[0].to_uppercase();
                        let shown: Vec<&str> = words
                            .iter()
                            .map(|w| match w.len() {
                                20 => "T",
                                n if n >= 40 => "BODY",
                                _ => w.as_str(),
                            })
                            .collect();
                        seen.lock().push((index, shown.join(" ")));
                        let reply: &[u8] = match verb.as_str() {
                            "SET" => {
                                if std::mem::take(&mut *first.lock()) {
                                    std::thread::sleep(delay);
                                }
                                b"$-1\r\n"
                            }
                            "EVAL" => b":1\r\n",
                            "EVALSHA" => b":0\r\n",
                            "SCRIPT" => b"-NOPERM not for you\r\n",
                            _ => b"+OK\r\n",
                        };
                        if stream.write_all(reply).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (port, log)
    }

    fn lock_commands(log: &Log) -> Vec<(usize, String)> {
        log.lock()
            .iter()
            .filter(|(_, c)| c.starts_with("SET") || c.starts_with("EVAL"))
            .cloned()
            .collect()
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "never: {what}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A fake Redis that answers the handshake with OK and any other
    /// command with `reply`, then waits for the client to close the
    /// connection. Returns its port and how many connections were closed
    /// after `reply` was sent.
    fn answering(reply: Vec<u8>) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let closed = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&closed);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (count, reply) = (Arc::clone(&count), reply.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                    let mut answered = false;
                    while let Some(words) = read_words(&mut reader) {
                        let verb = words[0].to_uppercase();
                        let out: &[u8] = match verb.as_str() {
                            "CLIENT" | "SCRIPT" | "SELECT" | "AUTH" | "HELLO" => b"+OK\r\n",
                            _ => {
                                answered = true;
                                &reply
                            }
                        };
                        if stream.write_all(out).is_err() {
                            break;
                        }
                    }
                    if answered {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        (port, closed)
    }

    #[test]
    fn bug3_a_negative_or_oversized_length_is_a_protocol_error_that_drops_the_connection() {
        let huge = format!("${}\r\n", 1_u64 << 40).into_bytes();
        let bad: [&[u8]; 8] = [
            b"=-1\r\n",
            b"!-1\r\n",
            b"$-2\r\n",
            b"*-2\r\n",
            b"~-1\r\n",
            b">-1\r\n",
            b"$2000000\r\n",
            &huge,
        ];
        let ttl = Ttl::new(std::time::Duration::from_secs(5)).expect("ttl");
        for reply in bad {
            let shown = String::from_utf8_lossy(reply).into_owned();
            let (port, closed) = answering(reply.to_vec());
            // A node timeout long enough that a timeout cannot pass for
            // the protocol error.
            let backend = RedisBackend::builder(format!("redis://127.0.0.1:{port}"))
                .node_timeout(std::time::Duration::from_secs(5))
                .pool_size(1)
                .build()
                .expect("backend");
            let err = backend
                .acquire(&claim(&["k"]), ttl, false)
                .expect_err(&shown);
            assert_eq!(
                err.kind(),
                RedisErrorKind::UnexpectedReply,
                "{shown}: {err}"
            );
            assert!(!backend.owes(), "{shown}");
            // While the backend lives: it gave the connection up itself.
            wait_for("the connection to be dropped", || {
                closed.load(Ordering::SeqCst) > 0
            });
        }
    }

    #[test]
    fn a_started_acquire_nobody_read_is_followed_by_its_release_and_its_reply_is_skipped() {
        let timeout = std::time::Duration::from_secs(2);
        let (port, log) = slow_first_set(std::time::Duration::from_millis(200));
        let backend = RedisBackend::builder(format!("redis://127.0.0.1:{port}"))
            .node_timeout(timeout)
            .pool_size(1)
            .build()
            .expect("backend");
        let ttl = Ttl::new(std::time::Duration::from_secs(5)).expect("ttl");
        let (mine, other) = (claim(&["k"]), claim(&["other"]));
        // The pool's one connection, made in the background, is idle.
        wait_for("a connection", || backend.release(&other).is_ok());
        let acquire = redlock_core::backend::Request::Acquire {
            claim: &mine,
            ttl,
            fence: false,
        };
        let started = start(&backend, acquire);
        // Its caller gives up without reading the (late) answer.
        drop(started);
        assert!(backend.owes());
        // The next call reads the owed replies (nil, 1) first and then its
        // own: the acquire's late reply is not taken for the release's.
        assert!(!backend.release(&other).expect("in step"));
        assert!(!backend.owes());
        wait_for("the commands to be read", || lock_commands(&log).len() >= 4);
        let shown: Vec<String> = lock_commands(&log).into_iter().map(|(_, c)| c).collect();
        assert_eq!(
            shown[1..],
            [
                "SET k T NX PX 5000 GET",
                "EVAL BODY 2 k k\u{1f}waiting T redlock:released",
                "EVALSHA BODY 2 other other\u{1f}waiting T redlock:released",
            ]
        );
    }

    #[test]
    fn a_timed_out_acquire_is_followed_by_its_release_on_the_same_connection() {
        let timeout = std::time::Duration::from_millis(100);
        let (port, log) = slow_first_set(timeout * 4);
        let backend = RedisBackend::builder(format!("redis://127.0.0.1:{port}"))
            .node_timeout(timeout)
            .build()
            .expect("backend");
        let ttl = Ttl::new(std::time::Duration::from_secs(5)).expect("ttl");
        let (mine, other) = (claim(&["k"]), claim(&["other"]));
        let err = backend.acquire(&mine, ttl, false).expect_err("too late");
        assert_eq!(err.kind(), RedisErrorKind::Timeout, "{err}");
        assert!(backend.owes());
        // The manager's release of it, while the node has not answered:
        // not sent again (its release is already on the way).
        let err = backend.release(&mine).expect_err("still owed");
        assert_eq!(err.kind(), RedisErrorKind::Behind, "{err}");
        // Nothing new piles up: an acquire is refused unsent, and the
        // release of that claim has nothing to release.
        let err = backend.acquire(&other, ttl, false).expect_err("behind");
        assert_eq!(err.kind(), RedisErrorKind::Behind, "{err}");
        assert!(!backend.release(&other).expect("answered at once"));
        // Once the node answered, the owed replies (nil, 1) are read and
        // dropped: the next release reads its own answer (0, EVALSHA).
        wait_for("the node to answer", || backend.release(&mine).is_ok());
        assert!(!backend.owes());
        assert!(!backend.release(&mine).expect("in step"));
        wait_for("the commands to be read", || lock_commands(&log).len() >= 4);
        let commands = lock_commands(&log);
        let conn = commands[0].0;
        assert!(commands.iter().all(|(c, _)| *c == conn), "{commands:?}");
        let shown: Vec<&str> = commands.iter().map(|(_, c)| c.as_str()).collect();
        assert_eq!(
            shown,
            [
                "SET k T NX PX 5000 GET",
                // By EVAL: the release behind the unanswered acquire.
                "EVAL BODY 2 k k\u{1f}waiting T redlock:released",
                "EVALSHA BODY 2 k k\u{1f}waiting T redlock:released",
                "EVALSHA BODY 2 k k\u{1f}waiting T redlock:released",
            ]
        );
    }

    /// A gate a fake server waits at once, until the test opens it.
    type Gate = Arc<Shared<Option<std::sync::mpsc::Receiver<()>>>>;

    /// A closed gate, and what opens it.
    fn gate() -> (Gate, std::sync::mpsc::Sender<()>) {
        let (open, wait) = std::sync::mpsc::channel();
        (Arc::new(Shared::new(Some(wait))), open)
    }

    /// Waits at `gate` the first time only.
    fn pass(gate: &Gate) {
        let wait = gate.lock().take();
        if let Some(wait) = wait {
            let _ = wait.recv();
        }
    }

    /// What a gated fake server does with one command.
    enum Act {
        /// Answers it with these bytes.
        Reply(&'static [u8]),
        /// Closes the connection instead of answering.
        Close,
    }

    /// A fake Redis that logs each script it is sent (its verb and key),
    /// waits at a gate the first time `gated` says so, then
    /// does what `act` says; the gate stays closed until the test opens it.
    fn gated_fake(
        gated: impl Fn(&str, &[String]) -> bool + Send + Sync + 'static,
        act: impl Fn(&str, &[String]) -> Act + Send + Sync + 'static,
    ) -> (u16, Log, std::sync::mpsc::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let log: Log = Arc::default();
        let seen = Arc::clone(&log);
        let (held, open) = gate();
        let rules = Arc::new((gated, act));
        std::thread::spawn(move || {
            for (index, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                let (seen, held) = (Arc::clone(&seen), Arc::clone(&held));
                let rules = Arc::clone(&rules);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                    while let Some(words) = read_words(&mut reader) {
                        let verb = words[0].to_uppercase();
                        if verb.starts_with("EVAL") {
                            let key = words.get(3).map_or("", String::as_str);
                            seen.lock().push((index, format!("{verb} {key}")));
                        }
                        if (rules.0)(&verb, &words) {
                            pass(&held);
                        }
                        let written = match (rules.1)(&verb, &words) {
                            Act::Reply(reply) => stream.write_all(reply),
                            Act::Close => {
                                let _ = stream.shutdown(std::net::Shutdown::Both);
                                return;
                            }
                        };
                        if written.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (port, log, open)
    }

    /// Whether `words` are an `EVALSHA` on key `k`.
    fn script_on_k(verb: &str, words: &[String]) -> bool {
        verb == "EVALSHA" && words.get(3).is_some_and(|key| key == "k")
    }

    /// A fake Redis whose scripts are lost: `EVALSHA` is answered
    /// `NOSCRIPT` (the first one on key `k` only once the gate opens),
    /// `EVAL` with 1, anything else with OK.
    fn no_scripts() -> (u16, Log, std::sync::mpsc::Sender<()>) {
        gated_fake(script_on_k, |verb, _| {
            Act::Reply(match verb {
                "EVALSHA" => b"-NOSCRIPT No matching script.\r\n",
                "EVAL" => b":1\r\n",
                _ => b"+OK\r\n",
            })
        })
    }

    /// A backend of one connection to the fake server on `port`, once
    /// that connection is made (a release of `x` answered).
    fn one_connection(port: u16, timeout: std::time::Duration) -> RedisBackend {
        let backend = RedisBackend::builder(format!("redis://127.0.0.1:{port}"))
            .node_timeout(timeout)
            .pool_size(1)
            .build()
            .expect("backend");
        wait_for("a connection", || backend.release(&claim(&["x"])).is_ok());
        backend
    }

    /// A backend of one connection to the fake server on `port` that sent
    /// a release of `k` (`log` cleared just before) and left its answer
    /// unread; and the deadline for what follows.
    fn left_release(port: u16, log: &Log) -> (RedisBackend, std::time::Instant) {
        let timeout = std::time::Duration::from_secs(2);
        let backend = one_connection(port, timeout);
        let mine = claim(&["k"]);
        log.lock().clear();
        let release = redlock_core::backend::Request::Release { claim: &mine };
        let deadline = std::time::Instant::now() + timeout;
        assert!(start(&backend, release).detach(deadline).is_none());
        (backend, deadline)
    }

    /// One request started on its own, as a lone caller starts it.
    struct One<'a>(Box<dyn redlock_core::backend::Started<crate::RedisNodeError> + 'a>);

    type Answer = Result<redlock_core::backend::Response, crate::RedisNodeError>;

    impl One<'_> {
        fn finish(self, deadline: std::time::Instant) -> Answer {
            let mut out = Vec::new();
            self.0.finish(deadline, &mut out);
            assert_eq!(out.len(), 1, "one answer per request");
            out.pop().expect("one answer")
        }

        /// `None` once left to be read later.
        fn detach(self, deadline: std::time::Instant) -> Option<Answer> {
            let mut out = Vec::new();
            if self.0.detach(deadline, &mut out) {
                assert!(out.is_empty(), "nothing read when left");
                return None;
            }
            out.pop()
        }
    }

    fn start<'a>(
        backend: &'a RedisBackend,
        request: redlock_core::backend::Request<'a>,
    ) -> One<'a> {
        One(LockBackend::start(backend, &[request]).expect("an idle connection"))
    }

    #[test]
    fn a_detached_acquire_gets_no_release_and_its_reply_is_read_before_the_next_answer() {
        let timeout = std::time::Duration::from_secs(2);
        let (port, log) = slow_first_set(std::time::Duration::from_millis(200));
        let backend = one_connection(port, timeout);
        let ttl = Ttl::new(std::time::Duration::from_secs(5)).expect("ttl");
        let (mine, other) = (claim(&["k"]), claim(&["other"]));
        let acquire = redlock_core::backend::Request::Acquire {
            claim: &mine,
            ttl,
            fence: false,
        };
        // Its round was decided without it: left unread, the caller gone.
        let deadline = std::time::Instant::now() + timeout;
        assert!(start(&backend, acquire).detach(deadline).is_none());
        assert!(backend.owes());
        // The next own request goes on the same connection, behind it,
        // without waiting; its answer is its own (0 from EVALSHA), not the
        // acquire's late nil.
        let release = redlock_core::backend::Request::Release { claim: &other };
        let answer = start(&backend, release).finish(deadline).expect("in step");
        assert_eq!(answer, redlock_core::backend::Response::Held(false));
        assert!(!backend.owes());
        wait_for("the commands to be read", || lock_commands(&log).len() >= 3);
        let commands = lock_commands(&log);
        assert!(
            commands.iter().all(|(c, _)| *c == commands[0].0),
            "{commands:?}"
        );
        let shown: Vec<String> = commands.into_iter().map(|(_, c)| c).collect();
        // No release behind the acquire: its lock may be held.
        assert_eq!(
            shown[1..],
            [
                "SET k T NX PX 5000 GET",
                "EVALSHA BODY 2 other other\u{1f}waiting T redlock:released",
            ]
        );
    }

    #[test]
    fn a_node_that_owes_two_left_requests_gets_no_third_from_a_caller() {
        let timeout = std::time::Duration::from_secs(10);
        // The node answers nothing during the test.
        let (port, _log) = slow_first_set(std::time::Duration::from_secs(30));
        let backend = one_connection(port, timeout);
        let ttl = Ttl::new(std::time::Duration::from_secs(5)).expect("ttl");
        let (mine, other) = (claim(&["k"]), claim(&["other"]));
        let deadline = std::time::Instant::now() + timeout;
        let acquire = redlock_core::backend::Request::Acquire {
            claim: &mine,
            ttl,
            fence: false,
        };
        assert!(start(&backend, acquire).detach(deadline).is_none());
        // Behind one left request, a caller still sends its own.
        let release = redlock_core::backend::Request::Release { claim: &mine };
        assert!(start(&backend, release).detach(deadline).is_none());
        // Behind two, it goes through the node's worker instead.
        let again = redlock_core::backend::Request::Release { claim: &other };
        assert!(LockBackend::start(&backend, &[again]).is_none());
        assert!(backend.owes());
    }

    /// An acquire of `first` and a release of `second`, as one batch.
    fn batch_of<'a>(
        first: &'a redlock_core::backend::Claim,
        second: &'a redlock_core::backend::Claim,
        ttl: Ttl,
    ) -> [redlock_core::backend::Request<'a>; 2] {
        [
            redlock_core::backend::Request::Acquire {
                claim: first,
                ttl,
                fence: false,
            },
            redlock_core::backend::Request::Release { claim: second },
        ]
    }

    #[test]
    fn a_batch_left_unread_counts_as_one_write_and_two_hold_back_a_third() {
        let timeout = std::time::Duration::from_secs(10);
        // The node answers nothing during the test.
        let (port, _log) = slow_first_set(std::time::Duration::from_secs(30));
        let backend = one_connection(port, timeout);
        let ttl = Ttl::new(std::time::Duration::from_secs(5)).expect("ttl");
        let (a, b, c) = (claim(&["a"]), claim(&["b"]), claim(&["c"]));
        let deadline = std::time::Instant::now() + timeout;
        let batch = |first, second| batch_of(first, second, ttl);
        let mut out = Vec::new();
        // A poller's batch of two, left unread: one write behind.
        let first = LockBackend::start(&backend, &batch(&a, &b)).expect("idle");
        assert!(first.detach(deadline, &mut out), "left unread");
        // The next batch still goes behind it, and is left too.
        let second = LockBackend::start(&backend, &batch(&b, &c)).expect("behind one write");
        assert!(second.detach(deadline, &mut out), "left unread");
        assert!(out.is_empty(), "nothing read");
        // Behind two writes, the node's worker takes the next.
        assert!(LockBackend::start(&backend, &batch(&c, &a)).is_none());
        assert!(backend.owes());
    }

    #[test]
    fn a_detached_release_the_server_had_no_script_for_is_sent_again_by_eval() {
        let (port, log, open) = no_scripts();
        let (backend, deadline) = left_release(port, &log);
        assert!(backend.owes());
        open.send(()).expect("the server waits");
        // A flush catches up: the NOSCRIPT answer makes it send the
        // release again, by its body, and read that answer too.
        backend.catch_up(deadline).expect("caught up");
        assert!(!backend.owes());
        let shown: Vec<String> = log.lock().iter().map(|(_, c)| c.clone()).collect();
        assert_eq!(shown, ["EVALSHA k", "EVAL k"]);
    }

    /// A fake Redis that closes the connection instead of answering the
    /// first `EVALSHA` on key `k` (once the gate opens), and answers every
    /// other one with 1 (anything else with OK).
    fn drops_first_script() -> (u16, Log, std::sync::mpsc::Sender<()>) {
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let closes = Arc::clone(&first);
        let gated = move |verb: &str, words: &[String]| {
            script_on_k(verb, words) && first.load(std::sync::atomic::Ordering::SeqCst)
        };
        gated_fake(gated, move |verb, words| match verb {
            "EVALSHA"
                if script_on_k(verb, words)
                    && closes.swap(false, std::sync::atomic::Ordering::SeqCst) =>
            {
                Act::Close
            }
            "EVALSHA" => Act::Reply(b":1\r\n"),
            _ => Act::Reply(b"+OK\r\n"),
        })
    }

    #[test]
    fn a_detached_release_whose_connection_broke_is_sent_again_on_a_new_one() {
        let (port, log, open) = drops_first_script();
        let (backend, deadline) = left_release(port, &log);
        open.send(()).expect("the server waits");
        // The server closes the connection unanswered: the release may not
        // have run, and nobody but the backend knows of it.
        backend.catch_up(deadline).expect("sent again and answered");
        assert!(!backend.owes());
        let commands = log.lock().clone();
        assert_eq!(commands.len(), 2, "{commands:?}");
        assert!(
            commands.iter().all(|(_, c)| c == "EVALSHA k"),
            "{commands:?}"
        );
        assert_ne!(commands[0].0, commands[1].0, "on a new connection");
    }
}
