//! Is a set of masters fit for Redlock? Asks each one, on a connection of
//! its own, what `docs/operations.md` requires: reachable, a master, not
//! evicting keys, how it persists, and not the same server as another URL.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use redis::Value;
use redlock_core::backend::KeyView;
use redlock_core::model::Command;
use redlock_core::{Identity, NodeId};

use crate::builder::Target;
use crate::error::Stage;
use crate::ops::{Resp, Via};
use crate::session::Failure;
use crate::wire::{deadline_in, Wire};
use crate::{RedisBackend, RedisNodeError};

/// How bad a [`Finding`] is.
///
/// # Examples
///
/// ```
/// use redlock_redis::Severity;
/// assert!(Severity::Error > Severity::Warning);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// Worth knowing; the deployment is still fit.
    Warning,
    /// The deployment is not fit for Redlock until it is fixed.
    Error,
}

/// One thing [`check_deployment`] found, in words that name the server.
///
/// # Examples
///
/// ```
/// # fn show(check: &redlock_redis::DeploymentCheck) {
/// for finding in check.findings() {
///     println!("{:?}: {}", finding.severity(), finding);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    severity: Severity,
    message: String,
}

impl Finding {
    fn error(message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Error,
            message: message.into(),
        }
    }

    fn warning(message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Warning,
            message: message.into(),
        }
    }

    /// How bad it is.
    ///
    /// # Examples
    ///
    /// See [`Finding`].
    #[must_use]
    pub fn severity(&self) -> Severity {
        self.severity
    }

    /// What was found (no password, no full URL).
    ///
    /// # Examples
    ///
    /// See [`Finding`].
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What one reachable server said about itself.
///
/// # Examples
///
/// ```
/// # fn show(check: &redlock_redis::DeploymentCheck) {
/// for server in check.servers() {
///     if let Ok(info) = server.info() {
///         println!("{}: {} {} {} in {:?}", server.node(), info.server, info.version, info.role, info.latency);
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerInfo {
    /// What the server is: `server_name` (`valkey`), or `redis` where it
    /// does not say (Redis does not).
    pub server: String,
    /// The server's own version: `valkey_version` on Valkey (whose
    /// `redis_version` is the Redis version it is compatible with, 7.2.4
    /// for Valkey 9), else `redis_version`.
    pub version: String,
    /// `role`: `master` or `slave`.
    pub role: String,
    /// `redis_mode`: `standalone`, `cluster` or `sentinel`.
    pub mode: String,
    /// `run_id`: the same for every URL that reaches this server.
    pub run_id: String,
    /// How long a `PING` took.
    pub latency: Duration,
    /// `maxmemory_policy`, when reported.
    pub maxmemory_policy: Option<String>,
    /// Whether the append-only file is on (`aof_enabled`).
    pub aof: bool,
    /// `appendfsync` (`CONFIG GET`), when the user may read it.
    pub appendfsync: Option<String>,
    /// The RDB snapshot rules (`CONFIG GET save`; empty: none), when the
    /// user may read them.
    pub save: Option<String>,
    /// `connected_slaves`: replicas attached to it.
    pub replicas: u32,
}

/// One URL's part of a [`DeploymentCheck`].
///
/// # Examples
///
/// See [`ServerInfo`].
#[derive(Debug)]
pub struct ServerCheck {
    node: NodeId,
    info: Result<ServerInfo, RedisNodeError>,
    findings: Vec<Finding>,
}

impl ServerCheck {
    /// The server's secret-free name (`host:port/db`).
    ///
    /// # Examples
    ///
    /// See [`ServerInfo`].
    #[must_use]
    pub fn node(&self) -> &NodeId {
        &self.node
    }

    /// What the server said, or why it could not be asked.
    ///
    /// # Errors
    ///
    /// The connection's or the handshake's error (refused, timeout,
    /// authentication, ...).
    ///
    /// # Examples
    ///
    /// See [`ServerInfo`].
    pub fn info(&self) -> Result<&ServerInfo, &RedisNodeError> {
        self.info.as_ref()
    }

    /// What is wrong or worth knowing about this server.
    ///
    /// # Examples
    ///
    /// See [`Finding`].
    #[must_use]
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Whether nothing found about this server is an error.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn bad(check: &redlock_redis::DeploymentCheck) -> usize {
    /// check.servers().iter().filter(|s| !s.is_fit()).count()
    /// # }
    /// ```
    #[must_use]
    pub fn is_fit(&self) -> bool {
        self.findings.iter().all(|f| f.severity < Severity::Error)
    }
}

/// The result of [`check_deployment`]: each server's answers and findings,
/// and the findings about the deployment as a whole.
///
/// # Examples
///
/// See [`check_deployment`].
#[derive(Debug)]
pub struct DeploymentCheck {
    servers: Vec<ServerCheck>,
    findings: Vec<Finding>,
}

impl DeploymentCheck {
    /// One entry per URL, in the order given.
    ///
    /// # Examples
    ///
    /// See [`ServerInfo`].
    #[must_use]
    pub fn servers(&self) -> &[ServerCheck] {
        &self.servers
    }

    /// Findings about the deployment as a whole (how many servers, the
    /// same server under two URLs).
    ///
    /// # Examples
    ///
    /// See [`Finding`].
    #[must_use]
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Whether the deployment is fit for Redlock: no error about it or any
    /// server (warnings allowed).
    ///
    /// # Examples
    ///
    /// See [`check_deployment`].
    #[must_use]
    pub fn is_fit(&self) -> bool {
        self.findings.iter().all(|f| f.severity < Severity::Error)
            && self.servers.iter().all(ServerCheck::is_fit)
    }

    /// Whether some server could not be reached.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn f(check: &redlock_redis::DeploymentCheck) -> bool {
    /// check.any_unreachable()
    /// # }
    /// ```
    #[must_use]
    pub fn any_unreachable(&self) -> bool {
        self.servers.iter().any(|s| s.info.is_err())
    }
}

/// Checks the masters at `urls` against what `docs/operations.md` asks of
/// a Redlock deployment, each on a connection of its own, all at once:
/// opening it takes at most twice `timeout` (connecting, then the
/// handshake) and each of its four requests at most `timeout`, so a server
/// costs six times `timeout` at most, whatever it sends:
///
/// - errors: a server that cannot be reached; one that is a replica, or in
///   cluster or sentinel mode; a `maxmemory-policy` other than `noeviction`
///   (every other policy may evict lock keys); two URLs that reach the same
///   server (the same `run_id`: two host names, or two databases of one
///   server), which count once; no URL at all;
/// - warnings: no append-only file with `appendfsync always` (restarts must
///   then be delayed by the largest TTL), a master with replicas attached,
///   fewer than three servers, an even number of servers.
///
/// # Errors
///
/// A URL that does not parse, or a zero `timeout`
/// ([`RedisErrorKind::InvalidUrl`](crate::RedisErrorKind::InvalidUrl),
/// [`InvalidConfig`](crate::RedisErrorKind::InvalidConfig)).
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// let check = redlock_redis::check_deployment(
///     ["redis://a:6379", "redis://b:6379", "redis://c:6379"],
///     Duration::from_secs(1),
/// )?;
/// for server in check.servers() {
///     for finding in server.findings() {
///         eprintln!("{}: {finding}", server.node());
///     }
/// }
/// assert!(check.is_fit());
/// # Ok::<(), redlock_redis::RedisNodeError>(())
/// ```
pub fn check_deployment<I>(urls: I, timeout: Duration) -> Result<DeploymentCheck, RedisNodeError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let targets = urls
        .into_iter()
        .map(|url| {
            RedisBackend::builder(url.as_ref())
                .node_timeout(timeout)
                .target()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let infos: Vec<Result<ServerInfo, RedisNodeError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .map(|target| scope.spawn(move || ask(target, true)))
            .collect();
        handles
            .into_iter()
            .zip(&targets)
            .map(|(handle, target)| {
                handle.join().unwrap_or_else(|_| {
                    Err(RedisNodeError::new(
                        target.node.clone(),
                        crate::RedisErrorKind::Io,
                        Stage::Connect,
                        "the check of this server failed",
                    ))
                })
            })
            .collect()
    });
    let mut servers: Vec<ServerCheck> = targets
        .iter()
        .zip(infos)
        .map(|(target, info)| {
            let findings = judge_server(&info);
            ServerCheck {
                node: target.node.clone(),
                info,
                findings,
            }
        })
        .collect();
    let mut findings = Vec::new();
    let n = servers.len();
    match n {
        0 => findings.push(Finding::error("no servers were given")),
        1 | 2 => findings.push(Finding::warning(format!(
            "{n} server(s) tolerate no failure: run 3 or 5 independent masters"
        ))),
        _ if n.is_multiple_of(2) => findings.push(Finding::warning(format!(
            "{n} servers tolerate no more failures than {}",
            n - 1
        ))),
        _ => {}
    }
    same_servers(&targets, &mut servers, &mut findings);
    Ok(DeploymentCheck { servers, findings })
}

/// Adds an error for every URL that reaches a server listed before it.
fn same_servers(targets: &[Target], servers: &mut [ServerCheck], findings: &mut Vec<Finding>) {
    let mut first_of: HashMap<String, usize> = HashMap::new();
    let mut duplicates = 0;
    for i in 0..servers.len() {
        let Ok(info) = &servers[i].info else {
            continue;
        };
        let run_id = info.run_id.clone();
        match first_of.get(&run_id) {
            None => {
                first_of.insert(run_id, i);
            }
            Some(&first) => {
                duplicates += 1;
                let same_db = targets[first].endpoint.db == targets[i].endpoint.db;
                let why = if same_db {
                    "it counts once and never grants twice, so fault tolerance is lower than the number of URLs suggests"
                } else {
                    "a key lives in one database, so this server grants the lock once per database and breaks the majority"
                };
                let message = format!(
                    "{} and {} are the same server (run_id {}): {why}",
                    servers[first].node,
                    servers[i].node,
                    short(&run_id)
                );
                servers[i].findings.push(Finding::error(message));
            }
        }
    }
    if duplicates > 0 {
        let distinct = servers.len() - duplicates;
        findings.push(Finding::error(format!(
            "{} URLs reach only {distinct} distinct server(s): list each master once",
            servers.len()
        )));
    }
}

fn short(run_id: &str) -> &str {
    run_id.get(..8).unwrap_or(run_id)
}

fn judge_server(info: &Result<ServerInfo, RedisNodeError>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let info = match info {
        Ok(info) => info,
        Err(err) => {
            findings.push(Finding::error(format!("unreachable: {err}")));
            return findings;
        }
    };
    if info.role != "master" {
        findings.push(Finding::error(format!(
            "role {}: a replica is not a lock master (writes fail READONLY, and a promoted replica may have missed locks)",
            info.role
        )));
    }
    if info.mode != "standalone" {
        findings.push(Finding::error(format!(
            "redis_mode {}: use standalone masters, not a cluster or sentinel",
            info.mode
        )));
    }
    match info.maxmemory_policy.as_deref() {
        Some("noeviction") => {}
        Some(policy) => findings.push(Finding::error(format!(
            "maxmemory-policy {policy} may evict lock keys: set noeviction"
        ))),
        None => findings.push(Finding::warning(
            "maxmemory-policy not reported: make sure it is noeviction",
        )),
    }
    match (info.aof, info.appendfsync.as_deref()) {
        (true, Some("always")) => {}
        (aof, fsync) => findings.push(Finding::warning(format!(
            "persistence: aof {}, appendfsync {}: keep a restarted server out for longer than the largest TTL (delayed restart), and fencing counters may go back",
            if aof { "on" } else { "off" },
            fsync.unwrap_or("unknown")
        ))),
    }
    if info.replicas > 0 {
        findings.push(Finding::warning(format!(
            "{} replica(s) attached: never fail over to them",
            info.replicas
        )));
    }
    findings
}

/// Two of `targets` (the smaller index first) with different node ids and
/// the same `run_id`; targets that cannot be asked are skipped. Each is
/// asked within four of its timeouts (connecting, the handshake, `PING`
/// and `INFO`), all at once.
pub(crate) fn same_server(targets: &[&Target]) -> Option<(usize, usize)> {
    if targets.len() < 2 {
        return None;
    }
    let run_ids: Vec<Option<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .map(|target| scope.spawn(move || ask(target, false).ok().map(|info| info.run_id)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    for (j, second) in run_ids.iter().enumerate() {
        for (i, first) in run_ids.iter().enumerate().take(j) {
            if first.is_some()
                && first == second
                && !first.as_deref().is_some_and(str::is_empty)
                && targets[i].node != targets[j].node
            {
                return Some((i, j));
            }
        }
    }
    None
}

/// Asks the server at `target` about itself; with `full`, also its
/// latency and the settings behind the findings.
fn ask(target: &Target, full: bool) -> Result<ServerInfo, RedisNodeError> {
    let error = |stage, err| {
        RedisNodeError::from_redis(target.node.clone(), stage, err, target.password.as_ref())
    };
    let mut wire = Wire::connect(&target.endpoint, target.timeout, &[])
        .map_err(|e| error(Stage::Connect, e))?;
    let mut call = |words: &[&[u8]]| -> Result<Value, RedisNodeError> {
        let mut packed = Vec::new();
        let mut resp = Resp(&mut packed);
        resp.command(words.len());
        for word in words {
            resp.bulk(word);
        }
        // Each request and its reply within the timeout.
        let deadline = deadline_in(target.timeout);
        wire.write(&packed, deadline)
            .map_err(|e| error(Stage::Command, e.into()))?;
        match wire.read(deadline).map_err(|e| error(Stage::Command, e))? {
            Value::ServerError(err) => Err(error(Stage::Command, err.into())),
            value => Ok(value),
        }
    };
    let start = Instant::now();
    call(&[b"PING".as_slice()])?;
    let latency = start.elapsed();
    let info: &[&[u8]] = if full {
        &[b"INFO"]
    } else {
        &[b"INFO", b"server"]
    };
    let text = match call(info)? {
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::VerbatimString { text, .. } => text,
        _ => String::new(),
    };
    let fields: HashMap<&str, &str> = text
        .lines()
        .filter_map(|line| line.trim_end().split_once(':'))
        .collect();
    let field = |name: &str| fields.get(name).map(|v| (*v).to_owned());
    let mut config = |name: &str| -> Option<String> {
        match call(&[b"CONFIG".as_slice(), b"GET", name.as_bytes()]).ok()? {
            Value::Array(items) => match items.get(1)? {
                Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
                _ => None,
            },
            _ => None,
        }
    };
    let (appendfsync, save) = if full {
        (config("appendfsync"), config("save"))
    } else {
        (None, None)
    };
    let server = field("server_name").unwrap_or_else(|| "redis".to_owned());
    let version = field(&format!("{server}_version"))
        .or_else(|| field("redis_version"))
        .unwrap_or_default();
    Ok(ServerInfo {
        server,
        version,
        role: field("role").unwrap_or_else(|| "master".to_owned()),
        mode: field("redis_mode").unwrap_or_else(|| "standalone".to_owned()),
        run_id: field("run_id").unwrap_or_default(),
        latency,
        maxmemory_policy: field("maxmemory_policy"),
        aof: field("aof_enabled").as_deref() == Some("1"),
        appendfsync,
        save,
        replicas: field("connected_slaves")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
    })
}

/// Who holds one lock key on one server, as [`key_status`] found it.
///
/// # Examples
///
/// See [`key_status`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyState {
    /// The time left before the key expires, `None` when it is not held
    /// (or, for a key without expiry, which this library never writes,
    /// `Some(Duration::MAX)`).
    pub ttl: Option<Duration>,
    /// The first three bytes of the token, in hex (never the whole token),
    /// when held. A read-write lock's key that readers hold shows its
    /// marker's (`redlock:readers`): `726564`.
    pub token_prefix: Option<String>,
    /// The holder's manager's identity, when held by a manager that has
    /// one (see `Builder::identity` of `redlock-core`).
    pub holder: Option<Identity>,
    /// The resource's fencing counter on this server, when it has one.
    pub fence: Option<u64>,
    /// What the server said, for `Holder::of_views`.
    view: KeyView,
}

impl KeyState {
    /// Whether the key is held on this server.
    ///
    /// # Examples
    ///
    /// See [`key_status`].
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.ttl.is_some()
    }

    /// The server's view of the key, for
    /// [`Holder::of_views`](redlock_core::backend::Holder::of_views), which
    /// tells who holds it on a quorum.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redlock_core::backend::Holder;
    /// let urls = ["redis://a:6379", "redis://b:6379", "redis://c:6379"];
    /// let states = redlock_redis::key_status(urls, "job", Duration::from_secs(1))?;
    /// let views: Vec<_> = states.iter().map(|(_, s)| s.as_ref().ok().map(|s| s.view().clone())).collect();
    /// if let Some(holder) = Holder::of_views(&views, urls.len()) {
    ///     println!("held by {:?} for {:?} more", holder.identity(), holder.ttl());
    /// }
    /// # Ok::<(), redlock_redis::RedisNodeError>(())
    /// ```
    #[must_use]
    pub fn view(&self) -> &KeyView {
        &self.view
    }
}

/// How many bytes of a token [`key_status`] shows.
const SHOWN_TOKEN_BYTES: usize = 3;

/// Looks at lock key `key` on each server at `urls` (all at once, each
/// within three times `timeout`: connecting, the handshake, and one
/// pipeline): whether it is held, for how long still, and the
/// first bytes of its token. One entry per URL, in order, with the
/// server's secret-free name.
///
/// # Errors
///
/// A URL that does not parse or a zero `timeout`, as [`check_deployment`];
/// per server, the error that kept it from answering.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// let states = redlock_redis::key_status(["redis://a:6379", "redis://b:6379"], "job", Duration::from_secs(1))?;
/// for (node, state) in states {
///     match state {
///         Ok(state) if state.is_held() => println!("{node}: held, {:?} left", state.ttl),
///         Ok(_) => println!("{node}: free"),
///         Err(err) => println!("{node}: {err}"),
///     }
/// }
/// # Ok::<(), redlock_redis::RedisNodeError>(())
/// ```
#[allow(clippy::type_complexity)] // a list of (node, answer) is the plainest shape
pub fn key_status<I>(
    urls: I,
    key: &str,
    timeout: Duration,
) -> Result<Vec<(NodeId, Result<KeyState, RedisNodeError>)>, RedisNodeError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let states = keys_status(urls, &[key], timeout)?;
    Ok(states
        .into_iter()
        .map(|(node, states)| {
            let state = states.and_then(|states| {
                states.into_iter().next().ok_or_else(|| {
                    RedisNodeError::new(
                        node.clone(),
                        crate::RedisErrorKind::Io,
                        Stage::Command,
                        "no answer for the key",
                    )
                })
            });
            (node, state)
        })
        .collect())
}

/// [`key_status`] for several keys at once, such as the permit keys of a
/// semaphore (`name:permit:0` ...): one connection per server, all the
/// keys' commands in one pipeline. One entry per URL, in order, with the
/// states of `keys` in their order.
///
/// # Errors
///
/// As [`key_status`].
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// let permits: Vec<String> = (0..3).map(|i| format!("jobs:permit:{i}")).collect();
/// let states = redlock_redis::keys_status(["redis://a:6379", "redis://b:6379"], &permits, Duration::from_secs(1))?;
/// for (node, states) in states {
///     let held = states.map(|states| states.iter().filter(|s| s.is_held()).count());
///     println!("{node}: {held:?} of 3 permits held");
/// }
/// # Ok::<(), redlock_redis::RedisNodeError>(())
/// ```
#[allow(clippy::type_complexity)] // a list of (node, answers) is the plainest shape
pub fn keys_status<I, K>(
    urls: I,
    keys: &[K],
    timeout: Duration,
) -> Result<Vec<(NodeId, Result<Vec<KeyState>, RedisNodeError>)>, RedisNodeError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
    K: AsRef<str> + Sync,
{
    let targets = urls
        .into_iter()
        .map(|url| {
            RedisBackend::builder(url.as_ref())
                .node_timeout(timeout)
                .target()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .map(|target| scope.spawn(move || look(target, keys)))
            .collect();
        handles
            .into_iter()
            .zip(&targets)
            .map(|(handle, target)| {
                let state = handle.join().unwrap_or_else(|_| {
                    Err(RedisNodeError::new(
                        target.node.clone(),
                        crate::RedisErrorKind::Io,
                        Stage::Command,
                        "the look at this server failed",
                    ))
                });
                (target.node.clone(), state)
            })
            .collect()
    }))
}

/// The inspect script (by `EVAL`: a connection of its own, without the
/// scripts loaded) for each of `keys` on one server, pipelined.
fn look<K: AsRef<str>>(target: &Target, keys: &[K]) -> Result<Vec<KeyState>, RedisNodeError> {
    let error = |stage, err| {
        RedisNodeError::from_redis(target.node.clone(), stage, err, target.password.as_ref())
    };
    let mut wire = Wire::connect(&target.endpoint, target.timeout, &[])
        .map_err(|e| error(Stage::Connect, e))?;
    let mut packed = Vec::new();
    for key in keys {
        let command = Command::Inspect {
            key: key.as_ref(),
            watcher: None,
        };
        crate::ops::write(&mut packed, Via::Body, &command);
    }
    // The whole pipeline within the timeout.
    let deadline = deadline_in(target.timeout);
    wire.write(&packed, deadline)
        .map_err(|e| error(Stage::Command, e.into()))?;
    let mut states = Vec::with_capacity(keys.len());
    for _ in keys {
        let reply = match wire.read(deadline).map_err(|e| error(Stage::Command, e))? {
            Value::ServerError(err) => return Err(error(Stage::Command, err.into())),
            value => value,
        };
        let view = crate::ops::inspect::read(reply).map_err(|failure| match failure {
            Failure::Reply { kind, detail } => {
                RedisNodeError::new(target.node.clone(), kind, Stage::Command, detail)
            }
            _ => RedisNodeError::new(
                target.node.clone(),
                crate::RedisErrorKind::UnexpectedReply,
                Stage::Command,
                "the inspect script's reply could not be read",
            ),
        })?;
        states.push(key_state(view));
    }
    Ok(states)
}

/// What a key's inspection says.
fn key_state(view: KeyView) -> KeyState {
    let token_prefix = view.value.as_ref().map(|bytes| {
        bytes
            .iter()
            .take(SHOWN_TOKEN_BYTES)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    });
    KeyState {
        ttl: view.ttl,
        token_prefix,
        holder: view.value.as_deref().and_then(Identity::of_value),
        fence: view.fence,
        view,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tests::within;

    fn healthy() -> ServerInfo {
        ServerInfo {
            server: "redis".to_owned(),
            version: "7.0.0".to_owned(),
            role: "master".to_owned(),
            mode: "standalone".to_owned(),
            run_id: "r".to_owned(),
            latency: Duration::from_micros(100),
            maxmemory_policy: Some("noeviction".to_owned()),
            aof: true,
            appendfsync: Some("always".to_owned()),
            save: Some(String::new()),
            replicas: 0,
        }
    }

    fn severities(info: ServerInfo) -> Vec<Severity> {
        judge_server(&Ok(info))
            .iter()
            .map(Finding::severity)
            .collect()
    }

    /// A fake server that answers the handshake, then trickles a reply
    /// that never ends to `verb` (one byte every 100 µs, so that no socket
    /// read ever waits long enough to time out), on every connection.
    fn trickling_on(verb: &'static str) -> u16 {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut reader = std::io::BufReader::new(stream.try_clone().expect("clone"));
                    while let Some(words) = crate::pool::tests::read_words(&mut reader) {
                        if words[0].eq_ignore_ascii_case(verb) {
                            let _ = stream.write_all(b"+");
                            while stream.write_all(b"a").is_ok() {
                                std::thread::sleep(Duration::from_micros(100));
                            }
                            return;
                        }
                        let _ = stream.write_all(b"+OK\r\n");
                    }
                });
            }
        });
        port
    }

    #[test]
    fn bug3_status_and_check_end_within_their_bounds_on_a_trickling_server() {
        let timeout = Duration::from_millis(200);
        // status: connect, handshake and the pipeline, a timeout each.
        let url = format!("redis://127.0.0.1:{}", trickling_on("EVAL"));
        let states = within(timeout * 3 * 10, move || {
            key_status([url], "k", timeout).expect("valid URL")
        });
        let err = states[0].1.as_ref().expect_err("never answered");
        assert_eq!(err.kind(), crate::RedisErrorKind::Timeout, "{err}");
        // check (and the same-server check at connect): connect, handshake,
        // and a timeout for each of its requests.
        let url = format!("redis://127.0.0.1:{}", trickling_on("INFO"));
        let check = within(timeout * 6 * 10, move || {
            check_deployment([url], timeout).expect("valid URL")
        });
        assert!(check.any_unreachable());
        let targets = (0..2)
            .map(|_| {
                RedisBackend::builder(format!("redis://127.0.0.1:{}", trickling_on("INFO")))
                    .node_timeout(timeout)
                    .target()
                    .expect("valid URL")
            })
            .collect::<Vec<_>>();
        let same = within(timeout * 4 * 10, move || {
            same_server(&targets.iter().collect::<Vec<_>>())
        });
        assert_eq!(same, None);
    }

    #[test]
    fn what_each_setting_is_judged() {
        assert!(severities(healthy()).is_empty());
        let cluster = ServerInfo {
            mode: "cluster".to_owned(),
            ..healthy()
        };
        assert_eq!(severities(cluster), [Severity::Error]);
        let volatile = ServerInfo {
            maxmemory_policy: Some("volatile-ttl".to_owned()),
            ..healthy()
        };
        assert_eq!(severities(volatile), [Severity::Error]);
        let everysec = ServerInfo {
            appendfsync: Some("everysec".to_owned()),
            ..healthy()
        };
        assert_eq!(severities(everysec), [Severity::Warning]);
        let replicated = ServerInfo {
            replicas: 1,
            ..healthy()
        };
        assert_eq!(severities(replicated), [Severity::Warning]);
    }
}
