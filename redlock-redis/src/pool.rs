//! One node's r2d2 pool: our own connection manager (connect timeout, I/O
//! timeouts, broken-connection tracking) and a checkout bounded by a
//! deadline.
//!
//! The pool only connects and hands out idle connections; which connection a
//! call must use (the one that still owes replies, if any) is decided in
//! [`crate::ordered`].

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use r2d2::{ManageConnection, PooledConnection};
use redis::RedisError;
use redlock_core::backend::ConnectionSink;
use redlock_core::NodeId;
use scheduled_thread_pool::ScheduledThreadPool;

use crate::address::Secret;
use crate::classify::deadline_passed;
use crate::error::Stage;
use crate::session::{Conn, Failure, Session};
use crate::wire::{Endpoint, Wire};
use crate::{RedisErrorKind, RedisNodeError};

/// A connection checked out of a node's pool; dropping it puts it back (or
/// discards it, if broken).
pub(crate) type Pooled = PooledConnection<ConnectionManager>;

/// The outcome of the latest connection attempts, shared by the manager
/// (which records them) and checkouts (which wait for them).
#[derive(Default)]
struct Health {
    state: Mutex<HealthState>,
    changed: Condvar,
}

#[derive(Default)]
struct HealthState {
    /// Attempts finished so far.
    finished: u64,
    /// Attempts under way.
    in_flight: u32,
    /// The error of the latest attempt, until one succeeds.
    failure: Option<RedisError>,
}

/// The r2d2 connection manager: connects within the node timeout, sets read
/// and write timeouts and loads the scripts.
pub(crate) struct ConnectionManager {
    endpoint: Endpoint,
    timeout: Duration,
    health: Arc<Health>,
}

impl ManageConnection for ConnectionManager {
    /// Boxed: r2d2 moves a connection in and out of its pool at every
    /// checkout, several times (measured in docs/benchmarks.md).
    type Connection = Box<Conn>;
    type Error = RedisError;

    fn connect(&self) -> Result<Box<Conn>, RedisError> {
        self.health.state.lock().in_flight += 1;
        let result = Wire::connect(&self.endpoint, self.timeout, &crate::ops::preload())
            .map(|wire| Box::new(Conn::new(wire)));
        let mut state = self.health.state.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        state.finished += 1;
        state.failure = result.as_ref().err().cloned();
        drop(state);
        self.health.changed.notify_all();
        result
    }

    /// Never called (`test_on_check_out` is off): checkouts cost no round
    /// trip, and a connection that fails is seen failing by its call.
    fn is_valid(&self, _conn: &mut Box<Conn>) -> Result<(), RedisError> {
        Ok(())
    }

    fn has_broken(&self, conn: &mut Box<Conn>) -> bool {
        conn.is_broken()
    }
}

/// How a pool is set up.
pub(crate) struct PoolSettings {
    pub(crate) node: NodeId,
    pub(crate) endpoint: Endpoint,
    pub(crate) timeout: Duration,
    pub(crate) size: u32,
    pub(crate) password: Option<Secret>,
}

/// Passes the pool's background connection errors to the manager's event
/// hook once the manager attached its sink (r2d2 would drop them).
#[derive(Debug, Clone)]
pub(crate) struct Reporter {
    node: NodeId,
    password: Option<Secret>,
    sink: Arc<OnceLock<ConnectionSink>>,
}

impl r2d2::HandleError<RedisError> for Reporter {
    fn handle_error(&self, error: RedisError) {
        self.report(error);
    }
}

impl Reporter {
    /// A reporter with no sink ever attached (for tests).
    #[cfg(test)]
    pub(crate) fn silent(node: NodeId) -> Self {
        Reporter {
            node,
            password: None,
            sink: Arc::default(),
        }
    }

    /// Reports a connection error (of the pool, or of the release feed).
    pub(crate) fn report(&self, error: RedisError) {
        if let Some(sink) = self.sink.get() {
            // Classified and redacted like every error of this crate.
            let error = RedisNodeError::from_redis(
                self.node.clone(),
                Stage::Connect,
                error,
                self.password.as_ref(),
            );
            sink.report(&error);
        }
    }
}

/// One node's pool.
pub(crate) struct NodePool {
    pool: r2d2::Pool<ConnectionManager>,
    /// Where background connection errors go, once attached.
    sink: Arc<OnceLock<ConnectionSink>>,
    health: Arc<Health>,
    node: NodeId,
    password: Option<Secret>,
}

/// The shortest pause between two background connection attempts to a node
/// that is down (r2d2 waits half its connection timeout, at most).
const MIN_RECONNECT_PAUSE: Duration = Duration::from_millis(100);

impl NodePool {
    /// Builds the pool without waiting for the node: one connection is
    /// opened in the background.
    pub(crate) fn new(settings: PoolSettings) -> Self {
        let health = Arc::new(Health::default());
        let manager = ConnectionManager {
            endpoint: settings.endpoint,
            timeout: settings.timeout,
            health: Arc::clone(&health),
        };
        let size = settings.size.max(1);
        // Checkouts never use r2d2's connection timeout (they pass their own
        // deadline); it sets the pause between background reconnection
        // attempts while the node is down.
        let reconnect = settings.timeout.max(MIN_RECONNECT_PAUSE).saturating_mul(2);
        let threads = Arc::new(
            ScheduledThreadPool::builder()
                .num_threads(1)
                .thread_name_pattern("redlock-redis-{}")
                .build(),
        );
        let sink = Arc::new(OnceLock::new());
        let report = Reporter {
            node: settings.node.clone(),
            password: settings.password.clone(),
            sink: Arc::clone(&sink),
        };
        let pool = r2d2::Pool::builder()
            .max_size(size)
            .min_idle(Some(1))
            .test_on_check_out(false)
            .connection_timeout(reconnect)
            .error_handler(Box::new(report))
            .thread_pool(threads)
            .build_unchecked(manager);
        NodePool {
            pool,
            sink,
            health,
            node: settings.node,
            password: settings.password,
        }
    }

    /// What reports connection errors made outside the pool (the release
    /// feed's) the way the pool reports its own.
    pub(crate) fn reporter(&self) -> Reporter {
        Reporter {
            node: self.node.clone(),
            password: self.password.clone(),
            sink: Arc::clone(&self.sink),
        }
    }

    /// Sends background connection errors to `sink` from now on.
    pub(crate) fn attach(&self, sink: ConnectionSink) {
        let _ = self.sink.set(sink);
    }

    /// A session on `conn` for a call that ends at `deadline`.
    pub(crate) fn session<'a>(&self, conn: &'a mut Conn, deadline: Instant) -> Session<'a> {
        Session::new(conn, deadline)
    }

    /// The typed error for `failure` on `conn`. When the connection can no
    /// longer be used (see [`Failure::breaks_connection`]) it is marked
    /// broken, so the pool drops it instead of taking it back; when the
    /// server closed it, the idle ones are replaced too. A timeout leaves it
    /// alone: its caller decides what becomes of a connection that still
    /// owes replies.
    pub(crate) fn failed(&self, conn: &mut Conn, failure: Failure) -> RedisNodeError {
        if failure.breaks_connection() {
            conn.set_broken();
        }
        if matches!(&failure, Failure::Redis(err) if err.is_connection_dropped()) {
            self.discard_idle();
        }
        self.error_of(failure)
    }

    /// The typed error for `failure`.
    pub(crate) fn error_of(&self, failure: Failure) -> RedisNodeError {
        match failure {
            Failure::Redis(err) => self.error(Stage::Command, err),
            Failure::Deadline => self.error(Stage::Command, deadline_passed()),
            Failure::Stalled => RedisNodeError::new(
                self.node.clone(),
                RedisErrorKind::Timeout,
                Stage::Command,
                "the node began a reply, or sent data nobody asked for, and had not \
                 finished it at the node timeout: the connection is dropped",
            ),
            Failure::Reply { kind, detail } => {
                RedisNodeError::new(self.node.clone(), kind, Stage::Command, detail)
            }
        }
    }

    /// The error of a request refused because the node still owes answers.
    pub(crate) fn behind(&self) -> RedisNodeError {
        RedisNodeError::new(
            self.node.clone(),
            RedisErrorKind::Behind,
            Stage::Command,
            "not sent: the node has not answered the requests sent before it",
        )
    }

    /// The error of a call that found another call to the node under way
    /// until its deadline.
    pub(crate) fn busy(&self) -> RedisNodeError {
        RedisNodeError::new(
            self.node.clone(),
            RedisErrorKind::Timeout,
            Stage::Checkout,
            "another call to this node held it until the node timeout",
        )
    }

    /// Runs `op` on a pooled connection, all within `deadline` (for this
    /// module's tests; calls go through [`crate::ordered`]).
    #[cfg(test)]
    fn run<T>(
        &self,
        deadline: Instant,
        op: impl FnOnce(&mut Session<'_>) -> Result<T, Failure>,
    ) -> Result<T, RedisNodeError> {
        let mut conn = self.checkout(deadline)?;
        let result = op(&mut self.session(&mut conn, deadline));
        result.map_err(|failure| {
            let err = self.failed(&mut conn, failure);
            conn.set_broken();
            err
        })
    }

    /// The server closed a connection (a restart, `CLIENT KILL`): the idle
    /// ones are most likely closed too. Discarding them now has the pool
    /// reconnect in the background, instead of failing the next calls.
    fn discard_idle(&self) {
        for _ in 0..self.pool.max_size() {
            match self.pool.try_get() {
                Some(mut idle) => idle.set_broken(),
                None => break,
            }
        }
    }

    /// An idle connection, if the pool has one now (never connects).
    pub(crate) fn idle(&self) -> Option<Pooled> {
        self.pool.try_get()
    }

    /// A pooled connection, or why there is none by `deadline`.
    ///
    /// An idle connection is taken at once. Otherwise, while the node is
    /// known to be unreachable (the latest connection attempt failed and
    /// the pool is retrying in the background), the call fails at once with
    /// that attempt's error; else it waits for the attempt under way.
    pub(crate) fn checkout(&self, deadline: Instant) -> Result<Pooled, RedisNodeError> {
        if let Some(conn) = self.pool.try_get() {
            return Ok(conn);
        }
        let (seen, in_flight) = {
            let state = self.health.state.lock();
            if let Some(failure) = &state.failure {
                return Err(self.error(Stage::Connect, failure.clone()));
            }
            (state.finished, state.in_flight)
        };
        let busy = self.pool.state().connections >= self.pool.max_size();
        if !busy {
            if in_flight == 0 {
                // A zero-timeout get asks the pool to open a connection.
                if let Ok(conn) = self.pool.get_timeout(Duration::ZERO) {
                    return Ok(conn);
                }
            }
            let mut state = self.health.state.lock();
            while state.finished == seen {
                if self
                    .health
                    .changed
                    .wait_until(&mut state, deadline)
                    .timed_out()
                {
                    break;
                }
            }
            if let Some(failure) = &state.failure {
                return Err(self.error(Stage::Connect, failure.clone()));
            }
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        self.pool.get_timeout(remaining).map_err(|_| {
            RedisNodeError::new(
                self.node.clone(),
                RedisErrorKind::Timeout,
                Stage::Checkout,
                "no connection became available within the node timeout",
            )
        })
    }

    /// The typed error for a reply that is an error for one request alone.
    pub(crate) fn reply_error(&self, kind: RedisErrorKind, detail: String) -> RedisNodeError {
        RedisNodeError::new(self.node.clone(), kind, Stage::Command, detail)
    }

    /// The typed error for a server's error reply to one command.
    pub(crate) fn command_error(&self, err: RedisError) -> RedisNodeError {
        self.error(Stage::Command, err)
    }

    fn error(&self, stage: Stage, err: RedisError) -> RedisNodeError {
        RedisNodeError::from_redis(self.node.clone(), stage, err, self.password.as_ref())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use redis::Value;
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub(crate) fn pool_for(port: u16, timeout: Duration, size: u32) -> NodePool {
        NodePool::new(PoolSettings {
            node: NodeId::new(format!("127.0.0.1:{port}/0")),
            endpoint: Endpoint::new(
                crate::wire::Address::Tcp {
                    host: "127.0.0.1".to_owned(),
                    port,
                },
                None,
                None,
                0,
            ),
            timeout,
            size,
            password: None,
        })
    }

    fn closed_port() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    }

    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

    fn ping(pool: &NodePool, timeout: Duration) -> Result<Value, RedisNodeError> {
        pool.run(Instant::now() + timeout, |s| {
            let mut replies = Vec::new();
            s.call(1, |packed| packed.extend_from_slice(PING), &mut replies)?;
            Ok(replies.pop().unwrap_or(Value::Nil))
        })
    }

    #[test]
    fn nothing_listening_is_refused_quickly() {
        let timeout = Duration::from_millis(300);
        let pool = pool_for(closed_port(), timeout, 2);
        for _ in 0..5 {
            let started = Instant::now();
            let err = ping(&pool, timeout).expect_err("nothing listens");
            assert_eq!(err.kind(), RedisErrorKind::ConnectionRefused, "{err}");
            assert!(started.elapsed() < timeout, "{:?}", started.elapsed());
        }
    }

    /// Reads one RESP command (an array of bulk strings) and returns its
    /// first word, or `None` at end of stream.
    fn read_command(reader: &mut BufReader<TcpStream>) -> Option<String> {
        read_words(reader)?.into_iter().next()
    }

    /// Reads one RESP command's words, `None` at the end of the stream (for
    /// the fake servers of this crate's tests).
    pub(crate) fn read_words(reader: &mut impl BufRead) -> Option<Vec<String>> {
        let mut line = String::new();
        reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
        let count: usize = line.trim().trim_start_matches('*').parse().ok()?;
        let mut words = Vec::new();
        for _ in 0..count {
            line.clear();
            reader.read_line(&mut line).ok()?;
            let len: usize = line.trim().trim_start_matches('$').parse().ok()?;
            let mut bulk = vec![0; len + 2];
            reader.read_exact(&mut bulk).ok()?;
            bulk.truncate(len);
            words.push(String::from_utf8_lossy(&bulk).into_owned());
        }
        Some(words)
    }

    /// A fake server: answers `CLIENT` with OK; on the first connection
    /// answers the first `PING` too late with `+LATE`, on later ones `+PONG`
    /// at once. Returns its port and its count of accepted connections.
    pub(crate) fn slow_then_fast_server(delay: Duration) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for (index, stream) in listener.incoming().enumerate() {
                let Ok(stream) = stream else { return };
                counter.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut writer = stream.try_clone().expect("clone");
                    let mut reader = BufReader::new(stream);
                    let mut first_ping = index == 0;
                    while let Some(word) = read_command(&mut reader) {
                        let reply: &[u8] = match word.to_ascii_uppercase().as_str() {
                            "PING" if first_ping => {
                                first_ping = false;
                                std::thread::sleep(delay);
                                b"+LATE\r\n"
                            }
                            "PING" => b"+PONG\r\n",
                            _ => b"+OK\r\n",
                        };
                        if writer.write_all(reply).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (port, accepted)
    }

    #[test]
    fn a_pipeline_to_a_server_that_stopped_answering_ends_at_its_deadline() {
        let timeout = Duration::from_millis(100);
        let (port, _) = slow_then_fast_server(Duration::from_secs(5));
        let pool = pool_for(port, timeout, 2);
        // The call must get the first (slow) connection: wait until the
        // pool opened it, or a checkout racing it could open the second.
        let ready = Instant::now() + Duration::from_secs(5);
        while pool.pool.state().idle_connections == 0 {
            assert!(Instant::now() < ready, "the pool never connected");
            std::thread::sleep(Duration::from_millis(2));
        }
        let pings = PING.repeat(5);
        let started = Instant::now();
        let err = pool
            .run(started + timeout, |s| {
                s.call(
                    5,
                    |packed| packed.extend_from_slice(&pings),
                    &mut Vec::new(),
                )
            })
            .expect_err("times out");
        assert!(err.is_timeout(), "{err}");
        // Ten times the deadline: fails on a call that waits for the
        // server's 5 s, not on a loaded machine.
        assert!(started.elapsed() < timeout * 10, "{:?}", started.elapsed());
    }

    #[test]
    fn socket_timeouts_are_set_only_when_off_by_more_than_the_slack() {
        use crate::wire::timeout_slack;
        assert_eq!(
            timeout_slack(Duration::from_millis(50)),
            Duration::from_millis(2)
        );
        assert_eq!(
            timeout_slack(Duration::from_millis(16)),
            Duration::from_millis(1)
        );
        let timeout = Duration::from_millis(200);
        let (port, _) = slow_then_fast_server(Duration::ZERO);
        let pool = pool_for(port, timeout, 1);
        let slack = timeout_slack(timeout);
        // The socket timeout after one call, with `left` before the deadline.
        let after_call = |left: Duration| {
            pool.run(Instant::now() + left, |s| {
                s.call(1, |packed| packed.extend_from_slice(PING), &mut Vec::new())?;
                Ok(s.io_timeout())
            })
            .expect("answers")
        };
        // The first call may wait for the connection, and so re-arm.
        after_call(timeout);
        // Full deadlines: within the slack, never set again.
        let set = after_call(timeout);
        assert!(timeout - set <= slack, "{set:?}");
        assert_eq!(after_call(timeout), set);
        assert_eq!(after_call(timeout), set);
        // Less time left: the timeouts shrink to it...
        let shrunk = after_call(timeout / 2);
        assert!(shrunk <= timeout / 2, "{shrunk:?}");
        // ... and grow back with the next full deadline.
        let set = after_call(timeout);
        assert!(timeout - set <= slack, "{set:?}");
    }

    #[test]
    fn the_deadline_bounds_the_whole_call() {
        let timeout = Duration::from_millis(100);
        let (port, _) = slow_then_fast_server(Duration::from_secs(5));
        // One connection, the slow one: the call waits for the pool to
        // open it, then for the late answer. (With a second, a checkout
        // racing the pool's first connect could get the fast one.)
        let pool = pool_for(port, timeout, 1);
        let started = Instant::now();
        let err = ping(&pool, timeout).expect_err("times out");
        assert!(err.is_timeout(), "{err}");
        // Ten times the deadline: fails on a call that waits for the
        // server's 5 s, not on a loaded machine.
        assert!(started.elapsed() < timeout * 10, "{:?}", started.elapsed());
    }
}
