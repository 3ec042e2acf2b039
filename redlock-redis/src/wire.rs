//! One connection to a node, owned byte for byte: the socket (TCP, TLS or
//! unix), the reply parser, and the commands not yet handed to the socket.
//!
//! redis-rs's blocking `Connection` cannot be kept after a read timeout: it
//! then silently skips as many later replies as reads timed out, so after a
//! few timeouts on a frozen node nobody knows which reply is which. Here a
//! read that times out loses nothing (the parser keeps what it has read) and
//! a write that times out keeps the rest of its bytes for the next write, so
//! a connection with requests in flight stays usable and in order.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::Duration;
#[cfg(feature = "tls")]
use std::time::Instant;

use redis::{ErrorKind, Parser, RedisError, ServerErrorKind, Value};

use crate::scripts::Resp;

/// Where and how to connect: the address and what to send first.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) address: Address,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: i64,
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

/// The socket under a [`Wire`].
enum Stream {
    Tcp(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
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
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
        }
    }
}

/// Sockets refuse a zero timeout (it would mean "none").
const MIN_IO_TIMEOUT: Duration = Duration::from_micros(100);

/// An open connection to a node.
pub(crate) struct Wire {
    stream: Stream,
    parser: Parser,
    /// Command bytes accepted but not yet handed to the socket: the rest of
    /// a write that timed out. They go out before anything else.
    unsent: Vec<u8>,
    /// The read timeout the socket has now.
    read_timeout: Duration,
    /// The write timeout the socket has now.
    write_timeout: Duration,
}

impl Wire {
    /// Connects within `timeout`, then authenticates, selects the database,
    /// names the client and loads `scripts` (a Sentinel or another server
    /// without scripting fails here, see [`crate::scripts::preload`]) in one
    /// round trip bounded by `timeout` again.
    pub(crate) fn connect(
        endpoint: &Endpoint,
        timeout: Duration,
        scripts: &[&str],
    ) -> Result<Wire, RedisError> {
        let stream = open(&endpoint.address, timeout)?;
        stream.set_timeouts(timeout)?;
        let mut wire = Wire {
            stream,
            parser: Parser::new(),
            unsent: Vec::new(),
            read_timeout: timeout,
            write_timeout: timeout,
        };
        wire.hello(endpoint, scripts)?;
        Ok(wire)
    }

    /// The handshake: `AUTH`, `SELECT`, `CLIENT SETINFO` and `SCRIPT LOAD`
    /// in one write. An `AUTH` refusal is an authentication error; errors
    /// to `CLIENT SETINFO` (older than Redis 7.2) are ignored; `NOPERM` for
    /// `SCRIPT LOAD` is tolerated (calls then fall back to `EVAL`).
    fn hello(&mut self, endpoint: &Endpoint, scripts: &[&str]) -> Result<(), RedisError> {
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
            .bulk(version.as_bytes());
        for script in scripts {
            resp.command(3)
                .bulk(b"SCRIPT")
                .bulk(b"LOAD")
                .bulk(script.as_bytes());
        }
        self.write(&packed)?;
        if auth {
            if let Value::ServerError(err) = self.read()? {
                let detail = RedisError::from(err).to_string();
                return Err(RedisError::from((
                    ErrorKind::AuthenticationFailed,
                    "authentication failed",
                    detail,
                )));
            }
        }
        if select {
            if let Value::ServerError(err) = self.read()? {
                return Err(err.into());
            }
        }
        for _ in 0..2 {
            self.read()?;
        }
        for _ in scripts {
            if let Value::ServerError(err) = self.read()? {
                if err.kind() != Some(ServerErrorKind::NoPerm) {
                    return Err(err.into());
                }
            }
        }
        Ok(())
    }

    /// The socket's read timeout.
    pub(crate) fn read_timeout(&self) -> Duration {
        self.read_timeout
    }

    /// The socket's write timeout.
    pub(crate) fn write_timeout(&self) -> Duration {
        self.write_timeout
    }

    /// Sets the socket's read and write timeout.
    pub(crate) fn set_io_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.stream.set_timeouts(timeout)?;
        self.read_timeout = timeout;
        self.write_timeout = timeout;
        Ok(())
    }

    /// Sets the socket's read timeout.
    pub(crate) fn set_read_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.stream.set_read_timeout(timeout)?;
        self.read_timeout = timeout;
        Ok(())
    }

    /// Sets the socket's write timeout.
    pub(crate) fn set_write_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.stream.set_write_timeout(timeout)?;
        self.write_timeout = timeout;
        Ok(())
    }

    /// Whether command bytes accepted earlier have not reached the socket.
    pub(crate) fn has_unsent(&self) -> bool {
        !self.unsent.is_empty() || self.stream.wants_write()
    }

    /// Sends `bytes` behind any unsent ones. When the write times out, what
    /// is left of them is kept and goes out first on the next write or
    /// [`flush`](Self::flush): the node never sees half a command followed
    /// by another.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.has_unsent() {
            self.unsent.extend_from_slice(bytes);
            return self.flush();
        }
        let mut done = 0;
        while done < bytes.len() {
            match write_some(&mut self.stream, &bytes[done..]) {
                Ok(n) => done += n,
                Err(err) => {
                    self.unsent.extend_from_slice(&bytes[done..]);
                    return Err(err);
                }
            }
        }
        self.stream.flush()
    }

    /// Sends the bytes left over from earlier writes.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        let mut done = 0;
        let result = loop {
            if done == self.unsent.len() {
                break self.stream.flush();
            }
            match write_some(&mut self.stream, &self.unsent[done..]) {
                Ok(n) => done += n,
                Err(err) => break Err(err),
            }
        };
        self.unsent.drain(..done);
        if self.unsent.capacity() > KEPT_UNSENT && self.unsent.is_empty() {
            self.unsent = Vec::new();
        }
        result
    }

    /// Reads the next reply (RESP3 push data is skipped). A read that times
    /// out loses nothing: the next one goes on where it stopped.
    pub(crate) fn read(&mut self) -> Result<Value, RedisError> {
        loop {
            match self.parser.parse_value(&mut self.stream)? {
                Value::Push { .. } => {}
                reply => return Ok(reply),
            }
        }
    }
}

/// An emptied unsent buffer larger than this is given back.
const KEPT_UNSENT: usize = 64 * 1024;

/// One write; `Ok(0)` from a TLS stream whose buffer is full becomes a
/// flush (which may time out) and a second try.
fn write_some(stream: &mut Stream, bytes: &[u8]) -> io::Result<usize> {
    loop {
        match stream.write(bytes) {
            Ok(0) => {
                if !stream.wants_write() {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                stream.flush()?;
            }
            Ok(n) => return Ok(n),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
}

/// Opens the socket (and completes the TLS handshake) within `timeout`.
fn open(address: &Address, timeout: Duration) -> Result<Stream, RedisError> {
    match address {
        Address::Tcp { host, port } => Ok(Stream::Tcp(tcp(host, *port, timeout)?)),
        #[cfg(feature = "tls")]
        Address::Tls { host, port, config } => {
            let started = Instant::now();
            let name = rustls::pki_types::ServerName::try_from(host.as_str())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
                .to_owned();
            let conn = rustls::ClientConnection::new(Arc::clone(config), name)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            let sock = tcp(host, *port, timeout)?;
            let left = timeout
                .saturating_sub(started.elapsed())
                .max(MIN_IO_TIMEOUT);
            sock.set_read_timeout(Some(left))?;
            sock.set_write_timeout(Some(left))?;
            let mut tls = rustls::StreamOwned::new(conn, sock);
            while tls.conn.is_handshaking() {
                tls.conn.complete_io(&mut tls.sock)?;
            }
            Ok(Stream::Tls(Box::new(tls)))
        }
        #[cfg(unix)]
        Address::Unix(path) => Ok(Stream::Unix(UnixStream::connect(path)?)),
        #[cfg(not(unix))]
        Address::Unix(_) => Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "unix sockets are not supported on this platform",
        ))),
    }
}

/// A TCP connection to the first address of `host` that answers.
fn tcp(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, RedisError> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::tests::read_words;
    use std::net::TcpListener;

    /// A fake server that answers the handshake with OK and `PING` with
    /// `+PONG` in two halves, `pause` apart.
    fn split_pong(pause: Duration) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            let Some(Ok(mut stream)) = listener.incoming().next() else {
                return;
            };
            let mut reader = io::BufReader::new(stream.try_clone().expect("clone"));
            while let Some(words) = read_words(&mut reader) {
                let written = if words[0] == "PING" {
                    stream.write_all(b"+PO").and_then(|()| {
                        std::thread::sleep(pause);
                        stream.write_all(b"NG\r\n")
                    })
                } else {
                    stream.write_all(b"+OK\r\n")
                };
                if written.is_err() {
                    return;
                }
            }
        });
        port
    }

    #[test]
    fn a_read_that_times_out_mid_reply_loses_nothing() {
        let timeout = Duration::from_millis(100);
        let endpoint = Endpoint {
            address: Address::Tcp {
                host: "127.0.0.1".to_owned(),
                port: split_pong(timeout * 3),
            },
            username: None,
            password: None,
            db: 0,
        };
        let mut wire = Wire::connect(&endpoint, timeout, &[]).expect("connects");
        wire.write(b"*1\r\n$4\r\nPING\r\n").expect("sent");
        let err = wire.read().expect_err("only half the reply so far");
        assert!(err.is_timeout(), "{err}");
        wire.set_io_timeout(Duration::from_secs(5))
            .expect("timeout");
        assert_eq!(
            wire.read().expect("the rest"),
            Value::SimpleString("PONG".to_owned())
        );
    }
}
