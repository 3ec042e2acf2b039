//! An event hook that records a manager's events as metrics through the
//! [`metrics`](https://docs.rs/metrics) facade (feature `metrics`), so any
//! exporter works, Prometheus included. The names, types and labels are
//! listed once, in `docs/metrics.md`; the integration test checks this file
//! against that table.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Once, OnceLock};
use std::time::{Duration, Instant};

use ::metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Histogram, Recorder, SharedString, Unit,
};
use foldhash::fast::RandomState;
use parking_lot::{Mutex, RwLock};

use crate::decide::Decision;
use crate::events::RoundKind;
use crate::{CallKind, CallOutcome, Event, EventHandler, FailureKind, LostReason, Resources};

// The metrics' names and help texts (the table of docs/metrics.md).
const CALLS: &str = "redlock_calls_total";
const CALLS_HELP: &str = "Calls of the manager that ended, by call and outcome.";
const CALL_DURATION: &str = "redlock_call_duration_seconds";
const CALL_DURATION_HELP: &str =
    "Duration of a call from its start to its end, all its rounds and pauses included.";
const LOCK_WAIT: &str = "redlock_lock_wait_seconds";
const LOCK_WAIT_HELP: &str =
    "Time a lock call spent outside its rounds: retry pauses and waiting in the manager's line.";
const LOCK_HOLD: &str = "redlock_lock_hold_seconds";
const LOCK_HOLD_HELP: &str =
    "Time from a lock call's success to the lock's release (confirmed, or sent by a dropped guard) or its loss.";
const ROUND_DURATION: &str = "redlock_round_duration_seconds";
const ROUND_DURATION_HELP: &str =
    "Duration of one round sent to every node, from its start to its decision.";
const NODE_ANSWER: &str = "redlock_node_answer_duration_seconds";
const NODE_ANSWER_HELP: &str =
    "Time from a round's start to a node's answer (grant or refusal), for answers that came before the round's decision.";
const NODE_FAILURES: &str = "redlock_node_failures_total";
const NODE_FAILURES_HELP: &str = "Requests to a node that failed, by node and kind of failure.";
const NODE_RECOVERIES: &str = "redlock_node_recoveries_total";
const NODE_RECOVERIES_HELP: &str = "Times a node answered again after failing.";
const NODE_CONSECUTIVE: &str = "redlock_node_consecutive_failures";
const NODE_CONSECUTIVE_HELP: &str =
    "Failures in a row of a node's latest requests, 0 once it answers.";
const CONNECTION_ERRORS: &str = "redlock_node_connection_errors_total";
const CONNECTION_ERRORS_HELP: &str =
    "Errors a backend reported outside any request, such as a pool's background connect.";
const RELEASES_KEPT: &str = "redlock_releases_kept_total";
const RELEASES_KEPT_HELP: &str =
    "Failed releases a node's worker kept for another try, each counted once, at its first failure.";
const RELEASES_DROPPED: &str = "redlock_releases_dropped_total";
const RELEASES_DROPPED_HELP: &str =
    "Failed releases a node's worker dropped instead of trying again; their keys expire by TTL.";
const LOCKS_LOST: &str = "redlock_locks_lost_total";
const LOCKS_LOST_HELP: &str = "Held locks found lost, by reason.";
const KEEPALIVES: &str = "redlock_keepalive_extensions_total";
const KEEPALIVES_HELP: &str = "Extensions of kept-alive locks by the keeper.";
const HANDOFFS: &str = "redlock_handoffs_total";
const HANDOFFS_HELP: &str =
    "Releases that handed the lock to the next caller waiting in the manager's line.";

/// At most this many resource sets have an open hold remembered; past it,
/// the remembered ones are forgotten (a guard dropped sends no event, so
/// its hold would otherwise stay open for ever).
const MAX_OPEN_HOLDS: usize = 4096;

thread_local! {
    /// The time this thread's lock call spent in its acquire rounds so far:
    /// a lock call's rounds are decided on its own thread, before its
    /// `Event::Call`.
    static IN_ROUNDS: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// An event hook that records a manager's [`Event`]s as metrics through
/// the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`):
/// calls by outcome, node failures by kind, lost locks, kept and dropped releases,
/// and histograms of call, wait, hold, round and node answer durations. The names
/// follow Prometheus' conventions (`redlock_` prefix, `_total` counters,
/// `_seconds` in seconds); `docs/metrics.md` lists each with its type and
/// labels. Labels stay few: never a resource's name (unbounded), and a
/// node is named by its [`NodeId`](crate::NodeId), which for Redis is the
/// address without credentials.
///
/// [`MetricsEvents::new`] records through the facade's current recorder
/// (the global one an exporter installs, such as
/// `metrics_exporter_prometheus`); install it before the manager's first
/// event: the metrics' descriptions are sent then, and the handles of the
/// metrics without a node label are registered at their first use and
/// kept.
/// [`MetricsEvents::with_recorder`] records into a recorder of its own on
/// whichever thread the event comes (callers, node workers, the keeper),
/// for tests and for a process that keeps several registries.
///
/// Hold times are derived from the events: from a lock call's success to
/// the next release call of the same resources (a confirmed
/// [`release`](crate::Lock::release) or a guard dropped) or its loss. A
/// hold that another hold of the same resources in this hook overlapped
/// (reads, a hand-off) is not recorded, since the events do not say which
/// lock ended.
///
/// To add your own handling, keep a `MetricsEvents` in your hook and pass
/// it each event (see the second example).
///
/// # Examples
///
/// Into a recorder of its own (here the facade's debugging recorder):
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use metrics_util::debugging::{DebugValue, DebuggingRecorder};
/// use redlock_core::{MetricsEvents, Redlock};
///
/// let recorder = DebuggingRecorder::new();
/// let snapshotter = recorder.snapshotter();
/// let cluster = redlock_mock::MockCluster::new(3);
/// let locks = Redlock::builder(cluster.backends())
///     .events(Arc::new(MetricsEvents::with_recorder(recorder)))
///     .build()?;
/// locks.try_lock("invoice:42", Duration::from_secs(5))?.release()?;
///
/// let calls = snapshotter.snapshot().into_vec().into_iter().find(|(key, ..)| {
///     key.key().name() == "redlock_calls_total"
///         && key.key().labels().any(|l| l.key() == "outcome" && l.value() == "ok")
/// });
/// assert!(matches!(calls, Some((_, _, _, DebugValue::Counter(1)))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Beside a hook of your own, through the global recorder:
///
/// ```
/// use std::sync::Arc;
/// use redlock_core::{Event, EventHandler, MetricsEvents, Redlock};
///
/// #[derive(Default)]
/// struct MyHook {
///     metrics: MetricsEvents,
/// }
/// impl EventHandler for MyHook {
///     fn on_event(&self, event: &Event<'_>) {
///         self.metrics.on_event(event);
///         if let Event::Lost { .. } = event {
///             // ... page someone ...
///         }
///     }
/// }
///
/// // An exporter installs the global recorder first, e.g.
/// // `metrics_exporter_prometheus::PrometheusBuilder::new().install()?`.
/// let cluster = redlock_mock::MockCluster::new(3);
/// let locks = Redlock::builder(cluster.backends())
///     .events(Arc::new(MyHook::default()))
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub struct MetricsEvents {
    /// `None`: the facade's current recorder.
    recorder: Option<Arc<dyn Recorder + Send + Sync>>,
    /// Descriptions are sent once, with the first event.
    described: Once,
    /// The metrics recorded on every call, registered at first use.
    handles: Handles,
    /// Locks acquired and not yet seen to end, by resources.
    holds: Mutex<HashMap<Resources, Open, RandomState>>,
}

/// Handles of the metrics recorded on every call (their labels are few
/// and fixed), registered with the recorder at first use: a registration
/// builds and hashes the key, a handle only updates its value.
#[derive(Default)]
struct Handles {
    calls: [[OnceLock<Counter>; OUTCOME_LABELS.len()]; CALL_LABELS.len()],
    call_duration: [[OnceLock<Histogram>; OUTCOME_LABELS.len()]; CALL_LABELS.len()],
    wait: [OnceLock<Histogram>; OUTCOME_LABELS.len()],
    rounds: [[OnceLock<Histogram>; DECISION_LABELS.len()]; ROUND_LABELS.len()],
    hold: [OnceLock<Histogram>; END_LABELS.len()],
    /// Each node's answer times, by node (the nodes a hook sees are the
    /// managers' own: few, and fixed).
    answers: RwLock<HashMap<crate::NodeId, Histogram, RandomState>>,
}

impl Handles {
    /// Records that `node` answered `after` its round's start.
    fn answered(&self, node: &crate::NodeId, after: Duration) {
        if let Some(h) = self.answers.read().get(node) {
            h.record(after);
            return;
        }
        self.answers
            .write()
            .entry(node.clone())
            .or_insert_with(|| histogram!(NODE_ANSWER, "node" => node_label(node)))
            .record(after);
    }
}

/// Holds of one resource set whose end was not seen yet.
#[derive(Debug, Clone, Copy)]
struct Open {
    /// When the first of them was acquired.
    since: Instant,
    /// How many were acquired: past 1, which one ended is unknown.
    count: u32,
}

impl MetricsEvents {
    /// A hook that records through the facade's current recorder: the
    /// thread's local one if set, else the global one (a no-op until an
    /// exporter installs it).
    ///
    /// # Examples
    ///
    /// See [`MetricsEvents`].
    #[must_use]
    pub fn new() -> Self {
        MetricsEvents {
            recorder: None,
            described: Once::new(),
            handles: Handles::default(),
            holds: Mutex::new(HashMap::default()),
        }
    }

    /// A hook that records into `recorder` alone, whatever the global one
    /// is and on whichever thread an event comes. An `Arc<R>` is a
    /// recorder too, to share one.
    ///
    /// # Examples
    ///
    /// See [`MetricsEvents`].
    #[must_use]
    pub fn with_recorder<R: Recorder + Send + Sync + 'static>(recorder: R) -> Self {
        MetricsEvents {
            recorder: Some(Arc::new(recorder)),
            ..MetricsEvents::new()
        }
    }

    /// Records `event` through the current recorder.
    fn record(&self, event: &Event<'_>) {
        self.described.call_once(describe);
        match *event {
            Event::Call {
                kind,
                resources,
                outcome,
                elapsed,
                ..
            } => {
                let (c, o) = (call_index(kind), outcome_index(outcome));
                let (call, outcome_label) = (CALL_LABELS[c], OUTCOME_LABELS[o]);
                let handles = &self.handles;
                handles.calls[c][o]
                    .get_or_init(|| counter!(CALLS, "call" => call, "outcome" => outcome_label))
                    .increment(1);
                handles.call_duration[c][o]
                    .get_or_init(
                        || histogram!(CALL_DURATION, "call" => call, "outcome" => outcome_label),
                    )
                    .record(elapsed);
                if kind == CallKind::Lock {
                    let in_rounds = IN_ROUNDS.with(Cell::take);
                    handles.wait[o]
                        .get_or_init(|| histogram!(LOCK_WAIT, "outcome" => outcome_label))
                        .record(elapsed.saturating_sub(in_rounds));
                    if outcome == CallOutcome::Ok {
                        self.opened(resources);
                    }
                } else if kind == CallKind::Release {
                    self.closed(resources, RELEASED);
                }
            }
            Event::Round(round) => {
                let (r, d) = (round_index(round.kind), decision_index(round.decision));
                self.handles.rounds[r][d]
                    .get_or_init(|| {
                        histogram!(
                            ROUND_DURATION,
                            "round" => ROUND_LABELS[r],
                            "decision" => DECISION_LABELS[d]
                        )
                    })
                    .record(round.elapsed);
                for (node, after) in &round.answers {
                    self.handles.answered(node, *after);
                }
                match round.kind {
                    RoundKind::Acquire | RoundKind::RaiseFence => {
                        IN_ROUNDS.with(|t| t.set(t.get().saturating_add(round.elapsed)));
                    }
                    RoundKind::Release | RoundKind::Extend => {}
                }
            }
            Event::NodeFailed {
                node,
                kind,
                consecutive,
                ..
            } => {
                let node = node_label(node);
                counter!(NODE_FAILURES, "node" => node.clone(), "kind" => failure_label(kind))
                    .increment(1);
                #[allow(clippy::cast_precision_loss)] // exact below 2^53 failures
                gauge!(NODE_CONSECUTIVE, "node" => node).set(consecutive as f64);
            }
            Event::NodeRecovered { node, .. } => {
                let node = node_label(node);
                counter!(NODE_RECOVERIES, "node" => node.clone()).increment(1);
                gauge!(NODE_CONSECUTIVE, "node" => node).set(0.0);
            }
            Event::KeptAlive { .. } => counter!(KEEPALIVES).increment(1),
            Event::Lost { resources, reason } => {
                counter!(LOCKS_LOST, "reason" => lost_label(reason)).increment(1);
                self.closed(resources, LOST);
            }
            Event::HandedOff { .. } => counter!(HANDOFFS).increment(1),
            // One per request turned away (counted as such in the stats),
            // with no `NodeFailed` of its own.
            Event::QueueFull { node } => {
                let kind = failure_label(FailureKind::Overloaded);
                counter!(NODE_FAILURES, "node" => node_label(node), "kind" => kind).increment(1);
            }
            Event::Connection { node, .. } => {
                counter!(CONNECTION_ERRORS, "node" => node_label(node)).increment(1);
            }
            Event::ReleasesKept { node, count } => {
                counter!(RELEASES_KEPT, "node" => node_label(node)).increment(count);
            }
            Event::ReleasesDropped { node, count } => {
                counter!(RELEASES_DROPPED, "node" => node_label(node)).increment(count);
            }
        }
    }

    /// Notes a hold of `resources` that starts now.
    fn opened(&self, resources: &Resources) {
        let now = Instant::now();
        let mut holds = self.holds.lock();
        if holds.len() >= MAX_OPEN_HOLDS && !holds.contains_key(resources) {
            holds.clear();
        }
        holds
            .entry(resources.clone())
            .and_modify(|open| open.count = open.count.saturating_add(1))
            .or_insert(Open {
                since: now,
                count: 1,
            });
    }

    /// Records the end of the hold of `resources` (`end`, an index into
    /// [`END_LABELS`]), if it is known which.
    fn closed(&self, resources: &Resources, end: usize) {
        let open = self.holds.lock().remove(resources);
        if let Some(Open { since, count: 1 }) = open {
            self.handles.hold[end]
                .get_or_init(|| histogram!(LOCK_HOLD, "end" => END_LABELS[end]))
                .record(since.elapsed());
        }
    }
}

impl Default for MetricsEvents {
    fn default() -> Self {
        MetricsEvents::new()
    }
}

impl EventHandler for MetricsEvents {
    fn on_event(&self, event: &Event<'_>) {
        match &self.recorder {
            Some(recorder) => {
                ::metrics::with_local_recorder(recorder.as_ref(), || self.record(event));
            }
            None => self.record(event),
        }
    }
}

impl fmt::Debug for MetricsEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsEvents")
            .field("own_recorder", &self.recorder.is_some())
            .field("open_holds", &self.holds.lock().len())
            .finish()
    }
}

/// Sends each metric's unit and description to the current recorder.
fn describe() {
    describe_counter!(CALLS, CALLS_HELP);
    describe_histogram!(CALL_DURATION, Unit::Seconds, CALL_DURATION_HELP);
    describe_histogram!(LOCK_WAIT, Unit::Seconds, LOCK_WAIT_HELP);
    describe_histogram!(LOCK_HOLD, Unit::Seconds, LOCK_HOLD_HELP);
    describe_histogram!(ROUND_DURATION, Unit::Seconds, ROUND_DURATION_HELP);
    describe_histogram!(NODE_ANSWER, Unit::Seconds, NODE_ANSWER_HELP);
    describe_counter!(NODE_FAILURES, NODE_FAILURES_HELP);
    describe_counter!(NODE_RECOVERIES, NODE_RECOVERIES_HELP);
    describe_gauge!(NODE_CONSECUTIVE, NODE_CONSECUTIVE_HELP);
    describe_counter!(CONNECTION_ERRORS, CONNECTION_ERRORS_HELP);
    describe_counter!(RELEASES_KEPT, RELEASES_KEPT_HELP);
    describe_counter!(RELEASES_DROPPED, RELEASES_DROPPED_HELP);
    describe_counter!(LOCKS_LOST, LOCKS_LOST_HELP);
    describe_counter!(KEEPALIVES, KEEPALIVES_HELP);
    describe_counter!(HANDOFFS, HANDOFFS_HELP);
}

/// A node's label: its id, which holds no credentials (see
/// [`NodeId`](crate::NodeId)).
fn node_label(node: &crate::NodeId) -> SharedString {
    SharedString::from(node.as_str().to_owned())
}

/// The values of the label `call`, by [`call_index`].
const CALL_LABELS: [&str; 3] = ["lock", "extend", "release"];

fn call_index(kind: CallKind) -> usize {
    match kind {
        CallKind::Lock => 0,
        CallKind::Extend => 1,
        CallKind::Release => 2,
    }
}

/// The values of the label `outcome`, by [`outcome_index`].
const OUTCOME_LABELS: [&str; 6] = [
    "ok",
    "contended",
    "no_quorum",
    "validity_exhausted",
    "timeout",
    "error",
];

fn outcome_index(outcome: CallOutcome) -> usize {
    match outcome {
        CallOutcome::Ok => 0,
        CallOutcome::Contended => 1,
        CallOutcome::NoQuorum => 2,
        CallOutcome::ValidityExhausted => 3,
        CallOutcome::Timeout => 4,
        CallOutcome::Error => 5,
    }
}

/// The values of the label `round`, by [`round_index`].
const ROUND_LABELS: [&str; 4] = ["acquire", "raise_fence", "extend", "release"];

fn round_index(kind: RoundKind) -> usize {
    match kind {
        RoundKind::Acquire => 0,
        RoundKind::RaiseFence => 1,
        RoundKind::Extend => 2,
        RoundKind::Release => 3,
    }
}

/// The values of the label `decision`, by [`decision_index`].
const DECISION_LABELS: [&str; 3] = ["won", "lost", "pending"];

fn decision_index(decision: Decision) -> usize {
    match decision {
        Decision::Won => 0,
        Decision::Lost => 1,
        Decision::Pending => 2,
    }
}

/// The values of the label `end` of the hold time.
const END_LABELS: [&str; 2] = ["released", "lost"];
/// A hold ended by a release (confirmed, or sent by a dropped guard).
const RELEASED: usize = 0;
/// A hold ended by the lock's loss.
const LOST: usize = 1;

fn failure_label(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Backend => "backend",
        FailureKind::TimedOut => "timed_out",
        FailureKind::Overloaded => "overloaded",
        FailureKind::Panicked => "panicked",
        FailureKind::Unanswered => "unanswered",
    }
}

fn lost_label(reason: LostReason) -> &'static str {
    match reason {
        LostReason::ExtendFailed => "extend_failed",
        LostReason::HoldLimit => "hold_limit",
        LostReason::ExtensionLimit => "extension_limit",
        LostReason::Expired => "expired",
    }
}
