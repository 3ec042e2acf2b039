//! The server list: `--server` options, else `REDLOCK_SERVERS`.

use std::sync::Arc;
use std::time::Duration;

use redlock_core::Identity;
use redlock_redis::{ConfigError, ConnectError, EventHandler, RedisErrorKind, Redlock};

use crate::exit::{Exit, SOFTWARE};

/// The environment variable with comma-separated server URLs.
pub(crate) const ENV: &str = "REDLOCK_SERVERS";

/// The URLs given, or a usage error when there are none.
pub(crate) fn urls(given: &[String]) -> Result<Vec<String>, Exit> {
    let urls: Vec<String> = if given.is_empty() {
        std::env::var(ENV)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .map(str::to_owned)
            .collect()
    } else {
        given.to_vec()
    };
    if urls.is_empty() {
        return Err(Exit::usage(format!(
            "no servers: give --server URL (once per master) or set {ENV}"
        )));
    }
    Ok(urls)
}

/// What a failure to connect means for the exit code.
pub(crate) fn connect_error(err: ConnectError) -> Exit {
    match err {
        ConnectError::Config(ConfigError::SameNode { .. } | ConfigError::DuplicateNode(_)) => {
            Exit::usage(format!("{err}: list each master once"))
        }
        ConnectError::Config(_) => Exit::usage(err.to_string()),
        ConnectError::Address(e)
            if matches!(
                e.kind(),
                RedisErrorKind::InvalidUrl | RedisErrorKind::InvalidConfig
            ) =>
        {
            Exit::usage(e.to_string())
        }
        other => Exit::new(SOFTWARE, other.to_string()),
    }
}

/// The manager over `urls`, with `events` as its event hook.
pub(crate) fn connect(
    urls: &[String],
    node_timeout: Duration,
    fencing: bool,
    identity: Option<Identity>,
    events: Arc<dyn EventHandler>,
) -> Result<Redlock, Exit> {
    let mut builder = Redlock::builder([])
        .node_timeout(node_timeout)
        .fencing(fencing)
        .events(events);
    if let Some(identity) = identity {
        builder = builder.identity(identity);
    }
    builder.connect(urls).map_err(connect_error)
}
