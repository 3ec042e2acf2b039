//! What a manager does, as it happens: an event hook for logs and metrics
//! ([`EventHandler`], r2d2's `HandleEvent` is the model) and cheap counters
//! read at any time ([`Redlock::stats`](crate::Redlock::stats)).
//!
//! With no hook set, nothing is built or sent: the counters are plain
//! relaxed atomics, each per-node one written by that node's worker alone.

mod counters;
mod hook;
mod logging;
#[cfg(feature = "metrics")]
mod metrics;
mod stats;

pub use counters::ConnectionSink;
pub(crate) use counters::{ManagerCounters, NodeCounters, Observer};
pub use hook::{
    CallKind, CallOutcome, Event, EventHandler, FailureKind, NoEvents, RoundKind, RoundRecord,
};
pub(crate) use logging::call_span;
#[cfg(feature = "tracing")]
pub use logging::TracingEvents;
#[cfg(feature = "metrics")]
pub use metrics::MetricsEvents;
pub use stats::{FailureCounts, ManagerStats, NodeStats, RoundSummary, Stats};
