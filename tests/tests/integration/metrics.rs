//! `MetricsEvents` (feature `metrics`) records a lock's life, contention,
//! a node failure and its recovery, a kept-alive lock's loss, hand-offs, a
//! full queue, dropped releases and a connection error through the facade's
//! debugging recorder; every metric recorded is in the table of
//! docs/metrics.md with its type, labels and help text, and every metric of
//! the table is recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::Unit;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use redlock_core::backend::{AcquireOutcome, Claim, ConnectionSink, LockBackend};
use redlock_core::{KeepAlive, MetricsEvents, NodeId, Redlock, Ttl};
use redlock_mock::{ManualClock, MockCluster, MockNode};

/// One metric's value in a snapshot.
#[derive(Debug, Clone)]
struct Entry {
    kind: MetricKind,
    name: String,
    labels: BTreeMap<String, String>,
    unit: Option<Unit>,
    help: Option<String>,
    value: Value,
}

#[derive(Debug, Clone)]
enum Value {
    Counter(u64),
    Gauge(f64),
    Histogram(Vec<f64>),
}

/// What the recorder got since the last look (a debugging snapshot drains
/// counters, gauges and histograms), and everything so far.
struct Metrics {
    snapshotter: Snapshotter,
    all: Vec<Entry>,
}

impl Metrics {
    fn take(&mut self) -> Vec<Entry> {
        let entries: Vec<Entry> = self
            .snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, unit, help, value)| {
                let kind = key.kind();
                let key = key.key();
                Entry {
                    kind,
                    name: key.name().to_owned(),
                    labels: key
                        .labels()
                        .map(|l| (l.key().to_owned(), l.value().to_owned()))
                        .collect(),
                    unit,
                    help: help.map(|h| h.to_string()),
                    value: match value {
                        DebugValue::Counter(n) => Value::Counter(n),
                        DebugValue::Gauge(g) => Value::Gauge(g.into_inner()),
                        DebugValue::Histogram(h) => {
                            Value::Histogram(h.into_iter().map(|f| f.into_inner()).collect())
                        }
                    },
                }
            })
            .collect();
        self.all.extend(entries.iter().cloned());
        entries
    }

    /// Takes snapshots until `done` holds for what they got together.
    fn wait_for(&mut self, what: &str, done: impl Fn(&[Entry]) -> bool) -> Vec<Entry> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        loop {
            got.extend(self.take());
            if done(&got) {
                return got;
            }
            assert!(Instant::now() < deadline, "{what}: {got:#?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Whether `entry` is `name` with at least the labels `with`.
fn matches(entry: &Entry, name: &str, with: &[(&str, &str)]) -> bool {
    entry.name == name
        && with
            .iter()
            .all(|(k, v)| entry.labels.get(*k).map(String::as_str) == Some(*v))
}

fn counter(entries: &[Entry], name: &str, with: &[(&str, &str)]) -> u64 {
    entries
        .iter()
        .filter(|e| matches(e, name, with))
        .map(|e| match e.value {
            Value::Counter(n) => n,
            _ => 0,
        })
        .sum()
}

fn samples(entries: &[Entry], name: &str, with: &[(&str, &str)]) -> Vec<f64> {
    entries
        .iter()
        .filter(|e| matches(e, name, with))
        .flat_map(|e| match &e.value {
            Value::Histogram(h) => h.clone(),
            _ => Vec::new(),
        })
        .collect()
}

fn gauge(entries: &[Entry], name: &str, with: &[(&str, &str)]) -> Option<f64> {
    entries
        .iter()
        .filter(|e| matches(e, name, with))
        .filter_map(|e| match e.value {
            Value::Gauge(g) => Some(g),
            _ => None,
        })
        .next_back()
}

/// One row of the table in docs/metrics.md.
#[derive(Debug)]
struct Row {
    kind: MetricKind,
    labels: BTreeSet<String>,
    meaning: String,
}

/// The table of docs/metrics.md, by name.
fn documented() -> BTreeMap<String, Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
    let text = std::fs::read_to_string(path).expect("docs/metrics.md");
    let unquote = |cell: &str| cell.trim().trim_matches('`').to_owned();
    let mut rows = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `redlock_")) {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        assert_eq!(cells.len(), 4, "name, type, labels, meaning: {line}");
        let kind = match cells[1].trim() {
            "counter" => MetricKind::Counter,
            "gauge" => MetricKind::Gauge,
            "histogram" => MetricKind::Histogram,
            other => panic!("unknown type {other:?} in {line}"),
        };
        let labels = cells[2]
            .split(',')
            .map(unquote)
            .filter(|l| !l.is_empty())
            .collect();
        let row = Row {
            kind,
            labels,
            meaning: cells[3].trim().to_owned(),
        };
        assert!(
            rows.insert(unquote(cells[0]), row).is_none(),
            "listed twice: {line}"
        );
    }
    assert!(!rows.is_empty(), "no table in docs/metrics.md");
    rows
}

/// A mock node whose backend reports a connection error when attached, as
/// a Redis pool does when its background connect fails.
struct Reporting(MockNode);

impl LockBackend for Reporting {
    type Error = <MockNode as LockBackend>::Error;

    fn node_id(&self) -> &NodeId {
        self.0.node_id()
    }

    fn acquire(&self, claim: &Claim, ttl: Ttl, fence: bool) -> Result<AcquireOutcome, Self::Error> {
        self.0.acquire(claim, ttl, fence)
    }

    fn extend(&self, claim: &Claim, ttl: Ttl) -> Result<bool, Self::Error> {
        self.0.extend(claim, ttl)
    }

    fn release(&self, claim: &Claim) -> Result<bool, Self::Error> {
        self.0.release(claim)
    }

    fn raise_fence(&self, claim: &Claim, at_least: u64) -> Result<bool, Self::Error> {
        self.0.raise_fence(claim, at_least)
    }

    fn attach(&self, sink: ConnectionSink) {
        sink.report(&std::io::Error::other("connection refused"));
    }
}

const TTL: Duration = Duration::from_secs(10);

#[test]
fn a_locks_life_and_a_node_failure_record_every_documented_metric() {
    let recorder = DebuggingRecorder::new();
    let mut metrics = Metrics {
        snapshotter: recorder.snapshotter(),
        all: Vec::new(),
    };
    // One hook for every manager of the test: its own recorder, so tests
    // running beside it on other threads record nothing here, and events
    // sent on node workers' and the keeper's threads are recorded.
    let events = Arc::new(MetricsEvents::with_recorder(recorder));
    let cluster = MockCluster::new(3);
    let locks = Redlock::builder(cluster.backends())
        .events(Arc::clone(&events) as Arc<dyn redlock_core::EventHandler>)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(5))
        .build()
        .expect("config");
    let (node0, node1) = (
        cluster.node(0).node_id().to_string(),
        cluster.node(1).node_id().to_string(),
    );

    // A lock's life: acquired, extended, released.
    let started = Instant::now();
    let mut lock = locks.try_lock("invoice:42", TTL).expect("free");
    lock.extend(TTL).expect("held");
    lock.release().expect("held");
    let life = started.elapsed().as_secs_f64();
    let got = metrics.take();
    let calls = "redlock_calls_total";
    assert_eq!(
        counter(&got, calls, &[("call", "lock"), ("outcome", "ok")]),
        1
    );
    assert_eq!(
        counter(&got, calls, &[("call", "extend"), ("outcome", "ok")]),
        1
    );
    let took = samples(
        &got,
        "redlock_call_duration_seconds",
        &[("call", "lock"), ("outcome", "ok")],
    );
    let waited = samples(&got, "redlock_lock_wait_seconds", &[("outcome", "ok")]);
    assert_eq!((took.len(), waited.len()), (1, 1), "{got:#?}");
    assert!(waited[0] <= took[0], "{got:#?}");
    for round in ["acquire", "extend", "release"] {
        let rounds = samples(
            &got,
            "redlock_round_duration_seconds",
            &[("round", round), ("decision", "won")],
        );
        assert_eq!(rounds.len(), 1, "{round}: {got:#?}");
    }
    // Each node's answers before its rounds' decisions: at least the
    // quorum of each of the three rounds, each no longer than the call.
    let answers: Vec<Vec<f64>> = (0..3)
        .map(|i| {
            let node = cluster.node(i).node_id().to_string();
            samples(
                &got,
                "redlock_node_answer_duration_seconds",
                &[("node", node.as_str())],
            )
        })
        .collect();
    assert!(
        answers.iter().map(Vec::len).sum::<usize>() >= 3 * 2,
        "{got:#?}"
    );
    assert!(answers.iter().flatten().all(|&a| a <= life), "{answers:?}");
    assert_eq!(
        counter(&got, calls, &[("call", "release"), ("outcome", "ok")]),
        1
    );
    let held = samples(&got, "redlock_lock_hold_seconds", &[("end", "released")]);
    assert!(
        matches!(held.as_slice(), [h] if *h > 0.0 && *h <= life),
        "{got:#?}"
    );

    // A guard dropped ends its hold too (its release is sent, not awaited).
    let started = Instant::now();
    drop(locks.try_lock("invoice:43", TTL).expect("free"));
    let life = started.elapsed().as_secs_f64();
    let got = metrics.take();
    let held = samples(&got, "redlock_lock_hold_seconds", &[("end", "released")]);
    assert!(
        matches!(held.as_slice(), [h] if *h > 0.0 && *h <= life),
        "{got:#?}"
    );
    assert!(locks.flush(Duration::from_secs(5)), "the release ran");

    // Contention: another manager holds the lock until the call times out;
    // its wait is its duration less its (lost) rounds.
    let other = Redlock::new(cluster.backends()).expect("config");
    let busy = other.try_lock("busy", TTL).expect("free");
    assert!(other.flush(Duration::from_secs(5)), "nodes caught up");
    assert!(locks
        .lock_timeout("busy", TTL, Duration::from_millis(50))
        .is_err());
    busy.release().expect("held");
    let got = metrics.take();
    assert_eq!(
        counter(&got, calls, &[("call", "lock"), ("outcome", "timeout")]),
        1
    );
    let lost_rounds = samples(
        &got,
        "redlock_round_duration_seconds",
        &[("round", "acquire"), ("decision", "lost")],
    );
    assert!(lost_rounds.len() > 1, "{got:#?}");
    let took = samples(
        &got,
        "redlock_call_duration_seconds",
        &[("call", "lock"), ("outcome", "timeout")],
    );
    let waited = samples(&got, "redlock_lock_wait_seconds", &[("outcome", "timeout")]);
    let in_rounds: f64 = lost_rounds.iter().sum();
    assert!(
        matches!((took.as_slice(), waited.as_slice()),
            ([t], [w]) if *w > 0.0 && (w - (t - in_rounds)).abs() < 1e-6),
        "{got:#?}"
    );

    // A node down: its failures by kind, its failures in a row; back up,
    // its recovery.
    cluster.node(0).go_down();
    locks
        .try_lock("invoice:43", TTL)
        .expect("a quorum")
        .release()
        .expect("held");
    assert!(!locks.flush(Duration::from_secs(5)), "node 0 is down");
    let got = metrics.take();
    let failures = "redlock_node_failures_total";
    let down = [("node", node0.as_str()), ("kind", "backend")];
    assert!(counter(&got, failures, &down) >= 2, "{got:#?}");
    assert_eq!(counter(&got, failures, &[("node", node1.as_str())]), 0);
    let in_a_row = "redlock_node_consecutive_failures";
    assert!(gauge(&got, in_a_row, &[("node", node0.as_str())]) >= Some(2.0));
    cluster.node(0).come_up();
    locks
        .try_lock("invoice:44", TTL)
        .expect("free")
        .release()
        .expect("held");
    assert!(locks.flush(Duration::from_secs(5)), "node 0 caught up");
    let got = metrics.take();
    let up = [("node", node0.as_str())];
    assert_eq!(counter(&got, "redlock_node_recoveries_total", &up), 1);
    assert_eq!(gauge(&got, in_a_row, &up), Some(0.0), "{got:#?}");

    // A kept-alive lock extended by the keeper, then lost with two nodes
    // down: its hold ends with the loss.
    let kept = locks
        .try_lock("kept", Duration::from_millis(300))
        .expect("free");
    kept.keep_alive(KeepAlive::new()).expect("keeper");
    metrics.wait_for("an extension by the keeper", |got| {
        counter(got, "redlock_keepalive_extensions_total", &[]) >= 1
    });
    cluster.node(0).go_down();
    cluster.node(1).go_down();
    // The keeper's thread records the loss and its hold one after the other.
    let got = metrics.wait_for("the loss", |got| {
        counter(got, "redlock_locks_lost_total", &[]) >= 1
            && !samples(got, "redlock_lock_hold_seconds", &[("end", "lost")]).is_empty()
    });
    assert_eq!(
        counter(
            &got,
            "redlock_locks_lost_total",
            &[("reason", "extend_failed")]
        ),
        1
    );
    assert_eq!(
        samples(&got, "redlock_lock_hold_seconds", &[("end", "lost")]).len(),
        1
    );
    drop(kept);
    cluster.node(0).come_up();
    cluster.node(1).come_up();
    let _ = locks.flush(Duration::from_secs(5));
    metrics.take();

    // Callers of one manager in line for one key: hand-offs.
    let before = locks.stats().manager.handed_off;
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..100 {
                    let lock = locks.lock("line", TTL).expect("in line");
                    std::thread::yield_now();
                    lock.release().expect("held");
                }
            });
        }
    });
    let handed = locks.stats().manager.handed_off - before;
    assert!(handed > 0, "no hand-off in 400 contended cycles");
    let got = metrics.take();
    assert_eq!(counter(&got, "redlock_handoffs_total", &[]), handed);

    // A full queue, on a manager of its own (same hook).
    let small = MockCluster::new(3);
    let queued = Redlock::builder(small.backends())
        .events(Arc::clone(&events) as Arc<dyn redlock_core::EventHandler>)
        .queue_depth(1)
        .node_timeout(Duration::from_millis(20))
        .build()
        .expect("config");
    small.node(2).freeze();
    for key in ["q1", "q2", "q3"] {
        queued
            .try_lock(key, TTL)
            .expect("quorum")
            .release()
            .expect("held");
    }
    let frozen = small.node(2).node_id().to_string();
    let got = metrics.take();
    // Each request turned away is a failure of the node, as in the stats.
    let overloaded = [("node", frozen.as_str()), ("kind", "overloaded")];
    let turned_away = queued.stats().nodes[2].failures.overloaded;
    assert!(turned_away >= 1);
    assert_eq!(
        counter(&got, failures, &overloaded),
        turned_away,
        "{got:#?}"
    );
    small.node(2).thaw();
    drop(queued);

    // Releases a down node failed: kept, and past the 4096 its worker
    // keeps, dropped.
    let clock = ManualClock::new();
    let churn = MockCluster::with_clock(3, Arc::new(clock));
    let churning = Redlock::builder(churn.backends())
        .events(Arc::clone(&events) as Arc<dyn redlock_core::EventHandler>)
        .build()
        .expect("config");
    let guards: Vec<_> = (0..4096 + 5)
        .map(|i| {
            churning
                .try_lock(format!("churn:{i}").as_str(), Duration::from_secs(600))
                .expect("free")
        })
        .collect();
    assert!(churning.flush(Duration::from_secs(10)), "nodes caught up");
    churn.node(2).go_down();
    for guard in guards {
        guard.release().expect("a quorum released");
    }
    assert!(!churning.flush(Duration::from_secs(10)), "node 2 is down");
    let gone = churn.node(2).node_id().to_string();
    let at_gone = [("node", gone.as_str())];
    // Counted in the stats first, then sent by the node's worker.
    // Kept at their first failure (retries are not counted again).
    let got = metrics.wait_for("the kept and dropped releases", |got| {
        counter(got, "redlock_releases_dropped_total", &at_gone) >= 5
            && counter(got, "redlock_releases_kept_total", &at_gone) >= 4096 + 5
    });
    assert_eq!(
        counter(&got, "redlock_releases_dropped_total", &at_gone),
        5,
        "{:?}",
        churning.stats().nodes[2]
    );
    assert_eq!(
        counter(&got, "redlock_releases_kept_total", &at_gone),
        4096 + 5
    );
    assert_eq!(churning.stats().nodes[2].releases_kept, 4096 + 5);
    churn.node(2).come_up();
    drop(churning);

    // A backend reporting a connection error outside any request.
    let reporting = MockCluster::new(3);
    let backends: Vec<Reporting> = reporting.backends().into_iter().map(Reporting).collect();
    let _attached = Redlock::builder(backends)
        .events(Arc::clone(&events) as Arc<dyn redlock_core::EventHandler>)
        .build()
        .expect("config");
    let got = metrics.take();
    let errors = "redlock_node_connection_errors_total";
    for i in 0..3 {
        let id = reporting.node(i).node_id().to_string();
        assert_eq!(
            counter(&got, errors, &[("node", id.as_str())]),
            1,
            "{got:#?}"
        );
    }

    // Every metric recorded is documented as recorded, and every
    // documented one was recorded.
    let table = documented();
    let mut recorded = BTreeSet::new();
    for entry in &metrics.all {
        let row = table
            .get(&entry.name)
            .unwrap_or_else(|| panic!("{} is not in docs/metrics.md", entry.name));
        assert_eq!(entry.kind, row.kind, "{}", entry.name);
        let labels: BTreeSet<String> = entry.labels.keys().cloned().collect();
        assert_eq!(labels, row.labels, "{}", entry.name);
        assert_eq!(
            entry.help.as_deref(),
            Some(row.meaning.as_str()),
            "{}",
            entry.name
        );
        if entry.name.ends_with("_seconds") {
            assert_eq!(entry.unit, Some(Unit::Seconds), "{}", entry.name);
        }
        // Resource names are the application's data: never a label.
        for value in entry.labels.values() {
            assert!(
                !["invoice", "busy", "kept", "line", "churn", "q1"]
                    .iter()
                    .any(|name| value.contains(name)),
                "{}: {value}",
                entry.name
            );
        }
        recorded.insert(entry.name.clone());
    }
    let documented: BTreeSet<String> = table.keys().cloned().collect();
    assert_eq!(recorded, documented);
}
