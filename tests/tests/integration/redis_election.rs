//! Leader election on real servers, with candidates in separate processes
//! (this test binary started again as `election_candidate_child`): one
//! leader at a time, a killed leader replaced within its TTL and a retry,
//! a leader told of its loss before its validity ends when three of five
//! masters freeze, and an observer that agrees with who led.

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redlock_redis::election::Observed;
use redlock_redis::{Identity, LostReason, Redlock, FENCE_SUFFIX, WATCH_SUFFIX};
use redlock_tests::harness::wait_until;

use crate::redis_common::{backends, cluster, key, NODE_TIMEOUT};

/// The election's TTL.
const TTL: Duration = Duration::from_secs(2);
/// The candidates' largest pause between rounds (not shorter: three
/// candidate processes retrying faster load a 2-core machine enough to
/// make other tests' timing fail).
const RETRY_MAX: Duration = Duration::from_millis(200);
/// The longest any process here may take.
const HANG: Duration = Duration::from_secs(120);

fn candidate_manager(urls: &[String], id: &str) -> Redlock {
    let backends = urls
        .iter()
        .map(|url| {
            redlock_redis::RedisBackend::builder(url.as_str())
                .node_timeout(NODE_TIMEOUT)
                .build()
                .expect("backend")
        })
        .collect::<Vec<_>>();
    Redlock::builder(backends)
        .node_timeout(NODE_TIMEOUT)
        .retry_delay(Duration::from_millis(20), RETRY_MAX)
        .fencing(true)
        .identity(Identity::new(id).expect("valid"))
        .build()
        .expect("manager")
}

/// A manager that only observes (no identity, no candidate), with `timeout`
/// per node.
fn observer_manager(servers: &redlock_tests::harness::RedisCluster, timeout: Duration) -> Redlock {
    Redlock::builder(backends(servers, timeout))
        .node_timeout(timeout)
        .fencing(true)
        .build()
        .expect("manager")
}

fn append(log: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log");
    // One write per line: lines of several processes never mix.
    file.write_all(format!("{line}\n").as_bytes())
        .expect("append");
}

/// A candidate process: campaigns `ELECTION_ROUNDS` times on
/// `ELECTION_NAME`, logging `start ID TERM` and `end ID TERM` around each
/// leadership of `ELECTION_HOLD_MS`, checking it still leads meanwhile.
#[test]
#[ignore = "a candidate process, started by the tests of this file"]
fn election_candidate_child() {
    let Ok(urls) = std::env::var("ELECTION_URLS") else {
        return;
    };
    let var = |name: &str| std::env::var(name).expect(name);
    let urls: Vec<String> = urls.split(',').map(str::to_owned).collect();
    let id = var("ELECTION_ID");
    let log = std::path::PathBuf::from(var("ELECTION_LOG"));
    let rounds: u32 = var("ELECTION_ROUNDS").parse().expect("rounds");
    let hold = Duration::from_millis(var("ELECTION_HOLD_MS").parse().expect("hold"));
    let locks = candidate_manager(&urls, &id);
    let election = locks
        .election(&var("ELECTION_NAME"), TTL)
        .expect("election");
    for _ in 0..rounds {
        let leadership = election.campaign().expect("elected");
        let term = leadership.term();
        append(&log, &format!("start {id} {term}"));
        let until = Instant::now() + hold;
        while Instant::now() < until {
            leadership.ensure_held().expect("still leads");
            std::thread::sleep(Duration::from_millis(10));
        }
        append(&log, &format!("end {id} {term}"));
        leadership.resign().expect("resigned");
    }
}

/// Starts a candidate process.
fn spawn(urls: &[String], name: &str, id: &str, log: &Path, rounds: u32, hold_ms: u64) -> Child {
    Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "redis_election::election_candidate_child",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env("ELECTION_URLS", urls.join(","))
        .env("ELECTION_NAME", name)
        .env("ELECTION_ID", id)
        .env("ELECTION_LOG", log)
        .env("ELECTION_ROUNDS", rounds.to_string())
        .env("ELECTION_HOLD_MS", hold_ms.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("a candidate process")
}

/// Kills (and reaps) the candidates still running when dropped.
struct Candidates(Vec<Child>);

impl Drop for Candidates {
    fn drop(&mut self) {
        for child in &mut self.0 {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The log's lines, split in words.
fn lines(log: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(' ').map(str::to_owned).collect())
        .collect()
}

#[test]
fn three_processes_lead_one_at_a_time_and_an_observer_sees_each_leader() {
    let servers = cluster(5);
    let urls = servers.urls();
    let name = key("election-turns");
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let mut candidates = Candidates(
        (0..3)
            .map(|i| spawn(&urls, &name, &format!("candidate-{i}"), &log, 3, 1_000))
            .collect(),
    );
    // The observer, in this process, on a manager of its own.
    let watcher = observer_manager(&servers, Duration::from_millis(200));
    let election = watcher
        .election(&name, TTL)
        .expect("election")
        .poll_interval(Duration::from_millis(50));
    let mut observer = election.observe();
    let mut seen = Vec::new();
    let started = Instant::now();
    while candidates
        .0
        .iter_mut()
        .any(|c| matches!(c.try_wait(), Ok(None)))
    {
        assert!(started.elapsed() < HANG, "the candidates did not finish");
        // A reading that fails (a loaded machine) is tried again.
        if let Ok(Some(Observed::Leader(leader))) =
            observer.next_timeout(Duration::from_millis(100))
        {
            let id = leader.identity().map(|i| i.as_str().to_owned());
            seen.push((id.unwrap_or_default(), leader.term()));
        }
    }
    for child in &mut candidates.0 {
        let status = child.wait().expect("reaped");
        let mut err = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
        }
        assert!(status.success(), "a candidate failed: {err}");
    }
    let lines = lines(&log);
    assert_eq!(lines.len(), 18, "{lines:?}");
    let mut led = Vec::new();
    for pair in lines.chunks(2) {
        assert_eq!(pair[0][0], "start", "{lines:?}");
        assert_eq!(pair[1][0], "end", "two leaders at once: {lines:?}");
        assert_eq!(pair[0][1..], pair[1][1..], "two leaders at once: {lines:?}");
        led.push((pair[0][1].clone(), pair[0][2].parse::<u64>().expect("term")));
    }
    assert!(
        led.windows(2).all(|w| w[0].1 < w[1].1),
        "terms not rising: {led:?}"
    );
    // A leader read before its term's raise (its process stopped between
    // winning and raising, on a loaded machine) is reported again with its
    // own term: the later report stands for it.
    let seen: Vec<(String, u64)> = seen
        .iter()
        .enumerate()
        .filter(|(i, (id, term))| {
            !seen.get(i + 1).is_some_and(|(next, raised)| {
                next == id && raised > term && !led.contains(&(id.clone(), *term))
            })
        })
        .map(|(_, report)| report.clone())
        .collect();
    // Each leadership lasted 20 poll intervals, two and a half times the
    // observer's settling time: the observer saw each one, in order, with
    // its identity and term.
    assert_eq!(seen, led, "observed leaders against who led");
}

/// An observer on a manager with no candidate of its own hears of the
/// resignation of a leader in another process from the masters: its
/// readings watch the election's key and the release tells it. With an
/// hour's poll interval, only that reports the vacancy within the bound.
#[test]
fn an_observer_without_a_candidate_is_woken_by_another_process_resigning() {
    let servers = cluster(5);
    let urls = servers.urls();
    let name = key("watched");
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let _candidate = Candidates(vec![spawn(&urls, &name, "leader", &log, 1, 5_000)]);
    wait_until(HANG, "the candidate leads", || !lines(&log).is_empty()).expect("elected");
    let watcher = observer_manager(&servers, NODE_TIMEOUT);
    let election = watcher
        .election(&name, TTL)
        .expect("election")
        .poll_interval(Duration::from_secs(3_600));
    let mut observer = election.observe();
    match observer.next_timeout(HANG).expect("read") {
        Some(Observed::Leader(seen)) => {
            assert_eq!(seen.identity().map(|i| i.as_str()), Some("leader"));
        }
        other => panic!("{other:?}"),
    }
    // Readings that fail on a loaded machine are tried again.
    let started = Instant::now();
    let vacant = loop {
        assert!(started.elapsed() < HANG, "not woken by the resignation");
        match observer.next_timeout(HANG) {
            Ok(change) => break change,
            Err(e) => eprintln!("a reading failed: {e}"),
        }
    };
    assert_eq!(
        vacant,
        Some(Observed::Vacant),
        "not woken by the resignation"
    );
    let log = lines(&log);
    assert_eq!(log.last().map(|l| l[0].as_str()), Some("end"), "{log:?}");
    // The resignation left nothing of the leader's but the fencing
    // counter; the observer's watch lives on until it stops watching.
    let fence = format!("{name}{FENCE_SUFFIX}");
    let watchers = format!("{name}{WATCH_SUFFIX}");
    for (i, server) in servers.iter().enumerate() {
        let mut admin = server.client().expect("client");
        let mut found = election_keys(&mut admin, &name);
        found.sort();
        assert!(
            found == [fence.clone(), watchers.clone()] || found == [fence.clone()],
            "server {i}: {found:?}"
        );
        let left: i64 = redis::cmd("PTTL")
            .arg(&watchers)
            .query(&mut admin)
            .expect("PTTL");
        // Two poll intervals and the settle time at most; -2 where the
        // reading did not reach this server.
        assert!(left == -2 || (0..=7_201_000).contains(&left), "{left}");
    }
}

/// The election `name`'s keys on a server: the name and its helper keys.
fn election_keys(admin: &mut redis::Connection, name: &str) -> Vec<String> {
    let mut found: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{name}*"))
        .query(admin)
        .expect("KEYS");
    found.retain(|k| k == name || k.starts_with(&format!("{name}\u{1f}")));
    found
}

/// A leader killed with kill -9 leaves nothing behind but the fencing
/// counter once its TTL is over.
#[test]
fn a_crashed_leader_leaves_only_the_fencing_counter_after_its_ttl() {
    let servers = cluster(5);
    let urls = servers.urls();
    let name = key("crashed");
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let mut candidate = Candidates(vec![spawn(&urls, &name, "leader", &log, 1, 60_000)]);
    wait_until(HANG, "the candidate leads", || !lines(&log).is_empty()).expect("elected");
    candidate.0[0].kill().expect("SIGKILL");
    candidate.0[0].wait().expect("reaped");
    let fence = format!("{name}{FENCE_SUFFIX}");
    // The keys expire on the servers' clocks: within the TTL, with a
    // generous margin for a loaded machine (a hang bound, not a figure).
    wait_until(HANG, "only the fencing counter left", || {
        servers.iter().all(|server| {
            let mut admin = server.client().expect("client");
            election_keys(&mut admin, &name) == [fence.clone()]
        })
    })
    .expect("the leader's keys expired");
}

#[test]
fn a_killed_leader_process_is_replaced_within_its_ttl_and_a_retry() {
    let servers = cluster(5);
    let urls = servers.urls();
    let name = key("election-kill");
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let mut candidates = Candidates(
        (0..3)
            .map(|i| spawn(&urls, &name, &format!("candidate-{i}"), &log, 1, 60_000))
            .collect(),
    );
    let first = || lines(&log).into_iter().find(|l| l[0] == "start");
    wait_until(HANG, "a first leader", || first().is_some()).expect("a leader");
    let leader = first().expect("a leader");
    let index: usize = leader[1]
        .strip_prefix("candidate-")
        .and_then(|i| i.parse().ok())
        .expect("an id");
    // kill -9: no release, no word; its key lives out its TTL.
    candidates.0[index].kill().expect("SIGKILL");
    let killed = Instant::now();
    candidates.0[index].wait().expect("reaped");
    let next = || lines(&log).into_iter().filter(|l| l[0] == "start").nth(1);
    wait_until(HANG, "a second leader", || next().is_some()).expect("a second leader");
    let took = killed.elapsed();
    let second = next().expect("a second leader");
    assert_ne!(second[1], leader[1]);
    assert!(
        second[2].parse::<u64>().expect("term") > leader[2].parse::<u64>().expect("term"),
        "{leader:?} then {second:?}"
    );
    // Within the TTL, a retry, a round and scheduling slack on a loaded
    // machine (a hang bound, not a figure).
    let bound = TTL + RETRY_MAX + NODE_TIMEOUT * 2 + Duration::from_secs(2);
    println!("replaced {took:?} after the kill (TTL {TTL:?})");
    assert!(took < bound, "replaced after {took:?}");
}

#[test]
fn a_leader_is_told_of_its_loss_before_its_validity_ends_when_three_of_five_freeze() {
    let servers = cluster(5);
    let name = key("election-freeze");
    let timeout = Duration::from_millis(200);
    let locks = Redlock::builder(backends(&servers, timeout))
        .node_timeout(timeout)
        .fencing(true)
        .build()
        .expect("manager");
    let election = locks
        .election(&name, Duration::from_secs(3))
        .expect("election");
    let leadership = election.campaign().expect("elected");
    let valid_until = Instant::now() + leadership.validity();
    for i in 0..3 {
        servers.node(i).pause().expect("SIGSTOP");
    }
    let reason = leadership.wait_lost(Duration::from_secs(30));
    let told = Instant::now();
    for i in 0..3 {
        servers.node(i).resume().expect("SIGCONT");
    }
    assert_eq!(reason, Some(LostReason::ExtendFailed));
    println!(
        "told {:?} before the validity ended",
        valid_until.saturating_duration_since(told)
    );
    assert!(
        told < valid_until,
        "told {:?} after its validity ended",
        told - valid_until
    );
    assert!(leadership.ensure_held().is_err());
}
