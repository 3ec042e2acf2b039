//! A fault-injecting TCP proxy on loopback, in front of one server.

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use nix::sys::socket::{setsockopt, sockopt};

use super::RedisServer;

/// How often blocked proxy threads look at the stop and cut flags.
const POLL: Duration = Duration::from_millis(20);
/// Connect timeout towards the upstream server.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Which way a [`ProxyMode::Delay`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server (requests).
    ToServer,
    /// Server to client (replies).
    ToClient,
    /// Both ways.
    Both,
}

impl Direction {
    fn includes(self, other: Direction) -> bool {
        self == Direction::Both || self == other
    }
}

/// What the proxy does with traffic; switch with [`Proxy::set_mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProxyMode {
    /// Forwards everything at once.
    #[default]
    PassThrough,
    /// Sleeps this long before forwarding each chunk read in `direction`
    /// (a request and its reply with [`Direction::Both`]: at least twice).
    Delay {
        /// The delay per forwarded chunk.
        delay: Duration,
        /// Which way it applies.
        direction: Direction,
    },
    /// Accepts connections and keeps them open but forwards nothing, like a
    /// network partition: clients wait until their timeouts. Bytes held back
    /// are delivered when the mode changes to a forwarding one (as TCP
    /// retransmission would after the partition heals).
    Blackhole,
    /// Closes every connection open when the mode is set (FIN, then RST),
    /// and resets every new one right after accepting it, until the mode
    /// changes.
    Cut,
}

/// A TCP proxy on a free loopback port, in front of one loopback address.
/// Its threads end when it is dropped.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redlock_tests::harness::{Direction, Proxy, RedisServer};
/// let server = RedisServer::start().unwrap();
/// let proxy = Proxy::in_front_of(&server).unwrap();
/// let mut con = server.connect_url(proxy.url(), Duration::from_secs(1)).unwrap();
/// proxy.delay(Duration::from_millis(100), Direction::ToClient);
/// proxy.blackhole();
/// proxy.cut();
/// proxy.pass_through();
/// ```
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    url: String,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    upstream: SocketAddr,
    mode: Mutex<ProxyMode>,
    mode_changed: Condvar,
    stop: AtomicBool,
    next_id: AtomicU64,
    connections: Mutex<Vec<Connection>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// The proxy's handles on one proxied connection.
#[derive(Debug)]
struct Connection {
    id: u64,
    client: TcpStream,
    server: TcpStream,
    closed: Arc<AtomicBool>,
}

impl Connection {
    /// Closes both sides; with `reset`, as a RST rather than a FIN where the
    /// kernel still can.
    fn close(&self, reset: bool) {
        self.closed.store(true, Ordering::SeqCst);
        for stream in [&self.client, &self.server] {
            if reset {
                set_linger_zero(stream);
            }
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Proxy {
    /// A proxy in pass-through mode in front of `upstream`, which must be a
    /// loopback address; [`Proxy::url`] is `redis://127.0.0.1:<proxy port>`.
    ///
    /// # Errors
    ///
    /// Fails for a non-loopback `upstream` or when no port can be bound.
    pub fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        Self::start_inner(upstream, |port| format!("redis://127.0.0.1:{port}"))
    }

    /// A proxy in pass-through mode in front of `server`;
    /// [`Proxy::url`] is the server's [`RedisServer::url`] (scheme and
    /// credentials) with the proxy's port. TLS passes through untouched.
    ///
    /// # Errors
    ///
    /// Fails when no port can be bound.
    pub fn in_front_of(server: &RedisServer) -> anyhow::Result<Self> {
        Self::start_inner(server.addr(), |port| server.url_on_port(port))
    }

    fn start_inner(upstream: SocketAddr, url: impl FnOnce(u16) -> String) -> anyhow::Result<Self> {
        ensure!(
            upstream.ip().is_loopback(),
            "the proxy only forwards to loopback addresses, not {upstream}"
        );
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding the proxy")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            mode: Mutex::new(ProxyMode::PassThrough),
            mode_changed: Condvar::new(),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            connections: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
        });
        let accept_thread = std::thread::Builder::new()
            .name(format!("proxy-accept-{}", addr.port()))
            .spawn({
                let shared = Arc::clone(&shared);
                move || accept_loop(&listener, &shared)
            })
            .context("spawning the proxy's accept thread")?;
        let url = url(addr.port());
        Ok(Self {
            addr,
            url,
            shared,
            accept_thread: Some(accept_thread),
        })
    }

    /// The proxy's address, `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The URL to reach the server through the proxy (see
    /// [`Proxy::in_front_of`]).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        *lock(&self.shared.mode)
    }

    /// Switches the mode; it applies to open connections from their next
    /// chunk on. [`ProxyMode::Cut`] resets every open connection before
    /// returning.
    pub fn set_mode(&self, mode: ProxyMode) {
        *lock(&self.shared.mode) = mode;
        self.shared.mode_changed.notify_all();
        if mode == ProxyMode::Cut {
            for connection in lock(&self.shared.connections).drain(..) {
                connection.close(true);
            }
        }
    }

    /// [`ProxyMode::PassThrough`].
    pub fn pass_through(&self) {
        self.set_mode(ProxyMode::PassThrough);
    }

    /// [`ProxyMode::Delay`].
    pub fn delay(&self, delay: Duration, direction: Direction) {
        self.set_mode(ProxyMode::Delay { delay, direction });
    }

    /// [`ProxyMode::Blackhole`].
    pub fn blackhole(&self) {
        self.set_mode(ProxyMode::Blackhole);
    }

    /// [`ProxyMode::Cut`].
    pub fn cut(&self) {
        self.set_mode(ProxyMode::Cut);
    }

    /// How many proxied connections are open.
    pub fn open_connections(&self) -> usize {
        lock(&self.shared.connections).len()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.mode_changed.notify_all();
        for connection in lock(&self.shared.connections).drain(..) {
            connection.close(false);
        }
        if let Some(accept) = self.accept_thread.take() {
            let _ = accept.join();
        }
        // The accept thread is done: no new pump threads appear.
        let pumps = std::mem::take(&mut *lock(&self.shared.threads));
        for pump in pumps {
            let _ = pump.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes the next close of `stream` send a RST.
fn set_linger_zero(stream: &TcpStream) {
    let linger = nix::libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let _ = setsockopt(stream, sockopt::Linger, &linger);
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while let Some(client) = super::accept_until_stopped(listener, &shared.stop, POLL) {
        if *lock(&shared.mode) == ProxyMode::Cut {
            set_linger_zero(&client);
            continue; // dropped: reset
        }
        if let Err(_refused) = open(shared, client) {
            continue;
        }
        lock(&shared.threads).retain(|t| !t.is_finished());
    }
}

/// Connects `client` to the upstream and starts the two pump threads.
fn open(shared: &Arc<Shared>, client: TcpStream) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    let server = match TcpStream::connect_timeout(&shared.upstream, UPSTREAM_CONNECT_TIMEOUT) {
        Ok(server) => server,
        Err(e) => {
            // Upstream down: the client sees its connection reset.
            set_linger_zero(&client);
            return Err(e);
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let closed = Arc::new(AtomicBool::new(false));
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    lock(&shared.connections).push(Connection {
        id,
        client: client.try_clone()?,
        server: server.try_clone()?,
        closed: Arc::clone(&closed),
    });
    let pumps = [
        (
            client.try_clone()?,
            server.try_clone()?,
            Direction::ToServer,
        ),
        (server, client, Direction::ToClient),
    ];
    for (from, to, direction) in pumps {
        let pump_shared = Arc::clone(shared);
        let closed = Arc::clone(&closed);
        let handle = std::thread::Builder::new()
            .name(format!("proxy-pump-{id}"))
            .spawn(move || pump(&pump_shared, id, &from, &to, direction, &closed))?;
        lock(&shared.threads).push(handle);
    }
    Ok(())
}

/// Copies `from` to `to` chunk by chunk as the mode says, until either side
/// closes, the connection is cut or the proxy stops; then closes both.
fn pump(
    shared: &Shared,
    id: u64,
    mut from: &TcpStream,
    mut to: &TcpStream,
    direction: Direction,
    closed: &AtomicBool,
) {
    let _ = from.set_read_timeout(Some(POLL));
    let _ = to.set_write_timeout(Some(POLL));
    let mut buf = vec![0_u8; 16 * 1024];
    let done = || shared.stop.load(Ordering::SeqCst) || closed.load(Ordering::SeqCst);
    'chunks: while !done() {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if is_transient(&e) => continue,
            Err(_) => break,
        };
        let Some(delay) = shared.forward_delay(direction, closed) else {
            break;
        };
        if !shared.sleep(delay, closed) {
            break;
        }
        let mut data = &buf[..n];
        while !data.is_empty() {
            if done() {
                break 'chunks;
            }
            match to.write(data) {
                Ok(0) => break 'chunks,
                Ok(written) => data = &data[written..],
                Err(e) if is_transient(&e) => {}
                Err(_) => break 'chunks,
            }
        }
    }
    // The end of either direction ends the connection.
    closed.store(true, Ordering::SeqCst);
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
    lock(&shared.connections).retain(|c| c.id != id);
}

fn is_transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

impl Shared {
    /// Waits while the proxy blackholes; then the delay to apply before
    /// forwarding a chunk going `direction`, or `None` when the connection
    /// must end.
    fn forward_delay(&self, direction: Direction, closed: &AtomicBool) -> Option<Duration> {
        let mut mode = lock(&self.mode);
        loop {
            if self.stop.load(Ordering::SeqCst) || closed.load(Ordering::SeqCst) {
                return None;
            }
            match *mode {
                ProxyMode::PassThrough => return Some(Duration::ZERO),
                ProxyMode::Delay {
                    delay,
                    direction: applies,
                } => {
                    return Some(if applies.includes(direction) {
                        delay
                    } else {
                        Duration::ZERO
                    })
                }
                ProxyMode::Cut => return None,
                ProxyMode::Blackhole => {
                    mode = self
                        .mode_changed
                        .wait_timeout(mode, POLL)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    }

    /// Sleeps `delay` unless the proxy stops or the connection closes first
    /// (then `false`).
    fn sleep(&self, delay: Duration, closed: &AtomicBool) -> bool {
        let end = Instant::now() + delay;
        loop {
            if self.stop.load(Ordering::SeqCst) || closed.load(Ordering::SeqCst) {
                return false;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(POLL));
        }
    }
}
