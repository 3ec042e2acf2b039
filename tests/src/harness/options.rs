//! Which kind of server to start: persistence, TLS, credentials, extra config.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::{RedisServer, ServerKind};

/// What a server keeps across a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Persistence {
    /// Nothing: `save ""` and `appendonly no`. A restart loses every key.
    #[default]
    None,
    /// An append-only file synced on every write (`appendonly yes`,
    /// `appendfsync always`). Keys survive even a `kill -9`.
    AofAlways,
}

/// A Redis ACL user, by default limited to the keys `locks:*` and the
/// commands a lock needs.
///
/// # Examples
///
/// ```
/// use redlock_tests::harness::{AclUser, ServerOptions};
/// let options = ServerOptions::new().acl_user(AclUser::locker());
/// let custom = AclUser::new("app", "pw").keys("~app:*");
/// # let _ = (options, custom);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct AclUser {
    name: String,
    password: String,
    keys: String,
    commands: Vec<String>,
}

impl AclUser {
    /// The user `locker` with password `locker-secret`, keys `~locks:*`.
    pub fn locker() -> Self {
        Self::new("locker", "locker-secret")
    }

    /// A user with this name and password, keys `~locks:*` and the command
    /// rules of [`AclUser::default_commands`].
    pub fn new(name: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            password: password.into(),
            keys: "~locks:*".to_owned(),
            commands: Self::default_commands(),
        }
    }

    /// The command rules a lock user gets by default: no command but reads,
    /// writes, scripting (`EVAL`, `EVALSHA`, `SCRIPT LOAD` ...) and
    /// connection handling (`AUTH`, `PING`, `HELLO`, `SELECT` ...), and none
    /// flagged `@dangerous` (`CONFIG`, `FLUSHALL`, `KEYS` ...). Reads and
    /// writes are limited further by the key pattern.
    pub fn default_commands() -> Vec<String> {
        [
            "-@all",
            "+@read",
            "+@write",
            "+@scripting",
            "+@connection",
            "+select",
            "-@dangerous",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// Replaces the key pattern(s), in ACL syntax, e.g. `"~locks:* ~fence:*"`.
    pub fn keys(mut self, pattern: impl Into<String>) -> Self {
        self.keys = pattern.into();
        self
    }

    /// Replaces the command rules, in ACL syntax (`+set`, `-@all` ...).
    pub fn commands<S: Into<String>>(mut self, rules: impl IntoIterator<Item = S>) -> Self {
        self.commands = rules.into_iter().map(Into::into).collect();
        self
    }

    /// The user name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The user's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The `user ...` line for redis.conf.
    pub(crate) fn config_line(&self) -> String {
        format!(
            "user {} on {} {} resetchannels {}",
            quote(&self.name),
            quote(&format!(">{}", self.password)),
            self.keys,
            self.commands.join(" ")
        )
    }
}

impl fmt::Debug for AclUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclUser")
            .field("name", &self.name)
            .field("password", &"***")
            .field("keys", &self.keys)
            .field("commands", &self.commands)
            .finish()
    }
}

/// How to start a [`RedisServer`]. Defaults: no persistence, plain TCP, no
/// password, no ACL user, ready within 10 s.
///
/// # Examples
///
/// ```no_run
/// use redlock_tests::harness::{AclUser, ServerOptions};
/// let server = ServerOptions::new()
///     .aof()
///     .tls()
///     .password("admin-pw")
///     .acl_user(AclUser::locker())
///     .config("maxmemory", "1mb")
///     .config("maxmemory-policy", "noeviction")
///     .start()
///     .unwrap();
/// ```
#[derive(Clone, Default)]
pub struct ServerOptions {
    pub(crate) persistence: Persistence,
    pub(crate) tls: bool,
    pub(crate) password: Option<String>,
    pub(crate) acl_user: Option<AclUser>,
    pub(crate) extra: Vec<(String, String)>,
    pub(crate) binary: Option<OsString>,
    pub(crate) kind: Option<ServerKind>,
    pub(crate) first_port: Option<u16>,
    pub(crate) ready_timeout: Option<Duration>,
    pub(crate) own_session: bool,
    pub(crate) config_file: Option<PathBuf>,
}

impl ServerOptions {
    /// The defaults: no persistence, plain TCP, no credentials.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets what survives a restart. Defaults to [`Persistence::None`].
    pub fn persistence(mut self, persistence: Persistence) -> Self {
        self.persistence = persistence;
        self
    }

    /// Shorthand for [`Persistence::AofAlways`].
    pub fn aof(self) -> Self {
        self.persistence(Persistence::AofAlways)
    }

    /// Serves TLS only (`port 0`, `tls-port P`, `tls-auth-clients no`) with a
    /// certificate signed by [`test_ca_pem`](super::test_ca_pem); the URL
    /// becomes `rediss://`.
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Sets `requirepass`: the default user needs this password. URLs and
    /// [`RedisServer::client`] use it.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Adds an ACL user. [`RedisServer::url`] then logs in as this user;
    /// [`RedisServer::client`] still uses the default (admin) user.
    pub fn acl_user(mut self, user: AclUser) -> Self {
        self.acl_user = Some(user);
        self
    }

    /// Adds a `name value` line to redis.conf, e.g.
    /// `config("maxmemory", "1mb")`. The value is written verbatim (quote it
    /// yourself where redis.conf needs quotes); later lines win.
    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra.push((name.into(), value.into()));
        self
    }

    /// Runs this binary instead of `$REDIS_SERVER` or `redis-server` from
    /// `PATH` (or the [`kind`](Self::kind)'s binary).
    pub fn binary(mut self, path: impl Into<OsString>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// Runs this kind's binary ([`ServerKind::binary`]) instead of
    /// `$REDIS_SERVER` or `redis-server` from `PATH`; starting fails, saying
    /// how to install it, when it is missing. A [`binary`](Self::binary)
    /// given as well wins.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use redlock_tests::harness::{ServerKind, ServerOptions};
    /// let valkey = ServerOptions::new().kind(ServerKind::Valkey91).start().unwrap();
    /// # let _ = valkey;
    /// ```
    pub fn kind(mut self, kind: ServerKind) -> Self {
        self.kind = Some(kind);
        self
    }

    /// The binary a server with these options runs: [`binary`](Self::binary),
    /// else the [`kind`](Self::kind)'s, else `$REDIS_SERVER`, else
    /// `redis-server`.
    ///
    /// # Errors
    ///
    /// When a kind is asked for whose binary is missing.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_tests::harness::ServerOptions;
    /// let options = ServerOptions::new().binary("/opt/redis/bin/redis-server");
    /// assert_eq!(options.resolve_binary().unwrap(), "/opt/redis/bin/redis-server");
    /// ```
    pub fn resolve_binary(&self) -> anyhow::Result<OsString> {
        if let Some(binary) = &self.binary {
            return Ok(binary.clone());
        }
        if let Some(kind) = self.kind {
            return kind.binary();
        }
        Ok(std::env::var_os("REDIS_SERVER")
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "redis-server".into()))
    }

    /// Tries this port first and falls back to free ports when it is taken.
    /// Only for testing the harness's own retry; tests otherwise never pick
    /// ports.
    pub fn first_port(mut self, port: u16) -> Self {
        self.first_port = Some(port);
        self
    }

    /// Runs the server in a session of its own (through `setsid`, which
    /// execs it under the same process id), as a daemonized server or one
    /// started by a service manager runs: with Linux's autogroup scheduling
    /// it then gets its own share of the CPU instead of sharing the
    /// client's. Off by default: the server is the test's child in its
    /// session.
    pub fn own_session(mut self, on: bool) -> Self {
        self.own_session = on;
        self
    }

    /// Starts from this redis.conf, e.g. a shipped one (`deploy/redis.conf`):
    /// the generated file includes it first, then sets only where the
    /// server listens and keeps its files (`bind 127.0.0.1`, the port,
    /// `dir`, `logfile`, `daemonize no`) and what the other options ask
    /// for ([`password`](Self::password), [`tls`](Self::tls),
    /// [`acl_user`](Self::acl_user), [`config`](Self::config)), which win.
    /// Persistence is the file's: [`persistence`](Self::persistence) is
    /// ignored. Give an absolute path: the server runs in its own
    /// directory.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use redlock_tests::harness::ServerOptions;
    /// let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/redis.conf");
    /// let server = ServerOptions::new().config_file(conf).start().unwrap();
    /// # let _ = server;
    /// ```
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_file = Some(path.into());
        self
    }

    /// How long a start or restart may take until the server answers `PING`.
    /// Defaults to 10 s.
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = Some(timeout);
        self
    }

    /// Starts a server with these options; see [`RedisServer::start_with`].
    ///
    /// # Errors
    ///
    /// As [`RedisServer::start_with`].
    pub fn start(self) -> anyhow::Result<RedisServer> {
        RedisServer::start_with(self)
    }

    /// The redis.conf lines for a server on `port` keeping its files in `dir`.
    pub(crate) fn config_text(
        &self,
        port: u16,
        dir: &std::path::Path,
        tls: Option<&super::tls::TlsFiles>,
    ) -> String {
        let path = |p: &std::path::Path| quote(&p.to_string_lossy());
        // Later lines win: a file included first gives way to these.
        let mut lines: Vec<String> = self
            .config_file
            .iter()
            .map(|file| format!("include {}", path(file)))
            .collect();
        lines.extend([
            "bind 127.0.0.1".to_owned(),
            "daemonize no".to_owned(),
            "logfile \"\"".to_owned(),
            format!("dir {}", path(dir)),
        ]);
        if self.config_file.is_none() {
            lines.push("save \"\"".to_owned());
        }
        match tls {
            Some(files) => lines.extend([
                "port 0".to_owned(),
                format!("tls-port {port}"),
                format!("tls-cert-file {}", path(&files.cert)),
                format!("tls-key-file {}", path(&files.key)),
                format!("tls-ca-cert-file {}", path(&files.ca)),
                "tls-auth-clients no".to_owned(),
            ]),
            None => lines.push(format!("port {port}")),
        }
        match self.persistence {
            // The included file's own.
            _ if self.config_file.is_some() => {}
            Persistence::None => lines.push("appendonly no".to_owned()),
            Persistence::AofAlways => {
                lines.extend(["appendonly yes".to_owned(), "appendfsync always".to_owned()]);
            }
        }
        if let Some(password) = &self.password {
            lines.push(format!("requirepass {}", quote(password)));
        }
        if let Some(user) = &self.acl_user {
            lines.push(user.config_line());
        }
        lines.extend(
            self.extra
                .iter()
                .map(|(name, value)| format!("{name} {value}")),
        );
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }
}

impl fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerOptions")
            .field("persistence", &self.persistence)
            .field("tls", &self.tls)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("acl_user", &self.acl_user)
            .field("extra", &self.extra)
            .field("own_session", &self.own_session)
            .field("binary", &self.binary)
            .field("kind", &self.kind)
            .field("first_port", &self.first_port)
            .field("ready_timeout", &self.ready_timeout)
            .field("config_file", &self.config_file)
            .finish()
    }
}

/// A double-quoted redis.conf argument.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}
