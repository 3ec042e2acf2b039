//! Events logged through `tracing` (feature `tracing`), and the span
//! around each call.

#[cfg(feature = "tracing")]
use super::stats::FailedNodes;
#[cfg(feature = "tracing")]
use super::{Event, EventHandler};

/// An event hook that logs through [`tracing`](https://docs.rs/tracing)
/// (feature `tracing`): node failures, full queues and lost locks at
/// `warn`, a node back at `info`, each call at `debug`, keep-alive
/// extensions at `trace`; nothing at `info` or above on the hot path. With
/// the feature, each call of the manager also runs in a `debug` span named
/// after it (`redlock.try_lock`, `redlock.lock`, `redlock.extend`,
/// `redlock.release`).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use redlock_core::{Redlock, TracingEvents};
/// let cluster = redlock_mock::MockCluster::new(3);
/// let locks = Redlock::builder(cluster.backends())
///     .events(Arc::new(TracingEvents))
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingEvents;

#[cfg(feature = "tracing")]
impl EventHandler for TracingEvents {
    fn on_event(&self, event: &Event<'_>) {
        match event {
            Event::Call {
                kind,
                resources,
                outcome,
                rounds,
                elapsed,
                last_round,
            } => tracing::debug!(
                target: "redlock",
                kind = %kind,
                resources = ?resources.keys(),
                outcome = %outcome,
                rounds,
                elapsed_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
                last_round = last_round.map(tracing::field::display),
                "call ended"
            ),
            Event::NodeFailed {
                node,
                kind,
                error,
                consecutive,
            } => tracing::warn!(
                target: "redlock",
                node = %node,
                kind = %kind,
                error = error.map(|e| e.to_string()),
                consecutive,
                "node request failed"
            ),
            Event::NodeRecovered {
                node,
                after_failures,
            } => {
                tracing::info!(target: "redlock", node = %node, after_failures, "node answers again")
            }
            Event::KeptAlive {
                resources,
                validity,
            } => tracing::trace!(
                target: "redlock",
                resources = ?resources.keys(),
                validity_ms = u64::try_from(validity.as_millis()).unwrap_or(u64::MAX),
                "kept alive"
            ),
            Event::Lost { resources, reason } => tracing::warn!(
                target: "redlock",
                resources = ?resources.keys(),
                reason = %reason,
                "lock lost"
            ),
            Event::HandedOff { resources } => {
                tracing::trace!(target: "redlock", resources = ?resources.keys(), "handed off");
            }
            Event::QueueFull { node } => {
                tracing::warn!(target: "redlock", node = %node, "node queue full");
            }
            Event::Round(round) => tracing::debug!(
                target: "redlock",
                kind = %round.kind,
                resources = ?round.resources.keys(),
                decision = ?round.decision,
                elapsed_us = u64::try_from(round.elapsed.as_micros()).unwrap_or(u64::MAX),
                granted = round.summary.granted,
                refused = round.summary.refused,
                failed = %FailedNodes(&round.summary.failed),
                "round decided"
            ),
            Event::Connection { node, error } => {
                tracing::warn!(target: "redlock", node = %node, error = %error, "connection error");
            }
            Event::ReleasesKept { node, count } => tracing::debug!(
                target: "redlock",
                node = %node,
                count,
                "failed releases kept for another try"
            ),
            Event::ReleasesDropped { node, count } => tracing::warn!(
                target: "redlock",
                node = %node,
                count,
                "failed releases dropped, their keys expire by TTL"
            ),
        }
    }
}

/// A `debug` span around one call of the manager (feature `tracing`).
#[cfg(feature = "tracing")]
macro_rules! call_span {
    ($name:literal, $resources:expr) => {
        let _span = tracing::debug_span!(target: "redlock", $name, resources = ?$resources.keys())
            .entered();
    };
}

/// Nothing without the `tracing` feature.
#[cfg(not(feature = "tracing"))]
macro_rules! call_span {
    ($name:literal, $resources:expr) => {
        let _ = &$resources;
    };
}

pub(crate) use call_span;
