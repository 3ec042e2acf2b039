//! The manager's settings as its builder validated them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::Settings;
use crate::{Clock, ConfigError, Ttl};

/// Validated manager settings (built by [`Builder`](crate::Builder)): what
/// the engine decides with ([`Settings`], the one place of the node
/// timeout, drift, retry delay and fencing) and what only the runtime needs.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) settings: Settings,
    pub(crate) acquire_timeout: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) jitter_seed: Option<u64>,
    pub(crate) queue_depth: usize,
    /// Waiters are woken by the nodes' release notifications (on by
    /// default; only with the system clock).
    pub(crate) wake_ups: bool,
    /// A lone caller sends its rounds itself ([`Builder::own_rounds`](crate::Builder::own_rounds)).
    pub(crate) own_rounds: bool,
    /// Several callers' rounds go through one poller thread
    /// ([`Builder::poller`](crate::Builder::poller)).
    pub(crate) poller: bool,
    /// How many callers must be driving rounds at once for a round to go
    /// through the poller ([`Builder::poller_from`](crate::Builder::poller_from)).
    pub(crate) poller_from: usize,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("settings", &self.settings)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("clock", &self.clock)
            .field("wake_ups", &self.wake_ups)
            .field("own_rounds", &self.own_rounds)
            .field("poller", &self.poller)
            .field("poller_from", &self.poller_from)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Validates a TTL for a lock request: in range and longer than its drift.
    pub(crate) fn check_ttl(&self, ttl: Duration) -> Result<Ttl, ConfigError> {
        let ttl = Ttl::new(ttl)?;
        let drift = self.settings.drift(ttl);
        if drift >= ttl.as_duration() {
            return Err(ConfigError::TtlWithinDrift {
                ttl: ttl.as_duration(),
                drift,
            });
        }
        Ok(ttl)
    }
}
