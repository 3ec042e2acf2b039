//! One connection to a node, owned byte for byte: the socket (TCP, TLS or
//! unix), the replies read so far, and the commands not yet handed to the
//! socket.
//!
//! redis-rs's blocking `Connection` cannot be kept after a read timeout: it
//! then silently skips as many later replies as reads timed out, so after a
//! few timeouts on a frozen node nobody knows which reply is which. Here a
//! read that times out loses nothing (the bytes read so far stay buffered)
//! and a write that times out keeps the rest of its bytes for the next
//! write, so a connection with requests in flight stays usable and in order.
//!
//! What a server can cost is bounded, whatever it sends:
//!
//! - time: every read and write takes a deadline and gives up when it
//!   passes (within the slack, see [`timeout_slack`]), however the bytes
//!   trickle in; opening a connection (name lookup, each address, TLS
//!   handshake) has one deadline for all of it, and the handshake another;
//! - memory: a reply, with any push data before it, may take
//!   [`MAX_REPLY_BYTES`] at most. Each header is checked as it arrives
//!   ([`Framer`]): a declared length that would take the reply past it, a
//!   negative length other than the RESP2 nulls (`$-1`, `*-1`), nesting
//!   deeper than [`MAX_DEPTH`] or a type byte RESP does not have is a
//!   protocol error (the connection is then dropped). A whole, checked
//!   reply is then decoded: the lock commands' kinds here
//!   ([`reply`](crate::reply)), every other by redis-rs's parser.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::{ErrorKind, Parser, RedisError, ServerErrorKind, Value};

use crate::ops::Resp;
use crate::version::{judge_hello, ServerFacts};

/// The most bytes one reply may take, with the push data (RESP3 `>`) the
/// server sent before it: 1 MiB. A declared length beyond it is a protocol
/// error.
pub(crate) const MAX_REPLY_BYTES: usize = 1024 * 1024;

/// The deepest nesting of arrays, maps and sets in a reply.
pub(crate) const MAX_DEPTH: usize = 16;

/// Where and how to connect: the address and what to send first.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) address: Address,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: i64,
    /// The name lookups and unix connects under way, shared by every
    /// connection to this endpoint.
    pub(crate) opening: Arc<Opening>,
}

impl Endpoint {
    pub(crate) fn new(
        address: Address,
        username: Option<String>,
        password: Option<String>,
        db: i64,
    ) -> Self {
        Endpoint {
            address,
            username,
            password,
            db,
            opening: Arc::default(),
        }
    }
}

/// A node's address.
#[derive(Clone)]
pub(crate) enum Address {
    Tcp {
        host: String,
        port: u16,
    },
    #[cfg(feature = "tls")]
    Tls {
        host: String,
        port: u16,
        config: Arc<rustls::ClientConfig>,
    },
    Unix(PathBuf),
}

/// A TLS session over TCP, driven by hand: rustls' own `Stream` loops on
/// the socket until a whole record is in, each read bounded by the socket
/// timeout alone, so a server that trickles a record would hold it.
#[cfg(feature = "tls")]
struct Tls {
    conn: rustls::ClientConnection,
    sock: TcpStream,
}

/// The socket under a [`Wire`].
enum Stream {
    Tcp(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<Tls>),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Stream {
    fn set_timeouts(&self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(timeout)?;
        self.set_write_timeout(timeout)
    }

    fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        let timeout = Some(timeout.max(MIN_IO_TIMEOUT));
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.sock.set_read_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    fn set_write_timeout(&self, timeout: Duration) -> io::Result<()> {
        let timeout = Some(timeout.max(MIN_IO_TIMEOUT));
        match self {
            Stream::Tcp(s) => s.set_write_timeout(timeout),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.sock.set_write_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_write_timeout(timeout),
        }
    }

    /// Whether TLS records are still waiting to be written to the socket.
    fn wants_write(&self) -> bool {
        match self {
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.conn.wants_write(),
            _ => false,
        }
    }

    /// At most one blocking read from the socket into `buf`. `Ok(0)`: the
    /// server closed the connection. [`io::ErrorKind::Interrupted`]: nothing
    /// for the caller yet, ask again (TLS: part of a record came).
    fn read_step(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.read_step(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }

    /// One read of what the socket holds now, without waiting:
    /// `WouldBlock` when it holds nothing. With TLS, only plaintext
    /// decrypted already is taken.
    fn read_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => recv_now(s, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.conn.reader().read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => recv_now(s, buf),
        }
    }

    /// At most one blocking write to the socket: how many of `bytes` it
    /// took (TLS may take none while it sends the records of earlier ones,
    /// and is called with none to flush them).
    fn write_step(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let written = match self {
            Stream::Tcp(s) => s.write(bytes),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => return s.write_step(bytes),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(bytes),
        };
        match written {
            Ok(0) if !bytes.is_empty() => Err(io::ErrorKind::WriteZero.into()),
            other => other,
        }
    }
}

/// One read of what the socket holds now: `recv` with `MSG_DONTWAIT`, one
/// system call, the socket left blocking for the reads that wait.
#[cfg(unix)]
fn recv_now(socket: impl std::os::fd::AsFd, buf: &mut [u8]) -> io::Result<usize> {
    let (read, _) = rustix::net::recv(socket, buf, rustix::net::RecvFlags::DONTWAIT)?;
    Ok(read)
}

/// One read of what the socket holds now, the socket non-blocking for it.
#[cfg(not(unix))]
fn recv_now(socket: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    socket.set_nonblocking(true)?;
    let read = socket.read(buf);
    socket.set_nonblocking(false)?;
    read
}

#[cfg(feature = "tls")]
impl Tls {
    fn read_step(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.conn.reader().read(buf) {
            // No plaintext yet (rustls' `WouldBlock`): read the socket.
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
        let got = self.conn.read_tls(&mut self.sock)?;
        self.conn.process_new_packets().map_err(tls_error)?;
        match self.conn.reader().read(buf) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock && got > 0 => {
                Err(io::ErrorKind::Interrupted.into())
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Ok(0),
            other => other,
        }
    }

    fn write_step(&mut self, bytes: &[u8]) -> io::Result<usize> {
        // Taking plaintext never blocks; then one socket write of records.
        let taken = if bytes.is_empty() {
            0
        } else {
            self.conn.writer().write(bytes)?
        };
        if !self.conn.wants_write() {
            return match taken {
                0 if !bytes.is_empty() => Err(io::ErrorKind::WriteZero.into()),
                n => Ok(n),
            };
        }
        match self.conn.write_tls(&mut self.sock) {
            Ok(0) if taken == 0 => Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => Ok(taken),
            Err(err) if taken == 0 => Err(err),
            // The plaintext is taken: the next step reports the socket's
            // error, if it is still there.
            Err(_) => Ok(taken),
        }
    }

    /// Completes the handshake by `deadline`, all of it: each socket read
    /// or write waits only what is left.
    fn handshake(&mut self, deadline: Instant) -> io::Result<()> {
        while self.conn.is_handshaking() || self.conn.wants_write() {
            let left = left_before(deadline, "the TLS handshake")?;
            let left = Some(left.max(MIN_IO_TIMEOUT));
            self.sock.set_read_timeout(left)?;
            self.sock.set_write_timeout(left)?;
            if self.conn.wants_write() {
                if self.conn.write_tls(&mut self.sock)? == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                continue;
            }
            if self.conn.read_tls(&mut self.sock)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the TLS handshake",
                ));
            }
            if let Err(err) = self.conn.process_new_packets() {
                // Tell the server why, if it still listens.
                let _ = self.conn.write_tls(&mut self.sock);
                return Err(tls_error(err));
            }
        }
        Ok(())
    }
}

/// A rustls error as the I/O error redis-rs wraps (see
/// [`classify`](crate::classify)).
#[cfg(feature = "tls")]
fn tls_error(err: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, err)
}

/// Sockets refuse a zero timeout (it would mean "none").
const MIN_IO_TIMEOUT: Duration = Duration::from_micros(100);

/// The largest [`timeout_slack`].
const MAX_TIMEOUT_SLACK: Duration = Duration::from_millis(2);

/// How far a socket's timeout may be from the time left before the
/// deadline and still be kept: 1/16 of the node timeout, 2 ms at most (so
/// 2 ms for the default 50 ms node timeout, 1 ms for 16 ms).
///
/// Setting the timeouts costs a `setsockopt` call each, which were the
/// most frequent system call of a lock cycle when made before every
/// command. Every call's deadline is "now + node timeout" and each
/// connection starts with the node timeout as its socket timeout, so
/// normally the time left when the socket is read or written is within
/// microseconds of its timeout and nothing needs to be set. Since the
/// timeouts are checked before every socket read and write, a read or a
/// write gives up at most the slack after its deadline, however the bytes
/// trickle in; and it never gives up more than the slack before it (a
/// shortened timeout is raised again), which a node timeout can spare.
pub(crate) fn timeout_slack(node_timeout: Duration) -> Duration {
    (node_timeout / 16).min(MAX_TIMEOUT_SLACK)
}

/// `timeout` from now (an hour at most is ever asked for).
pub(crate) fn deadline_in(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).unwrap_or(now)
}

/// The time left before `deadline`, or a timeout error naming `what`.
fn left_before(deadline: Instant, what: &str) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(out_of_time(what));
    }
    Ok(left)
}

/// The error of `what` not done by its deadline.
fn out_of_time(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("{what}: the time ran out (node timeout)"),
    )
}

fn is_timeout(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// The server closed the connection.
fn closed() -> RedisError {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the server closed the connection",
    )
    .into()
}

/// A reply that breaks the protocol or its budget.
fn protocol_error(detail: String) -> RedisError {
    RedisError::from((ErrorKind::Parse, "protocol error", detail))
}

/// How much of a reply has arrived, and whether it is whole: each header is
/// checked as soon as its line is in, so a reply that would break the
/// budget fails before its body is read.
#[derive(Default)]
struct Framer {
    /// How far the current reply is checked, from its start.
    checked: usize,
    /// Elements still due in each open aggregate, outermost first.
    open: Vec<u64>,
}

impl Framer {
    /// Scans `bytes`, the buffered bytes from the start of the current
    /// reply, on from where it stopped. `Some(length)` once the reply is
    /// whole; `None` while more is due.
    ///
    /// # Errors
    ///
    /// A protocol error for a reply that takes or announces more than
    /// `budget` bytes, or breaks RESP (see the module docs).
    fn scan(&mut self, bytes: &[u8], budget: usize) -> Result<Option<usize>, RedisError> {
        let over = |size: usize| {
            protocol_error(format!(
                "a reply of {size} bytes or more, over the budget of {budget} bytes a reply"
            ))
        };
        loop {
            let start = self.checked;
            let Some(line) = crate::reply::line_end(&bytes[start..]) else {
                if bytes.len() > budget {
                    return Err(over(bytes.len()));
                }
                return Ok(None);
            };
            let header = &bytes[start..start + line];
            let after = start + line + 2;
            if after > budget {
                return Err(over(after));
            }
            let kind = header.first().copied().unwrap_or(b'\r');
            let length = || -> Result<i64, RedisError> {
                std::str::from_utf8(&header[1..])
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .ok_or_else(|| {
                        protocol_error(format!(
                            "a length that is not a number after {:?}",
                            kind as char
                        ))
                    })
            };
            let negative = |n: i64| {
                protocol_error(format!(
                    "a negative length {n} after {:?} (only $-1 and *-1 are null)",
                    kind as char
                ))
            };
            match kind {
                b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => self.checked = after,
                b'$' | b'!' | b'=' => match length()? {
                    -1 if kind == b'$' => self.checked = after,
                    n => {
                        let size = usize::try_from(n).map_err(|_| negative(n))?;
                        let end = after.saturating_add(size).saturating_add(2);
                        if end > budget {
                            return Err(over(end));
                        }
                        if bytes.len() < end {
                            return Ok(None);
                        }
                        self.checked = end;
                    }
                },
                b'*' | b'~' | b'>' | b'%' | b'|' => match length()? {
                    -1 if kind == b'*' => self.checked = after,
                    n => {
                        let count = u64::try_from(n).map_err(|_| negative(n))?;
                        let elements = match kind {
                            b'%' => count.saturating_mul(2),
                            // An attribute map, then the value it is about.
                            b'|' => count.saturating_mul(2).saturating_add(1),
                            _ => count,
                        };
                        // Every element takes 3 bytes at least (`_\r\n`).
                        let least = elements.saturating_mul(3).saturating_add(after as u64);
                        if least > budget as u64 {
                            return Err(over(usize::try_from(least).unwrap_or(usize::MAX)));
                        }
                        self.checked = after;
                        if elements > 0 {
                            if self.open.len() >= MAX_DEPTH {
                                return Err(protocol_error(format!(
                                    "a reply nested deeper than {MAX_DEPTH}"
                                )));
                            }
                            self.open.push(elements);
                            continue;
                        }
                    }
                },
                other => {
                    return Err(protocol_error(format!(
                        "a reply that begins with byte {other:#04x}, not a RESP type"
                    )))
                }
            }
            // One element is whole: close the aggregates it completes.
            loop {
                match self.open.last_mut() {
                    None => {
                        let whole = self.checked;
                        self.checked = 0;
                        return Ok(Some(whole));
                    }
                    Some(due) if *due > 1 => {
                        *due -= 1;
                        break;
                    }
                    Some(_) => {
                        self.open.pop();
                    }
                }
            }
        }
    }
}

/// The first size of a connection's read buffer, and what it is shrunk back
/// to after a larger reply.
const READ_CHUNK: usize = 16 * 1024;

/// How many times [`Wire::read_ready`] reads the socket at most: 64 KiB,
/// far more than the replies of a batch, far less than what a server that
/// never stops sending could keep it reading (a megabyte of push data, the
/// budget: docs/benchmarks.md's poller row says how long it took).
const READY_READS: usize = 4;

/// An open connection to a node.
pub(crate) struct Wire {
    stream: Stream,
    parser: Parser,
    /// Bytes read from the socket: `inbox[taken..filled]` are not returned
    /// as replies yet (the start of the next reply, or several).
    inbox: Vec<u8>,
    taken: usize,
    filled: usize,
    framer: Framer,
    /// Bytes of push data skipped since the last reply: they count against
    /// the next reply's budget.
    pushed: usize,
    /// Command bytes accepted but not yet handed to the socket: the rest of
    /// a write that timed out. They go out before anything else.
    unsent: Vec<u8>,
    /// The read timeout the socket has now.
    read_timeout: Duration,
    /// The write timeout the socket has now.
    write_timeout: Duration,
    /// See [`timeout_slack`].
    slack: Duration,
    /// What the server said it is in the handshake, where it said so.
    server: Option<ServerFacts>,
}

impl Wire {
    /// Opens the connection within `timeout` (name lookup, TCP connect to
    /// each address in turn, TLS handshake: all of it), then authenticates,
    /// selects the database, names the client and loads `scripts` (a
    /// Sentinel or another server without scripting fails here, see
    /// [`crate::ops::preload`]) in one round trip bounded by `timeout`
    /// again.
    pub(crate) fn connect(
        endpoint: &Endpoint,
        timeout: Duration,
        scripts: &[&str],
    ) -> Result<Wire, RedisError> {
        let stream = open(endpoint, deadline_in(timeout))?;
        stream.set_timeouts(timeout)?;
        let mut wire = Wire {
            stream,
            parser: Parser::new(),
            inbox: vec![0; READ_CHUNK],
            taken: 0,
            filled: 0,
            framer: Framer::default(),
            pushed: 0,
            unsent: Vec::new(),
            read_timeout: timeout,
            write_timeout: timeout,
            slack: timeout_slack(timeout),
            server: None,
        };
        wire.hello(endpoint, scripts, deadline_in(timeout))?;
        Ok(wire)
    }

    /// What the server said it is in the handshake (`None` where it could
    /// not be asked, see [`crate::MIN_REDIS_VERSION`]).
    pub(crate) fn server(&self) -> Option<&ServerFacts> {
        self.server.as_ref()
    }

    /// The handshake: `AUTH`, `SELECT`, `CLIENT SETINFO`, `HELLO` and
    /// `SCRIPT LOAD` in one write, all answered by `deadline`. An `AUTH`
    /// refusal is an authentication error; errors to `CLIENT SETINFO`
    /// (older than Redis 7.2) are ignored; `HELLO` (no arguments: it only
    /// reports, the protocol stays RESP2) refuses a server older than
    /// [`crate::MIN_REDIS_VERSION`] (see [`judge_hello`]); `NOPERM` for
    /// `SCRIPT LOAD` is tolerated (calls then fall back to `EVAL`).
    fn hello(
        &mut self,
        endpoint: &Endpoint,
        scripts: &[&str],
        deadline: Instant,
    ) -> Result<(), RedisError> {
        let mut packed = Vec::new();
        let mut resp = Resp(&mut packed);
        let auth = endpoint.password.is_some();
        if let Some(password) = &endpoint.password {
            match &endpoint.username {
                Some(user) => resp
                    .command(3)
                    .bulk(b"AUTH")
                    .bulk(user.as_bytes())
                    .bulk(password.as_bytes()),
                None => resp.command(2).bulk(b"AUTH").bulk(password.as_bytes()),
            };
        }
        let select = endpoint.db != 0;
        if select {
            resp.command(2)
                .bulk(b"SELECT")
                .bulk(endpoint.db.to_string().as_bytes());
        }
        let version = env!("CARGO_PKG_VERSION");
        resp.command(4)
            .bulk(b"CLIENT")
            .bulk(b"SETINFO")
            .bulk(b"LIB-NAME")
            .bulk(crate::address::LIB_NAME.as_bytes())
            .command(4)
            .bulk(b"CLIENT")
            .bulk(b"SETINFO")
            .bulk(b"LIB-VER")
            .bulk(version.as_bytes())
            .command(1)
            .bulk(b"HELLO");
        for script in scripts {
            resp.command(3)
                .bulk(b"SCRIPT")
                .bulk(b"LOAD")
                .bulk(script.as_bytes());
        }
        self.write(&packed, deadline)?;
        if auth {
            if let Value::ServerError(err) = self.read(deadline)? {
                let detail = RedisError::from(err).to_string();
                return Err(RedisError::from((
                    ErrorKind::AuthenticationFailed,
                    "authentication failed",
                    detail,
                )));
            }
        }
        if select {
            if let Value::ServerError(err) = self.read(deadline)? {
                return Err(err.into());
            }
        }
        for _ in 0..2 {
            self.read(deadline)?;
        }
        let server = judge_hello(self.read(deadline)?);
        let mut script_error = None;
        for _ in scripts {
            if let Value::ServerError(err) = self.read(deadline)? {
                if err.kind() != Some(ServerErrorKind::NoPerm) && script_error.is_none() {
                    script_error = Some(RedisError::from(err));
                }
            }
        }
        match (server, script_error) {
            // No SCRIPT: not a Redis master at all (a Sentinel, a proxy),
            // whatever its HELLO said.
            (Err(_), Some(script))
                if script
                    .detail()
                    .is_some_and(|d| d.starts_with("unknown command")) =>
            {
                Err(script)
            }
            (Err(err), _) => Err(err),
            (Ok(_), Some(script)) => Err(script),
            (Ok(server), None) => {
                self.server = server;
                Ok(())
            }
        }
    }

    /// The socket's read timeout.
    #[cfg(test)]
    pub(crate) fn read_timeout(&self) -> Duration {
        self.read_timeout
    }

    /// Sets the socket's read timeout, unless it is within the slack of
    /// `left` already.
    fn arm_read(&mut self, left: Duration) -> io::Result<()> {
        if left.abs_diff(self.read_timeout) > self.slack {
            self.stream.set_read_timeout(left)?;
            self.read_timeout = left;
        }
        Ok(())
    }

    /// As [`arm_read`](Self::arm_read), for writes.
    fn arm_write(&mut self, left: Duration) -> io::Result<()> {
        if left.abs_diff(self.write_timeout) > self.slack {
            self.stream.set_write_timeout(left)?;
            self.write_timeout = left;
        }
        Ok(())
    }

    /// What a caller waiting for this connection's replies together with
    /// others' may wait on: the socket, unless bytes are buffered already
    /// (read, or still to be written) or TLS holds plaintext, which a read
    /// takes without waiting.
    #[cfg(unix)]
    pub(crate) fn readiness(&self) -> redlock_core::backend::Readiness<'_> {
        use redlock_core::backend::Readiness;
        use std::os::fd::AsFd;
        if self.taken < self.filled || self.has_unsent() {
            return Readiness::Now;
        }
        match &self.stream {
            Stream::Tcp(s) => Readiness::On(s.as_fd()),
            // rustls wants the socket read only when it holds no plaintext.
            #[cfg(feature = "tls")]
            Stream::Tls(s) if s.conn.wants_read() => Readiness::On(s.sock.as_fd()),
            #[cfg(feature = "tls")]
            Stream::Tls(_) => Readiness::Now,
            Stream::Unix(s) => Readiness::On(s.as_fd()),
        }
    }

    /// Whether command bytes accepted earlier have not reached the socket.
    pub(crate) fn has_unsent(&self) -> bool {
        !self.unsent.is_empty() || self.stream.wants_write()
    }

    /// Whether the server sent something since the last reply was read
    /// that is not a whole reply: part of one, or push data nobody asked
    /// for.
    pub(crate) fn mid_reply(&self) -> bool {
        self.taken < self.filled || self.pushed > 0
    }

    /// Sends `bytes` behind any unsent ones, by `deadline`. When the write
    /// times out, what is left of them is kept and goes out first on the
    /// next write or [`flush`](Self::flush): the node never sees half a
    /// command followed by another.
    pub(crate) fn write(&mut self, bytes: &[u8], deadline: Instant) -> io::Result<()> {
        if self.has_unsent() {
            self.unsent.extend_from_slice(bytes);
            return self.flush(deadline);
        }
        let mut done = 0;
        let result = self.push(bytes, &mut done, deadline);
        if result.is_err() {
            self.unsent.extend_from_slice(&bytes[done..]);
        }
        result
    }

    /// Sends the bytes left over from earlier writes, by `deadline`.
    pub(crate) fn flush(&mut self, deadline: Instant) -> io::Result<()> {
        let mut unsent = std::mem::take(&mut self.unsent);
        let mut done = 0;
        let result = self.push(&unsent, &mut done, deadline);
        unsent.drain(..done);
        if unsent.capacity() > KEPT_UNSENT && unsent.is_empty() {
            unsent = Vec::new();
        }
        self.unsent = unsent;
        result
    }

    /// Hands `bytes[*done..]` to the socket (and, with TLS, its records to
    /// the network) one socket write at a time until all are out or
    /// `deadline` passes, counting in `done` the bytes taken.
    fn push(&mut self, bytes: &[u8], done: &mut usize, deadline: Instant) -> io::Result<()> {
        while *done < bytes.len() || self.stream.wants_write() {
            let left = left_before(deadline, "sending the commands")?;
            self.arm_write(left)?;
            match self.stream.write_step(&bytes[*done..]) {
                Ok(n) => *done += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                // Given up before its deadline by the slack: try again.
                Err(err) if is_timeout(&err) && self.later_than_slack(deadline) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Whether more than the slack is left before `deadline`.
    fn later_than_slack(&self, deadline: Instant) -> bool {
        deadline.saturating_duration_since(Instant::now()) > self.slack
    }

    /// Reads the next reply by `deadline` (RESP3 push data is skipped). A
    /// reply already buffered is returned even when the deadline has
    /// passed. A read that times out loses nothing: the next one goes on
    /// where it stopped.
    ///
    /// # Errors
    ///
    /// A timeout; the server closed the connection; a protocol error (see
    /// the module docs), after which the connection must be dropped.
    pub(crate) fn read(&mut self, deadline: Instant) -> Result<Value, RedisError> {
        loop {
            match self.take_buffered()? {
                Some(reply) => return Ok(reply),
                None => self.fill(deadline)?,
            }
        }
    }

    /// The next reply if the server sent it whole already (RESP3 push data
    /// is skipped), without waiting: `None` when it has not. The socket is
    /// read [`READY_READS`] times at most, so a server that keeps sending
    /// (push data without end) cannot hold the call: what it sent later is
    /// read later.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read), but never a timeout.
    pub(crate) fn read_ready(&mut self) -> Result<Option<Value>, RedisError> {
        for _ in 0..READY_READS {
            if let Some(reply) = self.take_buffered()? {
                return Ok(Some(reply));
            }
            self.make_room()?;
            match self.stream.read_now(&mut self.inbox[self.filled..]) {
                Ok(0) => return Err(closed()),
                Ok(n) => self.filled += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(err) => return Err(err.into()),
            }
        }
        self.take_buffered()
    }

    /// The next reply in the buffer, if it holds a whole one.
    fn take_buffered(&mut self) -> Result<Option<Value>, RedisError> {
        loop {
            let budget = MAX_REPLY_BYTES.saturating_sub(self.pushed);
            let buffered = &self.inbox[self.taken..self.filled];
            let Some(length) = self.framer.scan(buffered, budget)? else {
                return Ok(None);
            };
            let reply = &self.inbox[self.taken..self.taken + length];
            self.taken += length;
            // The lock commands' replies without redis-rs's parser, which
            // costs more than the rest of a reply's handling (reply.rs).
            let value = match crate::reply::decode(reply) {
                Some(value) => Ok(value),
                None => self.parser.parse_value(reply),
            };
            if self.taken == self.filled {
                self.taken = 0;
                self.filled = 0;
                if self.inbox.len() > READ_CHUNK {
                    self.inbox = vec![0; READ_CHUNK];
                }
            }
            match value {
                Ok(Value::Push { .. }) => self.pushed += length,
                Ok(reply) => {
                    self.pushed = 0;
                    return Ok(Some(reply));
                }
                Err(err) => {
                    self.parser = Parser::new();
                    return Err(err);
                }
            }
        }
    }

    /// Reads the socket once more (and again while it only times out
    /// before the deadline's slack), by `deadline`.
    fn fill(&mut self, deadline: Instant) -> Result<(), RedisError> {
        self.make_room()?;
        loop {
            let left = left_before(deadline, "reading the reply")?;
            self.arm_read(left)?;
            match self.stream.read_step(&mut self.inbox[self.filled..]) {
                Ok(0) => return Err(closed()),
                Ok(n) => {
                    self.filled += n;
                    return Ok(());
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) if is_timeout(&err) && self.later_than_slack(deadline) => {}
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Room in the buffer for the next read: what was taken moved out, or
    /// the buffer grown (up to the reply budget).
    fn make_room(&mut self) -> Result<(), RedisError> {
        if self.filled == self.inbox.len() {
            if self.taken > 0 {
                self.inbox.copy_within(self.taken..self.filled, 0);
                self.filled -= self.taken;
                self.taken = 0;
            } else {
                // The framer refuses a reply past the budget first.
                let size = (self.inbox.len() * 2).min(MAX_REPLY_BYTES + READ_CHUNK);
                if size == self.inbox.len() {
                    return Err(protocol_error(format!(
                        "a reply over the budget of {MAX_REPLY_BYTES} bytes"
                    )));
                }
                self.inbox.resize(size, 0);
            }
        }
        Ok(())
    }
}

/// An emptied unsent buffer larger than this is given back.
const KEPT_UNSENT: usize = 64 * 1024;

/// Blocking calls the standard library gives no timeout (a host name
/// lookup, a unix socket connect to a server whose backlog is full), run on
/// a thread of their own so that the caller stops waiting at its deadline.
/// One runs at a time per endpoint: a caller finds the one under way and
/// waits for it (or takes its result, if it finished after its own caller
/// gave up), so a lookup that hangs holds one thread, not one per attempt.
pub(crate) struct Background<T> {
    current: Mutex<Option<Arc<Job<T>>>>,
}

impl<T> Default for Background<T> {
    fn default() -> Self {
        Background {
            current: Mutex::new(None),
        }
    }
}

struct Job<T> {
    /// `None` while it runs; then its result, until a caller takes it.
    state: Mutex<Option<Option<io::Result<T>>>>,
    done: Condvar,
}

impl<T: Send + 'static> Background<T> {
    /// `work`'s result, or a timeout at `deadline` (`work` then runs on,
    /// and the next caller takes its result). `name` names the thread,
    /// `what` the work in the timeout error.
    fn run<F>(&self, deadline: Instant, (name, what): (&str, &str), work: F) -> io::Result<T>
    where
        F: FnOnce() -> io::Result<T> + Clone + Send + 'static,
    {
        loop {
            let job = self.job(name, &work)?;
            let mut state = job.state.lock();
            loop {
                match &mut *state {
                    Some(result) => match result.take() {
                        Some(result) => {
                            drop(state);
                            let mut current = self.current.lock();
                            if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &job)) {
                                *current = None;
                            }
                            return result;
                        }
                        // Another caller took it: start anew.
                        None => break,
                    },
                    None => {
                        if job.done.wait_until(&mut state, deadline).timed_out() {
                            return Err(out_of_time(what));
                        }
                    }
                }
            }
        }
    }

    /// The job under way, or a new one running `work`.
    fn job<F>(&self, name: &str, work: &F) -> io::Result<Arc<Job<T>>>
    where
        F: FnOnce() -> io::Result<T> + Clone + Send + 'static,
    {
        let mut current = self.current.lock();
        if let Some(job) = &*current {
            return Ok(Arc::clone(job));
        }
        let job = Arc::new(Job {
            state: Mutex::new(None),
            done: Condvar::new(),
        });
        let theirs = Arc::clone(&job);
        let work = work.clone();
        std::thread::Builder::new()
            .name(format!("redlock-{name}"))
            .spawn(move || {
                let result = work();
                *theirs.state.lock() = Some(Some(result));
                theirs.done.notify_all();
            })?;
        *current = Some(Arc::clone(&job));
        Ok(job)
    }
}

/// What opening a connection to an endpoint may have to wait for on a
/// thread of its own (see [`Background`]).
#[derive(Default)]
pub(crate) struct Opening {
    lookup: Background<Vec<SocketAddr>>,
    #[cfg(unix)]
    unix: Background<UnixStream>,
}

/// Opens the socket (and completes the TLS handshake) by `deadline`.
fn open(endpoint: &Endpoint, deadline: Instant) -> Result<Stream, RedisError> {
    match &endpoint.address {
        Address::Tcp { host, port } => Ok(Stream::Tcp(tcp(endpoint, host, *port, deadline)?)),
        #[cfg(feature = "tls")]
        Address::Tls { host, port, config } => {
            let name = rustls::pki_types::ServerName::try_from(host.as_str())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
                .to_owned();
            let conn = rustls::ClientConnection::new(Arc::clone(config), name)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            let sock = tcp(endpoint, host, *port, deadline)?;
            let mut tls = Tls { conn, sock };
            tls.handshake(deadline)?;
            Ok(Stream::Tls(Box::new(tls)))
        }
        #[cfg(unix)]
        Address::Unix(path) => {
            let path = path.clone();
            let connect = move || UnixStream::connect(path);
            let stream = endpoint.opening.unix.run(
                deadline,
                ("unix-connect", "connecting to the unix socket"),
                connect,
            )?;
            Ok(Stream::Unix(stream))
        }
        #[cfg(not(unix))]
        Address::Unix(_) => Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "unix sockets are not supported on this platform",
        ))),
    }
}

/// A TCP connection by `deadline` to the first address of `host` that
/// answers, each address tried with the time left.
fn tcp(
    endpoint: &Endpoint,
    host: &str,
    port: u16,
    deadline: Instant,
) -> Result<TcpStream, RedisError> {
    let mut last = None;
    for addr in resolve(endpoint, host, port, deadline)? {
        let left = match left_before(deadline, "connecting") {
            Ok(left) => left,
            Err(err) => {
                last = Some(err);
                break;
            }
        };
        match TcpStream::connect_timeout(&addr, left) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(err) => last = Some(err),
        }
    }
    Err(match last {
        Some(err) => err.into(),
        None => RedisError::from((
            ErrorKind::InvalidClientConfig,
            "the host name resolves to no address",
        )),
    })
}

/// The addresses of `host`: an IP address as it is, a name looked up on a
/// thread of its own by `deadline`.
fn resolve(
    endpoint: &Endpoint,
    host: &str,
    port: u16,
    deadline: Instant,
) -> io::Result<Vec<SocketAddr>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let name = host.to_owned();
    let lookup = move || {
        (name.as_str(), port)
            .to_socket_addrs()
            .map(Iterator::collect)
    };
    let what = ("lookup", "looking up the host name");
    endpoint.opening.lookup.run(deadline, what, lookup)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pool::tests::read_words;
    use std::net::TcpListener;
    use std::sync::mpsc;

    fn tcp_endpoint(port: u16) -> Endpoint {
        Endpoint::new(
            Address::Tcp {
                host: "127.0.0.1".to_owned(),
                port,
            },
            None,
            None,
            0,
        )
    }

    /// Runs `call` on a thread of its own and waits for it at most
    /// `bound`: a call that hangs fails the test instead of hanging it.
    pub(crate) fn within<T: Send + 'static>(
        bound: Duration,
        call: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let (done, result) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(call());
        });
        result
            .recv_timeout(bound)
            .map_err(|_| format!("still running after {bound:?}"))
            .expect("the call to end within its bound")
    }

    /// A fake server that answers the handshake with OK and `PING` with
    /// `pong`: its chunks written `pause` apart.
    fn pong_in_chunks(chunks: &'static [&'static [u8]], pause: Duration) -> u16 {
        let pong = move |stream: &mut TcpStream| {
            chunks.iter().enumerate().all(|(i, chunk)| {
                if i > 0 {
                    std::thread::sleep(pause);
                }
                stream.write_all(chunk).is_ok()
            })
        };
        misbehaving_on_ping(move |stream| {
            // Every later `PING` the same way, the rest `+OK`.
            let mut reader = io::BufReader::new(stream.try_clone().expect("clone"));
            let mut answered = pong(stream);
            while answered {
                let Some(words) = read_words(&mut reader) else {
                    return;
                };
                answered = if words[0] == "PING" {
                    pong(stream)
                } else {
                    stream.write_all(b"+OK\r\n").is_ok()
                };
            }
        })
    }

    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

    #[test]
    fn a_read_that_times_out_mid_reply_loses_nothing() {
        let timeout = Duration::from_millis(100);
        let port = pong_in_chunks(&[b"+PO", b"NG\r\n"], timeout * 3);
        let mut wire = Wire::connect(&tcp_endpoint(port), timeout, &[]).expect("connects");
        wire.write(PING, deadline_in(timeout)).expect("sent");
        let err = wire
            .read(deadline_in(timeout))
            .expect_err("only half the reply so far");
        assert!(err.is_timeout(), "{err}");
        assert!(wire.mid_reply());
        assert_eq!(
            wire.read(deadline_in(Duration::from_secs(5)))
                .expect("the rest"),
            Value::SimpleString("PONG".to_owned())
        );
        assert!(!wire.mid_reply());
    }

    /// A fake server on a free port that answers every command of the
    /// handshake `+OK` and, at the first `PING`, hands its connection to
    /// `misbehave`. Returns its port.
    fn misbehaving_on_ping(misbehave: impl FnOnce(&mut TcpStream) + Send + 'static) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            let Some(Ok(mut stream)) = listener.incoming().next() else {
                return;
            };
            let mut reader = io::BufReader::new(stream.try_clone().expect("clone"));
            while let Some(words) = read_words(&mut reader) {
                if words[0] == "PING" {
                    return misbehave(&mut stream);
                }
                let _ = stream.write_all(b"+OK\r\n");
            }
        });
        port
    }

    /// A never-ending status reply, one byte every 100 µs: no socket read
    /// ever waits long enough to time out.
    #[test]
    fn bug3_a_trickled_reply_ends_at_the_deadline() {
        let port = misbehaving_on_ping(|stream| {
            let _ = stream.write_all(b"+");
            while stream.write_all(b"a").is_ok() {
                std::thread::sleep(Duration::from_micros(100));
            }
        });
        let timeout = Duration::from_millis(100);
        let err = within(timeout * 10, move || {
            let mut wire = Wire::connect(&tcp_endpoint(port), timeout, &[]).expect("connects");
            wire.write(PING, deadline_in(timeout)).expect("sent");
            let err = wire.read(deadline_in(timeout)).expect_err("never whole");
            assert!(wire.mid_reply());
            err
        });
        assert!(err.is_timeout(), "{err}");
    }

    /// Scans `bytes` fed one byte at a time, as a trickling server would
    /// send them: where the first reply ends, or the error.
    fn scan_trickled(bytes: &[u8]) -> Result<Option<usize>, RedisError> {
        let mut framer = Framer::default();
        for end in 1..=bytes.len() {
            if let Some(whole) = framer.scan(&bytes[..end], MAX_REPLY_BYTES)? {
                return Ok(Some(whole));
            }
        }
        Ok(None)
    }

    #[test]
    fn whole_replies_are_found_however_their_bytes_come() {
        let replies: [&[u8]; 12] = [
            b"+OK\r\n",
            b":-12\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"$0\r\n\r\n",
            b"$5\r\nab\r\nc\r\n",
            b"*2\r\n$3\r\nfoo\r\n*1\r\n:1\r\n",
            b"%1\r\n+k\r\n*0\r\n",
            b"|1\r\n+k\r\n+v\r\n:7\r\n",
            b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nx\r\n",
            b"=8\r\ntxt:abcd\r\n",
            b"~2\r\n_\r\n#t\r\n",
        ];
        for reply in replies {
            let mut more = reply.to_vec();
            more.extend_from_slice(b"+NEXT\r\n");
            let whole = scan_trickled(&more).expect("valid");
            assert_eq!(
                whole,
                Some(reply.len()),
                "{:?}",
                String::from_utf8_lossy(reply)
            );
            let mut framer = Framer::default();
            assert_eq!(
                framer.scan(&more, MAX_REPLY_BYTES).expect("valid"),
                Some(reply.len())
            );
            redis::parse_redis_value(reply).expect("redis-rs parses what the framer passes");
        }
    }

    #[test]
    fn bug3_lengths_past_the_budget_or_negative_are_protocol_errors_at_once() {
        let huge = format!("${}\r\n", 1_u64 << 40);
        let many = format!("*{}\r\n", MAX_REPLY_BYTES);
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1);
        let bad: [&[u8]; 12] = [
            b"=-1\r\n",
            b"!-1\r\n",
            b"$-2\r\n",
            b"*-2\r\n",
            b"~-1\r\n",
            b">-1\r\n",
            b"%-1\r\n",
            b"$x\r\n",
            b"?\r\n",
            huge.as_bytes(),
            many.as_bytes(),
            deep.as_bytes(),
        ];
        for reply in bad {
            let err = scan_trickled(reply).expect_err(&String::from_utf8_lossy(reply));
            assert_eq!(err.kind(), ErrorKind::Parse, "{err}");
        }
        // A line that never ends fails once it is over the budget.
        let mut framer = Framer::default();
        let mut line = b"+".to_vec();
        line.resize(MAX_REPLY_BYTES, b'a');
        assert!(framer
            .scan(&line, MAX_REPLY_BYTES)
            .expect("not over")
            .is_none());
        line.push(b'a');
        assert!(framer.scan(&line, MAX_REPLY_BYTES).is_err());
        // Push data skipped before a reply counts against it.
        let mut framer = Framer::default();
        assert!(framer.scan(b"$5\r\nhello\r\n", 10).is_err());
    }

    /// A fake server that sends push data again and again (never a reply)
    /// after the handshake: its port.
    fn push_flood() -> u16 {
        misbehaving_on_ping(|stream| {
            let frames = b">2\r\n$7\r\nmessage\r\n$2\r\nhi\r\n".repeat(64);
            while stream.write_all(&frames).is_ok() {}
        })
    }

    #[test]
    fn bug3_push_data_without_end_ends_at_the_deadline_or_the_budget() {
        let port = push_flood();
        let timeout = Duration::from_secs(1);
        let err = within(timeout * 10, move || {
            let mut wire = Wire::connect(&tcp_endpoint(port), timeout, &[]).expect("connects");
            wire.write(PING, deadline_in(timeout)).expect("sent");
            let err = wire.read(deadline_in(timeout)).expect_err("no reply");
            assert!(wire.inbox.len() <= MAX_REPLY_BYTES + READ_CHUNK);
            err
        });
        // Loopback brings a megabyte of push data well within a second.
        assert!(err.is_timeout() || err.kind() == ErrorKind::Parse, "{err}");
    }

    /// The same server, read without waiting: each call reads a few
    /// chunks and says no reply is in, however long the push data goes on
    /// (reading it to the budget held the poller and ended in an error).
    #[test]
    fn bug3_push_data_without_end_holds_a_read_without_waiting_a_few_chunks() {
        let port = push_flood();
        let timeout = Duration::from_secs(1);
        within(timeout * 10, move || {
            let mut wire = Wire::connect(&tcp_endpoint(port), timeout, &[]).expect("connects");
            wire.write(PING, deadline_in(timeout)).expect("sent");
            // Until the flood fills a read, and then some.
            let flooded = deadline_in(timeout * 5);
            let mut calls = 0;
            while wire.pushed < READY_READS * READ_CHUNK && Instant::now() < flooded {
                let got = wire.read_ready().expect("push data so far");
                assert_eq!(got, None, "no reply");
                calls += 1;
            }
            assert!(calls > 1, "a read without waiting read it all at once");
            assert!(wire.pushed < MAX_REPLY_BYTES, "read to the budget");
        });
    }

    /// A read without waiting takes what the socket holds now and leaves
    /// it blocking, so that a read that waits afterwards blocks in the
    /// kernel (left non-blocking, it would spin until its reply came).
    #[cfg(unix)]
    #[test]
    fn a_read_without_waiting_leaves_the_socket_to_wait_for_the_next_read() {
        fn blocking(wire: &Wire) -> bool {
            let Stream::Tcp(s) = &wire.stream else {
                unreachable!("a TCP endpoint")
            };
            let flags = rustix::fs::fcntl_getfl(s).expect("flags");
            !flags.contains(rustix::fs::OFlags::NONBLOCK)
        }
        let (reply, replied) = mpsc::channel::<()>();
        let port = misbehaving_on_ping(move |stream| {
            // The first PONG once the test has looked without waiting,
            // a little later, so that the read after it must wait.
            let _ = replied.recv();
            std::thread::sleep(Duration::from_millis(50));
            let _ = stream.write_all(b"+PONG\r\n");
            // The second at once.
            let _ = stream.write_all(b"+PONG\r\n");
        });
        let timeout = Duration::from_secs(5);
        within(timeout * 4, move || {
            let mut wire = Wire::connect(&tcp_endpoint(port), timeout, &[]).expect("connects");
            wire.write(PING, deadline_in(timeout)).expect("sent");
            assert_eq!(wire.read_ready().expect("nothing yet"), None);
            assert!(blocking(&wire), "left non-blocking");
            reply.send(()).expect("server");
            let pong = wire.read(deadline_in(timeout)).expect("waited for");
            assert_eq!(pong, Value::SimpleString("PONG".into()));
            // The second is taken without waiting once it is in.
            let by = deadline_in(timeout);
            let second = loop {
                if let Some(reply) = wire.read_ready().expect("a reply") {
                    break reply;
                }
                assert!(Instant::now() < by, "the second PONG never came");
                std::thread::yield_now();
            };
            assert_eq!(second, Value::SimpleString("PONG".into()));
            assert!(blocking(&wire), "left non-blocking");
        });
    }

    #[test]
    fn a_name_lookup_runs_once_at_a_time_and_is_waited_for_until_the_deadline() {
        let background: Arc<Background<u32>> = Arc::default();
        let (release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(std::sync::Mutex::new(gate));
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let work = {
            let (gate, started) = (Arc::clone(&gate), Arc::clone(&started));
            move || {
                started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = gate.lock().map(|g| g.recv());
                Ok(7)
            }
        };
        let short = Duration::from_millis(20);
        for _ in 0..3 {
            let err = background
                .run(deadline_in(short), ("test", "testing"), work.clone())
                .expect_err("still blocked");
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        }
        // Three callers gave up; one job ran for them all.
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 1);
        release.send(()).expect("unblock");
        let got = background
            .run(
                deadline_in(Duration::from_secs(5)),
                ("test", "testing"),
                work.clone(),
            )
            .expect("its result");
        assert_eq!(got, 7);
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// A unix socket whose listener never accepts: once its backlog is
    /// full, a blocking connect waits forever. Filling the backlog takes
    /// `somaxconn` + 1 descriptors: where the process may not open that
    /// many, the test says so and checks nothing.
    #[cfg(unix)]
    #[test]
    #[allow(clippy::print_stderr)] // to say that it did not run
    fn bug3_a_unix_connect_to_a_full_backlog_ends_at_the_deadline() {
        let number = |text: Option<&str>| text.and_then(|t| t.trim().parse::<u64>().ok());
        let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn").ok();
        let limits = std::fs::read_to_string("/proc/self/limits").ok();
        let soft = limits.as_deref().and_then(|limits| {
            let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
            number(line.split_whitespace().nth(3))
        });
        match (number(somaxconn.as_deref()), soft) {
            (Some(backlog), Some(soft)) if backlog + 256 <= soft => {}
            other => {
                eprintln!("not run: needs somaxconn + 256 open files, have {other:?}");
                return;
            }
        }
        let dir = std::env::temp_dir().join(format!("redlock-wire-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("full.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let endpoint = Endpoint::new(Address::Unix(path.clone()), None, None, 0);
        let timeout = Duration::from_millis(200);
        let err = within(Duration::from_secs(60), move || {
            let mut open_ones = Vec::new();
            loop {
                let started = Instant::now();
                match open(&endpoint, deadline_in(timeout)) {
                    Ok(stream) => open_ones.push(stream),
                    Err(err) => {
                        assert!(started.elapsed() < timeout * 10, "{:?}", started.elapsed());
                        return err;
                    }
                }
                assert!(open_ones.len() < 100_000, "the backlog never filled");
            }
        });
        assert!(err.is_timeout(), "{err}");
        drop(listener);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A TLS "server" that answers the ClientHello with the header of a
    /// 16 KiB handshake record and then one byte of it at a time.
    #[cfg(feature = "tls")]
    #[test]
    fn bug3_a_trickled_tls_handshake_ends_at_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            let Some(Ok(mut stream)) = listener.incoming().next() else {
                return;
            };
            let mut hello = [0_u8; 512];
            let _ = stream.read(&mut hello);
            let _ = stream.write_all(&[0x16, 0x03, 0x03, 0x40, 0x00]);
            while stream.write_all(&[0x00]).is_ok() {
                std::thread::sleep(Duration::from_micros(100));
            }
        });
        let timeout = Duration::from_millis(200);
        let target = crate::RedisBackend::builder(format!("rediss://127.0.0.1:{port}"))
            .node_timeout(timeout)
            .target()
            .expect("target");
        let err = within(timeout * 10, move || {
            Wire::connect(&target.endpoint, timeout, &[])
                .err()
                .expect("never finishes")
        });
        assert!(err.is_timeout(), "{err}");
    }
}
