//! The manager's settings as its builder validated them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{drift, Clock, ConfigError, RetryDelay, Ttl};

/// Validated manager settings (built by [`Builder`]).
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) node_timeout: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) retry: RetryDelay,
    pub(crate) acquire_timeout: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) jitter_seed: Option<u64>,
    pub(crate) queue_depth: usize,
    pub(crate) fencing: bool,
    /// Waiters are woken by the nodes' release notifications (on by
    /// default; only with the system clock).
    pub(crate) wake_ups: bool,
    /// A lone caller sends its rounds itself ([`Builder::own_rounds`](crate::Builder::own_rounds)).
    pub(crate) own_rounds: bool,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("node_timeout", &self.node_timeout)
            .field("drift_factor", &self.drift_factor)
            .field("retry", &self.retry)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("clock", &self.clock)
            .field("fencing", &self.fencing)
            .field("wake_ups", &self.wake_ups)
            .field("own_rounds", &self.own_rounds)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Validates a TTL for a lock request: in range and longer than its drift.
    pub(crate) fn check_ttl(&self, ttl: Duration) -> Result<Ttl, ConfigError> {
        let ttl = Ttl::new(ttl)?;
        let drift = self.drift(ttl);
        if drift >= ttl.as_duration() {
            return Err(ConfigError::TtlWithinDrift {
                ttl: ttl.as_duration(),
                drift,
            });
        }
        Ok(ttl)
    }

    pub(crate) fn drift(&self, ttl: Ttl) -> Duration {
        drift(ttl.as_duration(), self.drift_factor)
    }
}
