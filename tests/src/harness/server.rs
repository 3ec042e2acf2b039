//! One `redis-server` process on a free loopback port in its own temp dir.

use std::ffi::OsString;
use std::fmt;
use std::fs::OpenOptions;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use nix::sys::signal::Signal;
use tempfile::TempDir;

use super::client::{connect, redact, DEFAULT_CLIENT_TIMEOUT};
use super::options::ServerOptions;
use super::process::{send, wait_stopped};
use super::tls;

/// How many ports a first start tries when another process takes the one
/// just chosen.
const PORT_ATTEMPTS: usize = 8;
/// Default for [`ServerOptions::ready_timeout`].
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Per-probe timeout while waiting for a starting server.
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);

/// A running `redis-server`, stopped (SIGKILL, then reaped) when dropped.
///
/// All controls take `&self`, so a server can be shared between the threads
/// of a test. See the [module docs](super) for an example.
pub struct RedisServer {
    options: ServerOptions,
    binary: OsString,
    port: u16,
    ca_pem: Option<&'static str>,
    config_path: PathBuf,
    log_path: PathBuf,
    state: Mutex<State>,
    // Declared last: removed only after Drop stopped the process.
    dir: TempDir,
}

struct State {
    child: Option<Child>,
    paused: bool,
}

/// How one spawn ended.
enum Spawned {
    Ready,
    PortTaken(String),
}

impl RedisServer {
    /// Starts a server without persistence, TLS or credentials.
    ///
    /// # Errors
    ///
    /// As [`RedisServer::start_with`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let server = redlock_tests::harness::RedisServer::start().unwrap();
    /// let pong: String = redis::cmd("PING").query(&mut server.client().unwrap()).unwrap();
    /// ```
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(ServerOptions::new())
    }

    /// Starts a server of the given variant on a free loopback port in a new
    /// temporary directory and waits until it answers `PING` (as this very
    /// process: `INFO`'s `process_id` must match). When another process took
    /// the port in the meantime, it retries on other ports.
    ///
    /// # Errors
    ///
    /// Fails when `redis-server` (or the options' [`ServerKind`]'s binary)
    /// is not installed (the message says how to get it), rejects its
    /// configuration, exits, or is not ready within the ready timeout. The
    /// server's log is part of the message.
    ///
    /// [`ServerKind`]: super::ServerKind
    pub fn start_with(options: ServerOptions) -> anyhow::Result<Self> {
        let binary = options.resolve_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("redlock-redis-")
            .tempdir()
            .context("creating a temp dir for redis-server")?;
        let tls_files = if options.tls {
            Some(tls::write_files(dir.path())?)
        } else {
            None
        };
        let ca_pem = if options.tls {
            Some(tls::test_ca_pem()?)
        } else {
            None
        };
        let mut server = Self {
            binary,
            port: 0,
            ca_pem,
            config_path: dir.path().join("redis.conf"),
            log_path: dir.path().join("redis.log"),
            state: Mutex::new(State {
                child: None,
                paused: false,
            }),
            options,
            dir,
        };
        let mut taken = Vec::new();
        for attempt in 0..PORT_ATTEMPTS {
            server.port = match (attempt, server.options.first_port) {
                (0, Some(port)) => port,
                _ => super::free_port()?,
            };
            let config =
                server
                    .options
                    .config_text(server.port, server.dir.path(), tls_files.as_ref());
            std::fs::write(&server.config_path, config)
                .with_context(|| format!("writing {}", server.config_path.display()))?;
            match server.spawn_and_wait()? {
                Spawned::Ready => return Ok(server),
                Spawned::PortTaken(_) => taken.push(server.port),
            }
        }
        bail!(
            "redis-server found every port taken (tried {taken:?})\n--- log ---\n{}",
            server.log()
        )
    }

    /// The URL a lock client should use: `redis://` or `rediss://`,
    /// `127.0.0.1`, this port, and the ACL user's credentials if one is
    /// configured, else the password if one is set.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let server = redlock_tests::harness::ServerOptions::new().password("pw").start().unwrap();
    /// assert_eq!(server.url(), format!("redis://:pw@127.0.0.1:{}", server.port()));
    /// ```
    pub fn url(&self) -> String {
        self.url_on_port(self.port)
    }

    /// Like [`RedisServer::url`] but with the given credentials (or none),
    /// e.g. to try a wrong password. Both are percent-encoded.
    pub fn url_with_credentials(&self, user: Option<&str>, password: Option<&str>) -> String {
        format_url(self.options.tls, self.port, user, password)
    }

    /// The URL of the default (admin) user: the password if one is set, no
    /// ACL user. [`RedisServer::client`] connects with it.
    pub fn admin_url(&self) -> String {
        self.url_with_credentials(None, self.options.password.as_deref())
    }

    /// [`RedisServer::url`]'s credentials and scheme on another port (a
    /// proxy's).
    pub(crate) fn url_on_port(&self, port: u16) -> String {
        let (user, password) = match &self.options.acl_user {
            Some(user) => (Some(user.name()), Some(user.password())),
            None => (None, self.options.password.as_deref()),
        };
        format_url(self.options.tls, port, user, password)
    }

    /// The loopback port the server listens on (its TLS port for TLS
    /// servers). It stays the same across [`RedisServer::restart`].
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The options the server was started with.
    pub fn options(&self) -> &ServerOptions {
        &self.options
    }

    /// The PEM certificate authority a client must trust, for TLS servers.
    pub fn ca_pem(&self) -> Option<&'static str> {
        self.ca_pem
    }

    /// The server's working directory (`--dir`): its config, log and AOF.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Everything the server logged so far (all its runs).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_else(|e| format!("<no log: {e}>"))
    }

    /// The process id, or `None` when the server is not running (killed, or
    /// it exited on its own).
    pub fn pid(&self) -> Option<u32> {
        let mut state = self.lock();
        reap_if_exited(&mut state);
        state.child.as_ref().map(Child::id)
    }

    /// Whether the process is alive (a paused server is).
    pub fn is_running(&self) -> bool {
        self.pid().is_some()
    }

    /// Whether [`RedisServer::pause`] stopped the server.
    pub fn is_paused(&self) -> bool {
        self.lock().paused
    }

    /// A new admin connection (see [`RedisServer::admin_url`]) whose connect,
    /// read and write timeouts are [`DEFAULT_CLIENT_TIMEOUT`]: for direct
    /// commands in tests (`CONFIG SET`, `SCRIPT FLUSH`, `REPLICAOF` ...).
    ///
    /// # Errors
    ///
    /// Fails when the server cannot be reached or refuses the connection.
    pub fn client(&self) -> anyhow::Result<redis::Connection> {
        self.client_with_timeout(DEFAULT_CLIENT_TIMEOUT)
    }

    /// [`RedisServer::client`] with another timeout.
    ///
    /// # Errors
    ///
    /// As [`RedisServer::client`].
    pub fn client_with_timeout(&self, timeout: Duration) -> anyhow::Result<redis::Connection> {
        self.connect_url(&self.admin_url(), timeout)
    }

    /// A connection to `url` (any credentials, or a proxy's port) trusting
    /// this server's CA; the timeouts are all `timeout`.
    ///
    /// # Errors
    ///
    /// As [`connect`](super::connect).
    pub fn connect_url(&self, url: &str, timeout: Duration) -> anyhow::Result<redis::Connection> {
        connect(url, self.ca_pem, timeout)
    }

    /// What the server says it is in its `HELLO` reply: `server` (`redis`,
    /// `valkey`) and `version` (`7.0.15`).
    ///
    /// # Errors
    ///
    /// Fails when the server cannot be reached or its reply has no such
    /// fields.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let server = redlock_tests::harness::RedisServer::start().unwrap();
    /// let (name, version) = server.hello().unwrap();
    /// println!("{name} {version}");
    /// ```
    pub fn hello(&self) -> anyhow::Result<(String, String)> {
        let reply: Vec<redis::Value> = redis::cmd("HELLO")
            .query(&mut self.client()?)
            .context("HELLO")?;
        let field = |name: &str| -> anyhow::Result<String> {
            reply
                .chunks(2)
                .find_map(|pair| match pair {
                    [key, value] if redis::from_redis_value_ref::<String>(key).ok()? == name => {
                        redis::from_redis_value_ref::<String>(value).ok()
                    }
                    _ => None,
                })
                .ok_or_else(|| anyhow!("HELLO answered no {name}: {reply:?}"))
        };
        Ok((field("server")?, field("version")?))
    }

    /// Kills the server with SIGKILL (a crash: no shutdown save) and reaps
    /// it. Does nothing if it is not running.
    ///
    /// # Errors
    ///
    /// Fails when the process cannot be waited for.
    pub fn kill(&self) -> anyhow::Result<()> {
        let mut state = self.lock();
        stop(&mut state).context("killing redis-server")
    }

    /// Stops the process with SIGSTOP and waits until it is stopped: clients
    /// get no answer until [`RedisServer::resume`]. Its connections stay
    /// open.
    ///
    /// # Errors
    ///
    /// Fails when the server is not running.
    pub fn pause(&self) -> anyhow::Result<()> {
        let mut state = self.lock();
        reap_if_exited(&mut state);
        let pid = state.child.as_ref().map(Child::id).ok_or_else(|| {
            anyhow!(
                "cannot pause: redis-server on port {} is not running",
                self.port
            )
        })?;
        send(pid, Signal::SIGSTOP)?;
        state.paused = true;
        wait_stopped(pid, true)
    }

    /// Continues a paused server (SIGCONT) and waits until it runs again.
    /// Does nothing if it is not paused.
    ///
    /// # Errors
    ///
    /// Fails when the signal cannot be sent.
    pub fn resume(&self) -> anyhow::Result<()> {
        let mut state = self.lock();
        if !state.paused {
            return Ok(());
        }
        let Some(pid) = state.child.as_ref().map(Child::id) else {
            state.paused = false;
            return Ok(());
        };
        send(pid, Signal::SIGCONT)?;
        state.paused = false;
        wait_stopped(pid, false)
    }

    /// Kills the server (SIGKILL, if it is running) and starts it again on
    /// the same port with the same directory and configuration, then waits
    /// until it is ready. With [`Persistence::AofAlways`](super::Persistence)
    /// the keys come back; without persistence they are gone. While the port
    /// is briefly unavailable it keeps trying until the ready timeout.
    ///
    /// # Errors
    ///
    /// Fails when the server cannot be started again on its port in time.
    pub fn restart(&self) -> anyhow::Result<()> {
        self.kill()?;
        let timeout = self.ready_timeout();
        let deadline = Instant::now() + timeout;
        loop {
            match self.spawn_and_wait()? {
                Spawned::Ready => return Ok(()),
                Spawned::PortTaken(log) if Instant::now() >= deadline => bail!(
                    "restarting redis-server: port {} still in use after {timeout:?}\n\
                     --- log of the last try ---\n{log}",
                    self.port
                ),
                Spawned::PortTaken(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn ready_timeout(&self) -> Duration {
        self.options.ready_timeout.unwrap_or(READY_TIMEOUT)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Spawns the process with the config file as it is and waits until it
    /// answers, or reports that its port was taken.
    fn spawn_and_wait(&self) -> anyhow::Result<Spawned> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&self.log_path)
            .with_context(|| format!("opening {}", self.log_path.display()))?;
        let log_start = log.seek(SeekFrom::End(0))?;
        // In a session of its own: `setsid` (not a group leader here, so it
        // does not fork) makes one and execs the server under its own pid.
        let mut command = if self.options.own_session {
            let mut c = Command::new("setsid");
            c.arg(&self.binary);
            c
        } else {
            Command::new(&self.binary)
        };
        let child = command
            .arg(&self.config_path)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .spawn()
            .map_err(|e| {
                let binary = self.binary.to_string_lossy();
                if e.kind() == std::io::ErrorKind::NotFound {
                    anyhow!(
                        "`{binary}` not found: the real-Redis tests need redis-server \
                         (e.g. `apt-get install redis-server`, or set REDIS_SERVER to its path)"
                    )
                } else {
                    anyhow!(e).context(format!("spawning `{binary}`"))
                }
            })?;
        let pid = child.id();
        {
            let mut state = self.lock();
            state.child = Some(child);
            state.paused = false;
        }
        let new_log = |log: &mut std::fs::File| {
            let mut text = String::new();
            let _ = log
                .seek(SeekFrom::Start(log_start))
                .and_then(|_| log.read_to_string(&mut text));
            text
        };
        let timeout = self.ready_timeout();
        let deadline = Instant::now() + timeout;
        let mut last_error = anyhow!("not probed yet");
        loop {
            let exited = {
                let mut state = self.lock();
                match state.child.as_mut().map(Child::try_wait).transpose()? {
                    Some(Some(status)) => {
                        state.child = None;
                        Some(status)
                    }
                    Some(None) => None,
                    None => bail!(
                        "redis-server on port {} was killed while starting",
                        self.port
                    ),
                }
            };
            if let Some(status) = exited {
                let text = new_log(&mut log);
                if text.contains("Address already in use") {
                    return Ok(Spawned::PortTaken(text));
                }
                bail!(
                    "redis-server (pid {pid}, port {}) exited with {status} before it was ready\n\
                     --- log ---\n{text}",
                    self.port
                );
            }
            match self.probe(pid) {
                Ok(()) => return Ok(Spawned::Ready),
                Err(e) => last_error = e,
            }
            if Instant::now() >= deadline {
                self.kill()?;
                bail!(
                    "redis-server (pid {pid}, port {}) not ready within {timeout:?}; \
                     last probe: {last_error:#}\n--- log ---\n{}",
                    self.port,
                    new_log(&mut log)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ready means: the server answering is process `pid`, it has loaded its
    /// data (no `LOADING`), and it answers `PING`.
    fn probe(&self, pid: u32) -> anyhow::Result<()> {
        let mut con = self.client_with_timeout(PROBE_TIMEOUT)?;
        // INFO is served while loading; PING is not.
        let server: String = redis::cmd("INFO").arg("server").query(&mut con)?;
        let answering = info_field(&server, "process_id").and_then(|id| id.parse::<u32>().ok());
        if answering != Some(pid) {
            bail!(
                "{} is answered by process {answering:?}, not {pid}",
                redact(&self.admin_url())
            );
        }
        let persistence: String = redis::cmd("INFO").arg("persistence").query(&mut con)?;
        for field in ["loading", "async_loading"] {
            if info_field(&persistence, field).is_some_and(|v| v != "0") {
                bail!("still loading its data ({field})");
            }
        }
        let pong: String = redis::cmd("PING").query(&mut con)?;
        anyhow::ensure!(pong == "PONG", "PING answered {pong:?}");
        Ok(())
    }
}

/// The value of `field` in an `INFO` reply.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// Kills and reaps the child if there is one; resumes it first if paused.
fn stop(state: &mut State) -> std::io::Result<()> {
    let paused = std::mem::replace(&mut state.paused, false);
    let Some(mut child) = state.child.take() else {
        return Ok(());
    };
    if paused {
        let _ = send(child.id(), Signal::SIGCONT);
    }
    // Fails only if the child was reaped already; wait() then returns at once.
    let _ = child.kill();
    child.wait().map(drop)
}

/// Forgets a child that exited on its own (reaping it).
fn reap_if_exited(state: &mut State) {
    if let Some(child) = state.child.as_mut() {
        if !matches!(child.try_wait(), Ok(None)) {
            state.child = None;
            state.paused = false;
        }
    }
}

fn format_url(tls: bool, port: u16, user: Option<&str>, password: Option<&str>) -> String {
    let scheme = if tls { "rediss" } else { "redis" };
    let userinfo = match (user, password) {
        (None, None) => String::new(),
        (Some(user), None) => format!("{}@", encode(user)),
        (user, Some(password)) => {
            format!("{}:{}@", encode(user.unwrap_or("")), encode(password))
        }
    };
    format!("{scheme}://{userinfo}127.0.0.1:{port}")
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let _ = stop(state);
    }
}

impl fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisServer")
            .field("url", &redact(&self.url()))
            .field("pid", &self.pid())
            .field("paused", &self.is_paused())
            .field("dir", &self.dir.path())
            .field("options", &self.options)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::format_url;

    #[test]
    fn urls() {
        assert_eq!(format_url(false, 1, None, None), "redis://127.0.0.1:1");
        assert_eq!(
            format_url(true, 2, Some("u"), Some("p w@")),
            "rediss://u:p%20w%40@127.0.0.1:2"
        );
        assert_eq!(
            format_url(false, 3, None, Some("pw")),
            "redis://:pw@127.0.0.1:3"
        );
    }
}
