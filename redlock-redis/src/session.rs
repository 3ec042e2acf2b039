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
    /// the connection must be kept in order, see [`crate::line`]).
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
            Failure::Reply { kind, .. } => *kind != RedisErrorKind::WrongType,
        }
    }

    /// Whether a write or a read timed out: what was sent may still run.
    pub(crate) fn timed_out(&self) -> bool {
        matches!(self, Failure::Redis(err) if err.is_timeout())
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
    /// See [`timeout_slack`](crate::pool).
    slack: Duration,
}

impl<'a> Session<'a> {
    /// A session on `conn` until `deadline`; the socket's timeouts are kept
    /// while within `slack` of the time left.
    pub(crate) fn new(conn: &'a mut Conn, deadline: Instant, slack: Duration) -> Self {
        Session {
            conn,
            deadline,
            slack,
        }
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

    /// Makes the socket's read timeout `left`, give or take the slack (see
    /// `timeout_slack` in [`crate::pool`]): it is set only when it differs
    /// from `left` by more, which normally it does not.
    ///
    /// Reads and writes are armed apart: a caller that waits on several
    /// nodes a short slice at a time keeps a short read timeout on its
    /// connections without touching the write timeout, and so sets
    /// neither again from one round to the next.
    fn arm_read(&mut self, left: Duration) -> Result<(), RedisError> {
        if left.abs_diff(self.conn.wire.read_timeout()) > self.slack {
            self.conn.wire.set_read_timeout(left)?;
        }
        Ok(())
    }

    /// As [`arm_read`](Self::arm_read), for writes.
    fn arm_write(&mut self, left: Duration) -> Result<(), RedisError> {
        if left.abs_diff(self.conn.wire.write_timeout()) > self.slack {
            self.conn.wire.set_write_timeout(left)?;
        }
        Ok(())
    }

    /// Arms the socket for sending a command, or fails with
    /// [`Failure::Deadline`] when no time is left.
    fn arm_to_send(&mut self) -> Result<(), Failure> {
        let left = self.left();
        if left.is_zero() {
            return Err(Failure::Deadline);
        }
        Ok(self.arm_write(left)?)
    }

    /// Sends the commands `write` appends to the (connection's reused,
    /// empty) buffer, `count` of them, in one write, and reads the `count`
    /// replies into `replies`. An error reply to one command is its
    /// `Value::ServerError`; only connection-level failures are errors, and
    /// then `replies` holds those read before it.
    ///
    /// The timeouts are checked again before each reply is read, so a
    /// server that stops answering holds the call up until its deadline
    /// (and the slack), not a full timeout per missing reply.
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
        self.arm_to_send()?;
        let Conn { wire, packed, .. } = &mut *self.conn;
        let sent = wire.write(packed);
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
        self.arm_to_send()?;
        Ok(self.conn.wire.flush().map_err(RedisError::from)?)
    }

    /// Reads the next reply before the deadline.
    pub(crate) fn read(&mut self) -> Result<Value, Failure> {
        let left = self.left();
        if left.is_zero() {
            return Err(Failure::Redis(replies_overdue()));
        }
        self.arm_read(left)?;
        Ok(self.conn.wire.read()?)
    }
}

/// The error for a call whose deadline passed while replies were due.
fn replies_overdue() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the node timeout ran out before every reply was read",
    ))
}
