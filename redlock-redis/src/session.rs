//! [`Session`]: the I/O of one call on one connection, within the call's
//! deadline, and [`Failure`], why it failed.

use std::time::{Duration, Instant};

use redis::{RedisError, Value};

use crate::wire::Wire;
use crate::RedisErrorKind;

/// A pooled connection and whether it may still be trusted.
pub(crate) struct Conn {
    wire: Wire,
    /// Set when the connection can no longer be used: the server closed or
    /// reset it, or a reply made no sense (the replies may be out of step).
    broken: bool,
    /// The commands of the current call, kept to reuse the allocation.
    packed: Vec<u8>,
}

impl Conn {
    pub(crate) fn new(wire: Wire) -> Self {
        Conn {
            wire,
            broken: false,
            packed: Vec::new(),
        }
    }

    /// Marks the connection as unusable: the pool drops it.
    pub(crate) fn set_broken(&mut self) {
        self.broken = true;
    }

    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    /// See [`Wire::readiness`].
    #[cfg(unix)]
    pub(crate) fn readiness(&self) -> redlock_core::backend::Readiness<'_> {
        self.wire.readiness()
    }

    /// Whether the server said in the handshake that it is a Redis older
    /// than 7.0, which refuses `SET` with both `NX` and `GET`.
    pub(crate) fn refuses_set_nx_get(&self) -> bool {
        self.wire
            .server()
            .is_some_and(crate::version::ServerFacts::refuses_set_nx_get)
    }
}

/// A connection's [`Conn::packed`] is shrunk back to this after a call that
/// needed more (a very large batch).
const KEPT_BUFFER: usize = 16 * 1024;

/// Why an operation failed, before it is named after the node.
pub(crate) enum Failure {
    /// redis-rs reported an error (I/O, or an error reply).
    Redis(RedisError),
    /// The node timeout ran out before a command could be sent.
    Deadline,
    /// The deadline passed while the server was sending something other
    /// than whole replies: part of one (trickled, or announced far longer
    /// than what came), or push data nobody asked for. The request the
    /// reply was for has run (a server answers only after running it), and
    /// the server is not frozen: the connection is dropped rather than kept
    /// owing, which it would be forever with a server that never finishes.
    Stalled,
    /// The reply made no sense for the command, or showed a problem of
    /// ours (a lock key of another type).
    Reply {
        kind: RedisErrorKind,
        detail: String,
    },
}

impl Failure {
    /// Whether the connection can no longer be used: the server closed or
    /// reset it (nothing more sent on it will run), or a reply made no sense
    /// for its command (the replies may be out of step). Not after a clean
    /// error reply, a deadline that ran out before sending, a wrong-type
    /// finding, or a timeout (the node may still run what it was sent, so
    /// the connection must be kept in order, see [`crate::ordered`]). After a
    /// [`Failure::Stalled`] it can.
    pub(crate) fn breaks_connection(&self) -> bool {
        match self {
            Failure::Redis(err) => {
                !err.is_timeout()
                    && !matches!(
                        err.kind(),
                        redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
                    )
            }
            Failure::Deadline => false,
            Failure::Stalled => true,
            Failure::Reply { kind, .. } => *kind != RedisErrorKind::WrongType,
        }
    }

    /// Whether a write or a read timed out: what was sent may still run.
    pub(crate) fn timed_out(&self) -> bool {
        matches!(self, Failure::Redis(err) if err.is_timeout())
    }

    /// Whether the deadline passed (a timeout, or a stall): for a read
    /// that waits a slice of a call's time, not the end of it.
    pub(crate) fn out_of_time(&self) -> bool {
        self.timed_out() || matches!(self, Failure::Stalled)
    }

    /// A reply of the wrong shape for `command`.
    pub(crate) fn unexpected(command: &str, reply: &Value) -> Self {
        Failure::Reply {
            kind: RedisErrorKind::UnexpectedReply,
            detail: format!("{command} answered {}", describe(reply)),
        }
    }
}

impl From<RedisError> for Failure {
    fn from(err: RedisError) -> Self {
        Failure::Redis(err)
    }
}

/// Names a reply's type without its content (which could hold a token).
fn describe(reply: &Value) -> &'static str {
    match reply {
        Value::Nil => "nil",
        Value::Int(_) => "an integer",
        Value::BulkString(_) => "a bulk string",
        Value::Array(_) => "an array",
        Value::SimpleString(_) => "a status string",
        Value::Okay => "OK",
        Value::Map(_) => "a map",
        Value::Set(_) => "a set",
        Value::Double(_) => "a double",
        Value::Boolean(_) => "a boolean",
        _ => "a reply of another type",
    }
}

/// A checked-out connection with the deadline of the current operation.
pub(crate) struct Session<'a> {
    conn: &'a mut Conn,
    deadline: Instant,
}

impl<'a> Session<'a> {
    /// A session on `conn` until `deadline`.
    pub(crate) fn new(conn: &'a mut Conn, deadline: Instant) -> Self {
        Session { conn, deadline }
    }

    /// The socket's read timeout now (for tests).
    #[cfg(test)]
    pub(crate) fn io_timeout(&self) -> Duration {
        self.conn.wire.read_timeout()
    }

    /// The time left before the deadline.
    pub(crate) fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Fails with [`Failure::Deadline`] when no time is left to send.
    fn check_time(&self) -> Result<(), Failure> {
        if self.left().is_zero() {
            return Err(Failure::Deadline);
        }
        Ok(())
    }

    /// Sends the commands `write` appends to the (connection's reused,
    /// empty) buffer, `count` of them, in one write, and reads the `count`
    /// replies into `replies`. An error reply to one command is its
    /// `Value::ServerError`; only connection-level failures are errors, and
    /// then `replies` holds those read before it.
    ///
    /// Every socket read and write waits only the time left before the
    /// deadline (and the slack), so a server that stops answering, or
    /// trickles its replies, holds the call up until its deadline, not a
    /// full timeout per reply or per byte.
    #[cfg(test)]
    pub(crate) fn call(
        &mut self,
        count: usize,
        write: impl FnOnce(&mut Vec<u8>),
        replies: &mut Vec<Value>,
    ) -> Result<(), Failure> {
        self.send(write)?;
        for _ in 0..count {
            replies.push(self.read()?);
        }
        Ok(())
    }

    /// Sends the commands `write` appends, without reading their replies.
    /// A write that times out keeps what it could not send, for the next
    /// write or [`flush`](Self::flush) on this connection.
    pub(crate) fn send(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), Failure> {
        let packed = &mut self.conn.packed;
        packed.clear();
        write(packed);
        self.send_packed()
    }

    /// Writes the commands in the connection's buffer.
    fn send_packed(&mut self) -> Result<(), Failure> {
        self.check_time()?;
        let Conn { wire, packed, .. } = &mut *self.conn;
        let sent = wire.write(packed, self.deadline);
        packed.clear();
        packed.shrink_to(KEPT_BUFFER);
        Ok(sent.map_err(RedisError::from)?)
    }

    /// Like [`send`](Self::send), but given at least `least` to write even
    /// when the deadline has passed: for releases that must reach the
    /// node's socket although the call's time is spent (a socket with room
    /// takes them at once). The time counts from when the commands are
    /// packed (packing a very large key takes time of its own), and what
    /// the write does not send in that time goes out first on the next call.
    pub(crate) fn send_anyway(
        &mut self,
        least: Duration,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), Failure> {
        let packed = &mut self.conn.packed;
        packed.clear();
        write(packed);
        let now = Instant::now();
        if self.deadline < now + least {
            self.deadline = now + least;
        }
        self.send_packed()
    }

    /// Sends what earlier writes on this connection left unsent.
    pub(crate) fn flush(&mut self) -> Result<(), Failure> {
        if !self.conn.wire.has_unsent() {
            return Ok(());
        }
        self.check_time()?;
        Ok(self
            .conn
            .wire
            .flush(self.deadline)
            .map_err(RedisError::from)?)
    }

    /// The next reply if the server sent it whole already, without
    /// waiting.
    ///
    /// # Errors
    ///
    /// The server closed the connection or broke the protocol.
    pub(crate) fn read_ready(&mut self) -> Result<Option<Value>, Failure> {
        Ok(self.conn.wire.read_ready()?)
    }

    /// Reads the next reply before the deadline (one already buffered even
    /// after it).
    ///
    /// # Errors
    ///
    /// [`Failure::Stalled`] when the deadline passed while the server had
    /// sent part of a reply, or data nobody asked for; a timeout when it
    /// had sent nothing.
    pub(crate) fn read(&mut self) -> Result<Value, Failure> {
        match self.conn.wire.read(self.deadline) {
            Ok(reply) => Ok(reply),
            Err(err) if err.is_timeout() && self.conn.wire.mid_reply() => Err(Failure::Stalled),
            Err(err) => Err(err.into()),
        }
    }
}
