//! The promises of docs/guide.md that no other test makes: the arithmetic
//! of its recommended settings (read from the guide's own tables), what a
//! frozen node costs a call and what validity a lock then has, how long a
//! crashed holder blocks the others, and the threads and connections one
//! manager costs. The guide's "Backed by" list names these and the older
//! tests it relies on.

use std::time::{Duration, Instant};

use redlock_core::backend::{AcquireOutcome, Claim, LockBackend, Token};
use redlock_core::decide::{drift, validity};
use redlock_core::engine::Keep;
use redlock_core::{LockError, Redlock, Resources, Ttl};
use redlock_mock::{MockCluster, MockNode};

const GUIDE: &str = include_str!("../../../docs/guide.md");

/// What real-time scheduling may add on a loaded 2-core machine to a bound
/// the code keeps: a hang or a bound lost by a node timeout still fails.
const SLACK: Duration = Duration::from_millis(250);

/// One row of the guide's settings table and the matching row of its
/// arithmetic table.
#[derive(Debug)]
struct Row {
    name: &'static str,
    ttl: Duration,
    node_timeout: Duration,
    retry: (Duration, Duration),
    acquire_timeout: Duration,
    drift_factor: f64,
    drift: Duration,
    validity: Duration,
    failed_try_lock: Duration,
    failed_lock: Duration,
}

/// `"50 ms"`, `"10 s"`, with or without backticks.
fn duration(cell: &str) -> Duration {
    let cell = cell.trim().trim_matches('`');
    if let Some(ms) = cell.strip_suffix(" ms") {
        Duration::from_millis(ms.trim().parse().unwrap_or_else(|_| panic!("{cell:?}")))
    } else if let Some(s) = cell.strip_suffix(" s") {
        Duration::from_secs(s.trim().parse().unwrap_or_else(|_| panic!("{cell:?}")))
    } else {
        panic!("not a duration in ms or s: {cell:?}")
    }
}

/// `"10–200 ms"` (an en dash).
fn range(cell: &str) -> (Duration, Duration) {
    let cell = cell.trim().trim_matches('`');
    let (min, max) = cell.split_once('–').unwrap_or_else(|| panic!("{cell:?}"));
    let unit = if max.ends_with(" ms") { " ms" } else { " s" };
    (duration(&format!("{min}{unit}")), duration(max))
}

/// The cells of the guide's table rows that start with `name`, in order.
fn rows_named(name: &str) -> Vec<Vec<String>> {
    GUIDE
        .lines()
        .filter_map(|line| {
            let cells: Vec<String> = line
                .trim()
                .strip_prefix('|')?
                .strip_suffix('|')?
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect();
            (cells.first().map(String::as_str) == Some(name)).then_some(cells)
        })
        .collect()
}

fn guide_rows() -> Vec<Row> {
    ["LAN", "cross-zone", "CI"]
        .into_iter()
        .map(|name| {
            let rows = rows_named(name);
            assert_eq!(rows.len(), 2, "docs/guide.md: two table rows for {name}");
            let (settings, figures) = (&rows[0], &rows[1]);
            assert_eq!(settings.len(), 6, "{name}: {settings:?}");
            assert_eq!(figures.len(), 5, "{name}: {figures:?}");
            Row {
                name,
                ttl: duration(&settings[1]),
                node_timeout: duration(&settings[2]),
                retry: range(&settings[3]),
                acquire_timeout: duration(&settings[4]),
                drift_factor: settings[5].parse().expect("a drift factor"),
                drift: duration(&figures[1]),
                validity: duration(&figures[2]),
                failed_try_lock: duration(&figures[3]),
                failed_lock: duration(&figures[4]),
            }
        })
        .collect()
}

/// Stores another holder's token under `key` on `nodes` for a minute.
fn hold_elsewhere(cluster: &MockCluster, key: &str, nodes: &[usize]) {
    let claim = Claim::new(
        Resources::one(key).expect("key"),
        Token::random().expect("entropy"),
    );
    let ttl = Ttl::new(Duration::from_secs(60)).expect("ttl");
    for &i in nodes {
        let outcome = cluster.node(i).acquire(&claim, ttl, false);
        assert!(matches!(outcome, Ok(AcquireOutcome::Granted { .. })));
    }
}

/// The guide's recommended settings: each row's drift, worst-case validity
/// and worst-case failed calls are what the code's formulas give, the
/// builder accepts the settings, and keep-alive extends with a third of
/// the validity left.
#[test]
fn the_recommended_settings_follow_from_the_codes_arithmetic() {
    let rows = guide_rows();
    for row in &rows {
        let name = row.name;
        assert_eq!(drift(row.ttl, row.drift_factor), row.drift, "{name}: drift");
        // A won round is decided within one node timeout of its start.
        let worst = validity(row.ttl, row.node_timeout, row.drift);
        assert_eq!(worst, Some(row.validity), "{name}: validity at worst");
        // The guide's rule: a TTL of at least 20 node timeouts.
        assert!(
            row.ttl >= row.node_timeout * 20,
            "{name}: node timeout too long"
        );
        // A failed round, then the release of what it may have set.
        assert_eq!(row.failed_try_lock, row.node_timeout * 2, "{name}");
        // Rounds start only before the deadline; the last one may end two
        // node timeouts after it.
        assert_eq!(
            row.failed_lock,
            row.acquire_timeout + row.node_timeout * 2,
            "{name}"
        );
        // Keep-alive: with these settings the extension is due when a
        // third of the validity is left (not earlier for the node timeout).
        let now = Instant::now();
        let keep = Keep::new(
            now,
            now + row.validity,
            row.node_timeout,
            Duration::from_secs(3600),
            u32::MAX,
        );
        assert_eq!(keep.due(), now + row.validity * 2 / 3, "{name}: keep-alive");

        // The builder takes them, and a lock gets at most TTL - drift.
        let cluster = MockCluster::new(5);
        let locks = Redlock::builder(cluster.backends())
            .node_timeout(row.node_timeout)
            .retry_delay(row.retry.0, row.retry.1)
            .acquire_timeout(row.acquire_timeout)
            .drift_factor(row.drift_factor)
            .build()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let lock = locks.try_lock("guide", row.ttl).expect("free");
        assert!(lock.validity() <= row.ttl - row.drift, "{name}");
        lock.release().expect("held");
    }
}

/// The worked example: one of five masters frozen. The call does not wait
/// for it (4 of 5 answer, a quorum is 3), and the lock's validity is
/// exactly `TTL - elapsed - drift`, elapsed counted from before the first
/// request: between `TTL - drift - (what the call took)` and `TTL - drift`.
/// A kept-alive lock goes on being extended.
#[test]
fn a_frozen_master_costs_a_won_call_nothing_and_validity_is_ttl_minus_elapsed_minus_drift() {
    let cluster = MockCluster::new(5);
    // Long, so that waiting for the frozen node would show.
    let node_timeout = Duration::from_secs(2);
    let ttl = Duration::from_secs(30);
    let locks = Redlock::builder(cluster.backends())
        .node_timeout(node_timeout)
        .build()
        .expect("config");
    let drift = drift(ttl, 0.01);
    cluster.node(4).freeze();
    for _ in 0..3 {
        let before = Instant::now();
        let lock = locks.try_lock("guide:frozen", ttl).expect("4 of 5 grant");
        let left = lock.validity();
        let took = before.elapsed();
        assert!(took < node_timeout, "waited for the frozen node: {took:?}");
        assert!(left <= ttl - drift, "{left:?}");
        assert!(left >= ttl - drift - took, "{left:?} after {took:?}");
        lock.release().expect("released on the four");
    }
    // A kept-alive lock lives on through three TTLs: each extension is a
    // round that four masters decide.
    let short = Duration::from_millis(300);
    locks
        .with_lock("guide:kept", short, |lock| {
            let until = Instant::now() + short * 3;
            while Instant::now() < until {
                lock.ensure_held().expect("kept alive");
                std::thread::sleep(Duration::from_millis(20));
            }
        })
        .expect("held throughout");
    cluster.node(4).thaw();
    assert!(locks.flush(Duration::from_secs(10)), "the node caught up");
}

/// A frozen node costs a failed round at most one node timeout (waiting
/// for the release of what it may have set), so a failed `try_lock` ends
/// within two node timeouts, a failed `lock` within its acquire timeout
/// plus two, and the rounds in between cost one node timeout and one
/// pause each.
#[test]
fn a_frozen_master_costs_a_failed_round_at_most_one_node_timeout() {
    let cluster = MockCluster::new(5);
    let node_timeout = Duration::from_millis(100);
    let retry_max = Duration::from_millis(10);
    let locks = Redlock::builder(cluster.backends())
        .node_timeout(node_timeout)
        .retry_delay(Duration::ZERO, retry_max)
        .jitter_seed(27)
        .build()
        .expect("config");
    let ttl = Duration::from_secs(10);
    hold_elsewhere(&cluster, "guide:busy", &[0, 1, 2]);
    cluster.node(4).freeze();

    let before = Instant::now();
    let err = locks
        .try_lock("guide:busy", ttl)
        .expect_err("held elsewhere");
    let took = before.elapsed();
    assert!(matches!(err, LockError::Contended(_)), "{err}");
    assert!(took < node_timeout * 2 + SLACK, "try_lock took {took:?}");

    let timeout = Duration::from_secs(2);
    let before = Instant::now();
    let err = locks
        .lock_timeout("guide:busy", ttl, timeout)
        .expect_err("held elsewhere");
    let took = before.elapsed();
    let LockError::Timeout { attempts, last } = &err else {
        panic!("expected Timeout, got {err}")
    };
    assert!(matches!(**last, LockError::Contended(_)), "{last}");
    assert!(took >= timeout, "gave up early: {took:?}");
    assert!(
        took < timeout + node_timeout * 2 + SLACK,
        "lock_timeout took {took:?}"
    );
    // One node timeout and one pause a round (40 ms of scheduling slack
    // each): at least 13 rounds in 2 s. Two node timeouts a round would
    // give about 10.
    let per_round = node_timeout + retry_max + Duration::from_millis(40);
    let least = (timeout.as_millis() / per_round.as_millis()) as u32;
    assert!(
        *attempts >= least,
        "{attempts} rounds in {took:?}, expected {least}"
    );
    cluster.node(4).thaw();
    assert!(locks.flush(Duration::from_secs(10)), "the node caught up");
}

/// A holder that dies without releasing (here: a guard leaked, so no
/// release is ever sent) blocks another process for its TTL, and not much
/// longer: the waiter gets the lock within a retry pause and a round of
/// the keys' expiry.
#[test]
fn a_crashed_holder_blocks_others_for_its_ttl_and_no_longer() {
    let cluster = MockCluster::new(5);
    let node_timeout = Duration::from_millis(100);
    let retry_max = Duration::from_millis(20);
    let build = || {
        Redlock::builder(cluster.backends())
            .node_timeout(node_timeout)
            .retry_delay(Duration::ZERO, retry_max)
            .build()
            .expect("config")
    };
    let (crashed, other): (Redlock<MockNode>, Redlock<MockNode>) = (build(), build());
    let ttl = Duration::from_millis(800);
    let before = Instant::now();
    let lock = crashed.try_lock("guide:crash", ttl).expect("free");
    std::mem::forget(lock);
    let lock = other
        .lock_timeout("guide:crash", ttl, Duration::from_secs(10))
        .expect("the TTL frees it");
    let waited = before.elapsed();
    // Its keys were set after `before` and live a TTL.
    assert!(waited >= ttl, "acquired after {waited:?}, inside the TTL");
    assert!(
        waited < ttl + retry_max + node_timeout + SLACK,
        "blocked for {waited:?} with a TTL of {ttl:?}"
    );
    lock.release().expect("held");
}

/// Runs the ignored test `name` alone in a child process of this test
/// binary (so that it sees no other test's threads) and fails if it does.
#[cfg(target_os = "linux")]
fn run_alone(name: &str) {
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(exe)
        .args([name, "--exact", "--ignored", "--test-threads=1"])
        .env("REDLOCK_GUIDE_CHILD", "1")
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Whether this is the child [`run_alone`] started (else an ignored child
/// test run with the others would count their threads too).
#[cfg(target_os = "linux")]
fn alone() -> bool {
    std::env::var_os("REDLOCK_GUIDE_CHILD").is_some()
}

/// This process's threads whose name starts with `prefix` (Linux keeps
/// the first 15 bytes of a name).
#[cfg(target_os = "linux")]
fn threads(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end().starts_with(prefix))
        .count()
}

#[cfg(target_os = "linux")]
fn eventually(what: &str, condition: impl FnMut() -> bool) {
    redlock_tests::harness::wait_until(Duration::from_secs(10), what, condition)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// One manager costs a worker thread per node from `build()` on, and one
/// keeper thread once a lock is kept alive, however many are; a second
/// manager costs as much again; dropping a manager ends its threads.
#[cfg(target_os = "linux")]
#[test]
fn one_manager_costs_a_thread_per_node_and_one_keeper() {
    run_alone("guide::child_threads_of_a_manager_on_mock_nodes");
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "run alone in a child process by one_manager_costs_a_thread_per_node_and_one_keeper"]
fn child_threads_of_a_manager_on_mock_nodes() {
    if !alone() {
        return;
    }
    let cluster = MockCluster::new(5);
    let locks = Redlock::new(cluster.backends()).expect("config");
    // A new thread names itself: wait for the names.
    eventually("a worker per node", || threads("redlock-node-") == 5);
    assert_eq!(threads("redlock-keeper"), 0, "no keeper before keep-alive");
    assert_eq!(threads("redlock-poller"), 0, "mock nodes start no batches");
    let ttl = Duration::from_secs(5);
    let a = locks.try_lock("guide:a", ttl).expect("free");
    let b = locks.try_lock("guide:b", ttl).expect("free");
    a.keep_alive(redlock_core::KeepAlive::new()).expect("kept");
    b.keep_alive(redlock_core::KeepAlive::new()).expect("kept");
    eventually("one keeper", || threads("redlock-keeper") == 1);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        threads("redlock-keeper"),
        1,
        "one keeper for two kept locks"
    );
    let second = Redlock::new(cluster.backends()).expect("config");
    eventually("a worker per node per manager", || {
        threads("redlock-node-") == 10
    });
    drop((a, b, locks, second));
    eventually("the managers' threads end", || {
        threads("redlock-node-") == 0 && threads("redlock-keeper") == 0
    });
}

/// On Redis, per master: a worker thread and the pool's connection
/// thread, at most `DEFAULT_POOL_SIZE` (2) connections; once a caller
/// waited, a subscriber thread and one subscriber connection more; a
/// poller thread only once `Builder::poller_from` callers (5 by default)
/// drove rounds at once.
#[cfg(target_os = "linux")]
#[test]
fn on_redis_a_manager_costs_per_master_two_threads_two_connections_and_a_subscriber() {
    run_alone("guide::child_threads_and_connections_on_redis");
}

/// Our connections to `server` (all but the one asking), and how many of
/// them subscribe.
#[cfg(target_os = "linux")]
fn connections(server: &redlock_tests::harness::RedisServer) -> (usize, usize) {
    let mut admin = server.client().expect("client");
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut admin)
        .expect("CLIENT LIST");
    let ours: Vec<&str> = list
        .lines()
        .filter(|line| !line.contains(" cmd=client"))
        .collect();
    let subscribers = ours.iter().filter(|line| !line.contains(" sub=0 ")).count();
    (ours.len(), subscribers)
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "run alone in a child process by on_redis_a_manager_costs_per_master_two_threads_two_connections_and_a_subscriber"]
fn child_threads_and_connections_on_redis() {
    use crate::redis_common::{cluster, key, NODE_TIMEOUT};
    if !alone() {
        return;
    }
    let servers = cluster(3);
    let locks = redlock_redis::Redlock::builder(Vec::new())
        .node_timeout(NODE_TIMEOUT)
        .connect(servers.urls())
        .expect("connect");
    let name = key("guide-costs");
    locks
        .try_lock(name.as_str(), Duration::from_secs(5))
        .expect("free")
        .release()
        .expect("held");
    eventually("a worker and a pool thread per master", || {
        threads("redlock-node-") == 3 && threads("redlock-redis-") == 3
    });
    assert_eq!(threads("redlock-poller"), 0, "no poller for a lone caller");
    // The poller's thread starts with the first round that goes through it.
    let polled = redlock_redis::Redlock::builder(Vec::new())
        .node_timeout(NODE_TIMEOUT)
        .own_rounds(false)
        .poller_from(1)
        .connect(servers.urls())
        .expect("connect");
    assert_eq!(threads("redlock-poller"), 0, "no poller before a round");
    polled
        .try_lock(name.as_str(), Duration::from_secs(5))
        .expect("free")
        .release()
        .expect("held");
    eventually("one poller once a round went through it", || {
        threads("redlock-poller") == 1
    });
    drop(polled);
    eventually("the poller ends with its manager", || {
        threads("redlock-poller") == 0
    });
    assert_eq!(threads("redlock-feed-"), 0, "no subscriber before a wait");
    for server in servers.iter() {
        eventually("a pool's connections", || {
            let (all, subscribers) = connections(server);
            (1..=redlock_redis::DEFAULT_POOL_SIZE as usize).contains(&all) && subscribers == 0
        });
    }
    // Another holds the key on every master: a `lock` caller waits.
    for server in servers.iter() {
        let mut admin = server.client().expect("client");
        let _: () = redis::cmd("SET")
            .arg(&name)
            .arg("someone-else")
            .arg("PX")
            .arg(60_000)
            .query(&mut admin)
            .expect("SET");
    }
    let err = locks
        .lock_timeout(
            name.as_str(),
            Duration::from_secs(5),
            Duration::from_millis(500),
        )
        .expect_err("held elsewhere");
    assert!(matches!(err, LockError::Timeout { .. }), "{err}");
    eventually("a subscriber per master", || threads("redlock-feed-") == 3);
    for server in servers.iter() {
        eventually("one subscriber connection more", || {
            let (all, subscribers) = connections(server);
            subscribers == 1 && all <= redlock_redis::DEFAULT_POOL_SIZE as usize + 1
        });
    }
}

/// The manager of [`child_a_static_manager_flushed_before_exit`]: never
/// dropped, as a `static` is not.
#[cfg(target_os = "linux")]
static LOCKS: std::sync::OnceLock<redlock_redis::Redlock> = std::sync::OnceLock::new();

/// Section 4's recipe: a manager in a `static` whose guard was dropped,
/// flushed, then `std::process::exit` (no destructor runs): no key is left
/// on any master, long before the TTL.
#[cfg(target_os = "linux")]
#[test]
fn a_static_manager_flushed_before_process_exit_leaves_no_key() {
    use crate::redis_common::{cluster, exists, key};
    let servers = cluster(3);
    let name = key("guide-static-exit");
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(exe)
        .args([
            "guide::child_a_static_manager_flushed_before_exit",
            "--exact",
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env("REDLOCK_GUIDE_CHILD", "1")
        .env("REDLOCK_GUIDE_KEY", &name)
        .env("REDLOCK_GUIDE_URLS", servers.urls().join(" "))
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("guide-child: flushed"),
        "the child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for server in servers.iter() {
        assert!(!exists(server, &name), "key left on {}", server.url());
    }
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "run in a child process by a_static_manager_flushed_before_process_exit_leaves_no_key"]
fn child_a_static_manager_flushed_before_exit() {
    use crate::redis_common::NODE_TIMEOUT;
    if !alone() {
        return;
    }
    let name = std::env::var("REDLOCK_GUIDE_KEY").expect("REDLOCK_GUIDE_KEY");
    let urls = std::env::var("REDLOCK_GUIDE_URLS").expect("REDLOCK_GUIDE_URLS");
    let locks = LOCKS.get_or_init(|| {
        redlock_redis::Redlock::builder(Vec::new())
            .node_timeout(NODE_TIMEOUT)
            .connect(urls.split(' '))
            .expect("connect")
    });
    drop(
        locks
            .try_lock(name.as_str(), Duration::from_secs(30))
            .expect("free"),
    );
    assert!(locks.flush(Duration::from_secs(5)), "every master answered");
    println!("guide-child: flushed");
    std::process::exit(0);
}

/// The guide's two code blocks, compiled (not run: they need real masters)
/// so that they keep up with the API; keep them in step with the guide.
#[allow(dead_code)]
mod code_blocks {
    use std::sync::OnceLock;
    use std::time::Duration;

    use redlock_redis::Redlock;

    /// Section 4.
    static LOCKS: OnceLock<Redlock> = OnceLock::new();

    fn locks() -> &'static Redlock {
        LOCKS.get_or_init(|| {
            Redlock::connect([
                "redis://10.0.0.1:6379",
                "redis://10.0.0.2:6379",
                "redis://10.0.0.3:6379",
            ])
            .expect("the masters' URLs")
        })
    }

    fn main() {
        drop(locks().try_lock("locks:nightly", Duration::from_secs(30)));
        // A static is never dropped: flush the queued release before exiting.
        let all_answered = locks().flush(Duration::from_secs(1));
        std::process::exit(if all_answered { 0 } else { 1 });
    }

    /// Section 6.
    fn worked_example_main() -> Result<(), Box<dyn std::error::Error>> {
        let locks = Redlock::builder(Vec::new())
            .node_timeout(Duration::from_millis(100))
            .retry_delay(Duration::from_millis(10), Duration::from_millis(200))
            .acquire_timeout(Duration::from_secs(10))
            .connect([
                "redis://a1.internal:6379",
                "redis://a2.internal:6379",
                "redis://b1.internal:6379",
                "redis://b2.internal:6379",
                "redis://c1.internal:6379",
            ])?;
        locks.with_lock("locks:report", Duration::from_secs(30), |lock| {
            // ... the work; right before each side effect:
            lock.ensure_held()
        })??;
        Ok(())
    }
}
