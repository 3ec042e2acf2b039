//! A fake Redis master on loopback that answers the handshake like a Redis
//! and then misbehaves on every lock command: it trickles a reply that never
//! ends, announces a 1 TB bulk string, or streams RESP3 push frames forever.

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;

/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// What a [`HostileServer`] answers to a lock command (`SET`, `EVAL`,
/// `EVALSHA`, or any command it does not know): it never finishes the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehaviour {
    /// A status reply that never ends (`+aaaa...`, no `\r\n`), one byte
    /// every `pause`.
    Trickle {
        /// The pause between two bytes.
        pause: Duration,
    },
    /// A bulk string announced as 1 TB long (`$1099511627776\r\n`): its
    /// first `burst` bytes at once, then one byte every `pause`.
    HugeBulk {
        /// How many bytes of the bulk string to send at once.
        burst: usize,
        /// The pause between two bytes after the burst.
        pause: Duration,
    },
    /// RESP3 push frames (`>3 message spam spam`), `per_batch` of them
    /// every `pause`, and never the reply.
    PushFlood {
        /// How many frames in one write.
        per_batch: usize,
        /// The pause between two writes.
        pause: Duration,
    },
}

/// What a [`HostileServer`] answers to `HELLO` (no arguments), which
/// says what server it is. Defaults to a Redis 7.0.0.
///
/// # Examples
///
/// ```
/// use redlock_tests::harness::Hello;
/// let old = Hello::reports("redis", "6.0.9");
/// assert_eq!(Hello::default(), Hello::reports("redis", "7.0.0"));
/// # let _ = old;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// A reply as Redis 6.2 and later give it (RESP2: a flat array), with
    /// this `server` (`redis`, `valkey`) and `version`; `INFO`'s
    /// `redis_version` says the same version.
    Reports {
        /// `server`.
        server: String,
        /// `version`.
        version: String,
    },
    /// `-ERR unknown command 'HELLO'`, as a Redis before 6.0 answers.
    Unknown,
    /// `-ERR wrong number of arguments for 'hello' command`, as Redis 6.0
    /// answers `HELLO` without arguments.
    NeedsArguments,
}

impl Hello {
    /// [`Hello::Reports`] with this server name and version.
    pub fn reports(server: impl Into<String>, version: impl Into<String>) -> Self {
        Hello::Reports {
            server: server.into(),
            version: version.into(),
        }
    }

    fn reply(&self) -> Vec<u8> {
        match self {
            Hello::Reports { server, version } => {
                let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len());
                format!(
                    "*14\r\n{}{}{}{}{}:2\r\n{}:1\r\n{}{}{}{}{}*0\r\n",
                    bulk("server"),
                    bulk(server),
                    bulk("version"),
                    bulk(version),
                    bulk("proto"),
                    bulk("id"),
                    bulk("mode"),
                    bulk("standalone"),
                    bulk("role"),
                    bulk("master"),
                    bulk("modules"),
                )
                .into_bytes()
            }
            Hello::Unknown => {
                b"-ERR unknown command 'HELLO', with args beginning with: \r\n".to_vec()
            }
            Hello::NeedsArguments => {
                b"-ERR wrong number of arguments for 'hello' command\r\n".to_vec()
            }
        }
    }

    /// The version `INFO` reports.
    fn info_version(&self) -> &str {
        match self {
            Hello::Reports { version, .. } => version,
            Hello::Unknown => "5.0.14",
            Hello::NeedsArguments => "6.0.9",
        }
    }
}

impl Default for Hello {
    fn default() -> Self {
        Hello::reports("redis", "7.0.0")
    }
}

/// A fake master on a free loopback port; its threads end when it is
/// dropped.
///
/// The handshake (`AUTH`, `SELECT`, `CLIENT`, `HELLO`, `SCRIPT LOAD`),
/// `PING`, `INFO` and `SUBSCRIBE` are answered as a Redis 7.0 would (or as
/// the server [`HostileServer::start_as`] was told to be); every other
/// command gets the [`Misbehaviour`] until the client closes the
/// connection, which [`HostileServer::dropped`] counts.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redlock_tests::harness::{HostileServer, Misbehaviour};
/// let hostile = HostileServer::start(Misbehaviour::Trickle {
///     pause: Duration::from_millis(5),
/// })
/// .unwrap();
/// let url = hostile.url(); // redis://127.0.0.1:<port>
/// assert_eq!(hostile.dropped(), 0);
/// # let _ = url;
/// ```
#[derive(Debug)]
pub struct HostileServer {
    addr: SocketAddr,
    url: String,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    misbehaviour: Misbehaviour,
    hello: Hello,
    stop: AtomicBool,
    handshakes: AtomicUsize,
    misbehaving: AtomicUsize,
    dropped: AtomicUsize,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl HostileServer {
    /// Starts the server on a free loopback port.
    ///
    /// # Errors
    ///
    /// Fails when no port can be bound or no thread started.
    pub fn start(misbehaviour: Misbehaviour) -> anyhow::Result<Self> {
        Self::start_as(misbehaviour, Hello::default())
    }

    /// Starts the server on a free loopback port, answering `HELLO` with
    /// `hello`: a server of another version, e.g. one too old for the
    /// library.
    ///
    /// # Errors
    ///
    /// As [`HostileServer::start`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redlock_tests::harness::{Hello, HostileServer, Misbehaviour};
    /// let redis_6_0 = HostileServer::start_as(
    ///     Misbehaviour::Trickle { pause: Duration::from_millis(5) },
    ///     Hello::reports("redis", "6.0.9"),
    /// )
    /// .unwrap();
    /// # let _ = redis_6_0;
    /// ```
    pub fn start_as(misbehaviour: Misbehaviour, hello: Hello) -> anyhow::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            misbehaviour,
            hello,
            stop: AtomicBool::new(false),
            handshakes: AtomicUsize::new(0),
            misbehaving: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
        });
        let accept_thread = std::thread::Builder::new()
            .name(format!("hostile-accept-{}", addr.port()))
            .spawn({
                let shared = Arc::clone(&shared);
                move || accept_loop(&listener, &shared)
            })
            .context("spawning the accept thread")?;
        Ok(Self {
            addr,
            url: format!("redis://127.0.0.1:{}", addr.port()),
            shared,
            accept_thread: Some(accept_thread),
        })
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// How many handshakes it answered (one per connection that sent one).
    pub fn handshakes(&self) -> usize {
        self.shared.handshakes.load(Ordering::SeqCst)
    }

    /// How many connections it began to misbehave on.
    pub fn misbehaving(&self) -> usize {
        self.shared.misbehaving.load(Ordering::SeqCst)
    }

    /// How many of those the client closed (or reset).
    pub fn dropped(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept_thread.take() {
            let _ = accept.join();
        }
        let threads = std::mem::take(
            &mut *self
                .shared
                .threads
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for thread in threads {
            let _ = thread.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while let Some(stream) = super::accept_until_stopped(listener, &shared.stop, POLL) {
        let shared_for_thread = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("hostile-conn".to_owned())
            .spawn(move || serve(stream, &shared_for_thread));
        if let Ok(handle) = spawned {
            let mut threads = shared
                .threads
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            threads.retain(|t| !t.is_finished());
            threads.push(handle);
        }
    }
}

/// Answers commands until a lock command, then misbehaves until the client
/// closes the connection or the server stops.
fn serve(mut stream: TcpStream, shared: &Shared) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(POLL)).is_err()
        || stream.set_write_timeout(Some(POLL)).is_err()
    {
        return;
    }
    let _ = stream.set_nodelay(true);
    let mut input = Vec::new();
    let mut chunk = [0_u8; 16 * 1024];
    let mut greeted = false;
    while !shared.stop.load(Ordering::SeqCst) {
        if let Some((words, used)) = parse_command(&input) {
            input.drain(..used);
            let verb = words
                .first()
                .map(|w| String::from_utf8_lossy(w).to_ascii_uppercase())
                .unwrap_or_default();
            let reply = match verb.as_str() {
                "AUTH" | "SELECT" | "CLIENT" => b"+OK\r\n".to_vec(),
                "SCRIPT" => format!("${}\r\n{}\r\n", 40, "0".repeat(40)).into_bytes(),
                "PING" => b"+PONG\r\n".to_vec(),
                "HELLO" => shared.hello.reply(),
                "INFO" => info(shared.hello.info_version()),
                "SUBSCRIBE" => subscribed(words.get(1).map_or(&[][..], Vec::as_slice)),
                _ => {
                    shared.misbehaving.fetch_add(1, Ordering::SeqCst);
                    if misbehave(&mut stream, shared) {
                        shared.dropped.fetch_add(1, Ordering::SeqCst);
                    }
                    return;
                }
            };
            if !greeted && verb == "CLIENT" {
                greeted = true;
                shared.handshakes.fetch_add(1, Ordering::SeqCst);
            }
            if !write_all(&mut stream, &reply, shared) {
                return;
            }
            continue;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => input.extend_from_slice(&chunk[..n]),
            Err(e) if is_transient(&e) => {}
            Err(_) => return,
        }
    }
}

/// Sends the misbehaviour until a write fails (the client closed or reset
/// the connection: `true`) or the server stops (`false`).
fn misbehave(stream: &mut TcpStream, shared: &Shared) -> bool {
    let mut pace = |bytes: &[u8], pause: Duration| -> bool {
        if !write_all(stream, bytes, shared) {
            return false;
        }
        std::thread::sleep(pause);
        true
    };
    let gone = match shared.misbehaviour {
        Misbehaviour::Trickle { pause } => {
            let mut gone = !pace(b"+", pause);
            while !gone && !shared.stop.load(Ordering::SeqCst) {
                gone = !pace(b"a", pause);
            }
            gone
        }
        Misbehaviour::HugeBulk { burst, pause } => {
            let mut gone = !pace(b"$1099511627776\r\n", Duration::ZERO);
            let block = vec![b'x'; 64 * 1024];
            let mut sent = 0;
            while !gone && sent < burst && !shared.stop.load(Ordering::SeqCst) {
                let n = block.len().min(burst - sent);
                gone = !pace(&block[..n], Duration::ZERO);
                sent += n;
            }
            while !gone && !shared.stop.load(Ordering::SeqCst) {
                gone = !pace(b"x", pause);
            }
            gone
        }
        Misbehaviour::PushFlood { per_batch, pause } => {
            let batch = b">3\r\n$7\r\nmessage\r\n$4\r\nspam\r\n$4\r\nspam\r\n".repeat(per_batch);
            let mut gone = false;
            while !gone && !shared.stop.load(Ordering::SeqCst) {
                gone = !pace(&batch, pause);
            }
            gone
        }
    };
    let _ = stream.shutdown(Shutdown::Both);
    gone && !shared.stop.load(Ordering::SeqCst)
}

/// Writes `bytes`, waiting while the client's buffers are full; `false`
/// when the connection failed or the server stops.
fn write_all(stream: &mut TcpStream, mut bytes: &[u8], shared: &Shared) -> bool {
    while !bytes.is_empty() {
        if shared.stop.load(Ordering::SeqCst) {
            return false;
        }
        match stream.write(bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = &bytes[n..],
            Err(e) if is_transient(&e) => {}
            Err(_) => return false,
        }
    }
    true
}

fn is_transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// One RESP command (an array of bulk strings) at the start of `input`, and
/// how many bytes it takes; `None` until it is all there.
fn parse_command(input: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    let (count, mut at) = header(input, 0, b'*')?;
    let mut words = Vec::with_capacity(count);
    for _ in 0..count {
        let (len, start) = header(input, at, b'$')?;
        let end = start.checked_add(len)?;
        if input.len() < end + 2 {
            return None;
        }
        words.push(input[start..end].to_vec());
        at = end + 2;
    }
    Some((words, at))
}

/// The number after `kind` in the line at `at`, and where the line ends.
fn header(input: &[u8], at: usize, kind: u8) -> Option<(usize, usize)> {
    let rest = input.get(at..)?;
    if *rest.first()? != kind {
        return None;
    }
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    let number = std::str::from_utf8(&rest[1..end]).ok()?.parse().ok()?;
    Some((number, at + end + 2))
}

fn info(version: &str) -> Vec<u8> {
    let text = format!(
        "# Server\r\nredis_version:{version}\r\nredis_mode:standalone\r\n\
         run_id:0000000000000000000000000000000000hostile\r\nrole:master\r\n"
    );
    format!("${}\r\n{text}\r\n", text.len()).into_bytes()
}

fn subscribed(channel: &[u8]) -> Vec<u8> {
    let mut reply = format!("*3\r\n$9\r\nsubscribe\r\n${}\r\n", channel.len()).into_bytes();
    reply.extend_from_slice(channel);
    reply.extend_from_slice(b"\r\n:1\r\n");
    reply
}

#[cfg(test)]
mod tests {
    use super::parse_command;

    #[test]
    fn commands_are_parsed_once_complete() {
        let command = b"*2\r\n$4\r\nPING\r\n$2\r\nab\r\n";
        for cut in 0..command.len() {
            assert_eq!(parse_command(&command[..cut]), None, "{cut}");
        }
        let (words, used) = parse_command(command).expect("complete");
        assert_eq!(words, [b"PING".to_vec(), b"ab".to_vec()]);
        assert_eq!(used, command.len());
    }
}
