//! Release notifications over Redis Pub/Sub on real servers: a waiter of
//! another manager (another process, usually) is woken by the release
//! instead of sleeping out its random pause; the release script publishes
//! only keys somebody waits for; the subscriber connections reconnect after
//! a restart and close when the manager goes.
//!
//! Waiters pause 30 s between rounds: a call that returns within the 5 s
//! bound after the release was woken, not timed.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redlock_core::{Event, EventHandler};
use redlock_redis::{LockError, Redlock, RELEASE_CHANNEL, WAIT_SUFFIX};
use redlock_tests::harness::{
    connect, wait_until, AclUser, RedisCluster, ServerOptions, DEFAULT_CLIENT_TIMEOUT,
};

use crate::redis_common::{backends, cluster, key};
use crate::redis_errors::DOCUMENTED_ACL;

const TTL: Duration = Duration::from_secs(60);
/// Generous: these tests are about wake-ups, and a round that times out
/// under load would send the waiter into its 30 s pause.
const NODE_TIMEOUT: Duration = Duration::from_secs(2);
const PAUSE: Duration = Duration::from_secs(30);
/// Ten times and more what a wake-up takes: only a missed one fails.
const BOUND: Duration = Duration::from_secs(5);

fn manager(cluster: &RedisCluster) -> Redlock {
    let locks = Redlock::builder(backends(cluster, NODE_TIMEOUT))
        .node_timeout(NODE_TIMEOUT)
        .retry_delay(PAUSE, PAUSE)
        .acquire_timeout(Duration::from_secs(120))
        .build()
        .expect("valid manager");
    warm(&locks);
    locks
}

/// Waits until `locks` has working connections to every server (a fresh
/// pool connects in the background; after a restart it finds its
/// connections closed on first use): so that a waiter's first rounds are
/// decided by the lock, not by a connect under load, and its 30 s pause
/// comes only from being refused.
fn warm(locks: &Redlock) {
    wait_until(BOUND * 2, "connections to every server", || {
        locks
            .try_lock("locks:wake-probe", TTL)
            .is_ok_and(|l| l.release().is_ok())
            && locks.flush(BOUND)
    })
    .expect("the pools connect");
}

/// Subscribers of the managers' release channels on each server.
fn subscribers(cluster: &RedisCluster) -> Vec<i64> {
    cluster
        .iter()
        .map(|s| {
            let mut con = connect(&s.url(), s.ca_pem(), DEFAULT_CLIENT_TIMEOUT).expect("client");
            let channels: Vec<String> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .arg(format!("{RELEASE_CHANNEL}:*"))
                .query(&mut con)
                .expect("PUBSUB CHANNELS");
            channels
                .iter()
                .map(|channel| {
                    let (_, n): (String, i64) = redis::cmd("PUBSUB")
                        .arg("NUMSUB")
                        .arg(channel)
                        .query(&mut con)
                        .expect("PUBSUB NUMSUB");
                    n
                })
                .sum()
        })
        .collect()
}

/// Waits until `key`'s waiting mark is on every server: the waiter's
/// queued round was refused everywhere (on its first round, or its second
/// after a plain one).
fn marked(servers: &RedisCluster, key: &str) -> bool {
    let mark = format!("{key}{WAIT_SUFFIX}");
    // A fresh connection per look: one whose read timed out under load is
    // out of step for good.
    let has_mark = |s: &redlock_tests::harness::RedisServer| {
        connect(&s.url(), s.ca_pem(), BOUND).is_ok_and(|mut con| {
            // (GET: the ACL users of these tests may not run EXISTS)
            redis::cmd("GET")
                .arg(&mark)
                .query::<Option<String>>(&mut con)
                .is_ok_and(|v| v.is_some())
        })
    };
    wait_until(BOUND, "the waiter's mark", || servers.iter().all(has_mark)).is_ok()
}

/// What the servers hold for `key`, and what `waiter` counted, for a
/// failure's message.
fn state(servers: &RedisCluster, key: &str, waiter: &Redlock) -> String {
    let values: Vec<_> = servers
        .iter()
        .map(|s| {
            connect(&s.url(), s.ca_pem(), BOUND).map(|mut con| {
                [key.to_owned(), format!("{key}{WAIT_SUFFIX}")]
                    .map(|k| redis::cmd("GET").arg(k).query::<Option<Vec<u8>>>(&mut con))
            })
        })
        .collect();
    format!("{values:?} {:?}", waiter.stats())
}

/// `holder` locks `key` and `waiter` waits for it; `holder` releases;
/// returns how long after the release the waiter had the lock, having
/// checked that a notification woke it.
fn handed_over(servers: &RedisCluster, holder: &Redlock, waiter: &Redlock, key: &str) -> Duration {
    // Every earlier release has run, so the holder locks every server and
    // the waiter is refused by each.
    assert!(waiter.flush(BOUND) && holder.flush(BOUND));
    let lock = holder.try_lock(key, TTL).expect("free");
    assert!(holder.flush(BOUND));
    let woken = waiter.stats().manager.woken;
    std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            let got = waiter.lock(key, TTL).expect("acquired");
            let at = Instant::now();
            got.release().expect("held");
            at
        });
        assert!(
            marked(servers, key),
            "never marked: {}",
            state(servers, key, waiter)
        );
        let released = Instant::now();
        lock.release().expect("held");
        let at = waiting.join().expect("no panic");
        assert!(waiter.stats().manager.woken > woken, "not woken");
        at.saturating_duration_since(released)
    })
}

#[test]
fn a_waiter_of_another_manager_is_woken_by_the_release() {
    let servers = cluster(3);
    let holder = manager(&servers);
    let waiter = manager(&servers);
    let key = key("wake-woken");
    let after = handed_over(&servers, &holder, &waiter, &key);
    assert!(
        after < BOUND,
        "acquired {after:?} after the release: the pause ran out, no wake-up"
    );
    // The first time, the subscriptions may have come up after the release
    // (a feed that starts listening wakes its waiters, in case it missed
    // one); the second time they are up: the release itself is heard.
    let heard = waiter.stats().manager.releases_heard;
    assert!(handed_over(&servers, &holder, &waiter, &key) < BOUND);
    let stats = waiter.stats().manager;
    assert!(
        stats.woken >= 2 && stats.releases_heard > heard,
        "{stats:?}"
    );
}

#[test]
fn the_release_script_publishes_only_keys_somebody_waits_for() {
    let servers = cluster(1);
    let server = servers.node(0);
    let mut subscriber = connect(&server.url(), server.ca_pem(), BOUND).expect("client");
    // (the connection's read timeout bounds each wait for a message)
    let mut listener = subscriber.as_pubsub();
    listener
        .psubscribe(format!("{RELEASE_CHANNEL}:*"))
        .expect("psubscribe");
    let locks = manager(&servers);
    let quiet = key("wake-quiet");
    let waited = key("wake-waited");
    // Uncontended: nothing published. The marker sent afterwards on the
    // same channel must be the first message heard.
    locks
        .try_lock(quiet.as_str(), TTL)
        .expect("free")
        .release()
        .expect("held");
    let mut con = connect(&server.url(), server.ca_pem(), DEFAULT_CLIENT_TIMEOUT).expect("client");
    let _: i64 = redis::cmd("PUBLISH")
        .arg(format!("{RELEASE_CHANNEL}:0"))
        .arg("marker")
        .query(&mut con)
        .expect("publish");
    let first: String = listener
        .get_message()
        .expect("a message")
        .get_payload()
        .expect("text");
    assert_eq!(first, "marker", "an uncontended release published");
    // Contended: a waiter's mark is on the key, so its release publishes it.
    let other = manager(&servers);
    let after = handed_over(&servers, &locks, &other, &waited);
    assert!(after < BOUND, "{after:?}");
    let message = listener.get_message().expect("a message");
    let heard: String = message.get_payload().expect("text");
    // `<the waiting manager's id> <key>`, on that manager's own channel.
    let (id, key) = heard.split_once(' ').expect("id and key");
    assert!(id.parse::<u64>().is_ok(), "{heard}");
    assert_eq!(key, waited);
    assert_eq!(
        message.get_channel_name(),
        format!("{RELEASE_CHANNEL}:{id}")
    );
}

#[test]
fn the_subscriptions_come_back_after_a_restart_and_go_with_the_manager() {
    let servers = cluster(3);
    let holder = manager(&servers);
    let waiter = manager(&servers);
    let key = key("wake-restart");
    assert_eq!(subscribers(&servers), [0, 0, 0], "opened only when waiting");
    assert!(handed_over(&servers, &holder, &waiter, &key) < BOUND);
    assert_eq!(subscribers(&servers), [1, 1, 1], "one per master");
    // Restarted without persistence: the subscriptions are gone with the
    // old processes; the listeners connect again.
    for server in servers.iter() {
        server.restart().expect("restart");
    }
    wait_until(BOUND * 2, "subscribed again", || {
        subscribers(&servers) == [1, 1, 1]
    })
    .expect("the listeners reconnect");
    warm(&holder);
    warm(&waiter);
    let after = handed_over(&servers, &holder, &waiter, &key);
    assert!(after < BOUND, "not woken after the restart: {after:?}");
    drop(waiter);
    wait_until(BOUND, "unsubscribed", || subscribers(&servers) == [0, 0, 0])
        .expect("the listeners close with the manager");
}

fn acl_cluster(extra: &[&str]) -> RedisCluster {
    let rules = DOCUMENTED_ACL.iter().chain(extra).copied();
    let user = AclUser::locker().keys("~locks:*").commands(rules);
    RedisCluster::start(3, &ServerOptions::new().acl_user(user)).expect("ACL cluster")
}

#[test]
fn an_acl_user_without_pubsub_still_releases_and_its_waiters_poll() {
    // The documented rules without the channel: PUBLISH is refused inside
    // the release script (by redis.pcall, so the release still happens),
    // SUBSCRIBE too (the listener reports it and stops).
    let servers = acl_cluster(&[]);
    let holder = manager(&servers);
    let reports = Arc::new(Reports::default());
    let waiter = Redlock::builder(backends(&servers, NODE_TIMEOUT))
        .node_timeout(NODE_TIMEOUT)
        .retry_delay(Duration::from_millis(20), Duration::from_millis(50))
        .events(Arc::clone(&reports) as Arc<dyn EventHandler>)
        .build()
        .expect("valid manager");
    warm(&waiter);
    let key = key("wake-acl-poll");
    let lock = holder.try_lock(key.as_str(), TTL).expect("free");
    assert!(holder.flush(BOUND));
    std::thread::scope(|s| {
        let waiting = s.spawn(|| waiter.lock(key.as_str(), TTL).map(|l| l.release()));
        assert!(marked(&servers, &key), "never marked");
        lock.release().expect("released despite NOPERM on PUBLISH");
        waiting
            .join()
            .expect("no panic")
            .expect("acquired by polling")
            .expect("held");
    });
    assert_eq!(waiter.stats().manager.releases_heard, 0);
    // Each listener reported its refused SUBSCRIBE once and stopped: no
    // more reports for longer than its longest pause between tries (2 s).
    wait_until(BOUND, "the listeners' reports", || {
        reports.0.load(Ordering::SeqCst) >= 3
    })
    .expect("NOPERM reported");
    assert!(waiter.stats().nodes.iter().all(|n| n
        .last_error
        .as_deref()
        .is_some_and(|e| e.to_lowercase().contains("permission"))));
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        reports.0.load(Ordering::SeqCst),
        3,
        "a listener kept trying"
    );
}

/// Counts connection events.
#[derive(Default)]
struct Reports(AtomicUsize);

impl EventHandler for Reports {
    fn on_event(&self, event: &Event<'_>) {
        if matches!(event, Event::Connection { .. }) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn an_acl_user_allowed_the_channel_is_woken() {
    let servers = acl_cluster(&["&redlock:released:*", "+publish", "+subscribe"]);
    let holder = manager(&servers);
    let waiter = manager(&servers);
    let key = key("wake-acl-woken");
    let after = handed_over(&servers, &holder, &waiter, &key);
    assert!(after < BOUND, "no wake-up under the ACL user: {after:?}");
    assert!(waiter.stats().manager.woken >= 1);
}

/// Runs `n` contender processes on `key` for `window`; returns each one's
/// acquisitions and pauses cut short by a notification.
fn contenders(
    servers: &RedisCluster,
    key: &str,
    mode: &str,
    n: usize,
    window: Duration,
) -> Vec<(u64, u64)> {
    let until = SystemTime::now() + window;
    let until_ms = until
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis()
        .to_string();
    let children: Vec<_> = (0..n)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_redlock-contender"))
                .arg(key)
                .arg(mode)
                .arg(&until_ms)
                .args(servers.urls())
                .stdout(Stdio::piped())
                .spawn()
                .expect("contender started")
        })
        .collect();
    children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().expect("contender ran");
            assert!(out.status.success(), "{out:?}");
            let text = String::from_utf8_lossy(&out.stdout);
            let mut counts = text.split_whitespace().map(|n| n.parse().expect("a count"));
            (
                counts.next().expect("acquisitions"),
                counts.next().expect("wake-ups"),
            )
        })
        .collect()
}

#[test]
fn processes_take_turns_on_a_contended_key() {
    // Four processes, each with one manager of default settings, loop
    // lock + release on one key for 3 s: every one of them is woken by
    // releases (not only polling) and gets its share. (In the benchmark's
    // procs mode, without wake-ups, one of eight processes made all the
    // acquisitions of a window; here, four processes polling got 9-43 %
    // each in one run by hand: the share alone would not tell.)
    let servers = cluster(3);
    let counts = contenders(
        &servers,
        &key("wake-turns"),
        "wake",
        4,
        Duration::from_secs(3),
    );
    let total: u64 = counts.iter().map(|(held, _)| held).sum();
    assert!(total >= 100, "{counts:?}");
    for (held, woken) in &counts {
        assert!(*held * 20 >= total, "a process got under 5 %: {counts:?}");
        assert!(*woken > 0, "a process was never woken: {counts:?}");
    }
}

/// The one-letter state of process `pid` (`T` when stopped).
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// A child process killed and reaped however the test ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_releaser_told_by_the_release_that_the_key_is_waited_for_queues_behind_the_waiter() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let servers = cluster(3);
    let a = manager(&servers);
    let b = manager(&servers);
    warm(&a);
    warm(&b);
    // `a` waits once, on another key: its feed starts (it hears only its
    // own channel), and the test key is not contended for it.
    assert!(handed_over(&servers, &b, &a, &key("wake-reply-other")) < BOUND);
    let key = key("wake-reply");
    let lock = a.try_lock(key.as_str(), TTL).expect("free");
    assert!(a.flush(BOUND));
    // Another process waits for the key until its mark is on every
    // server, and is then stopped: it cannot take the key when `a`
    // releases, and its mark lives on (at least twice its longest pause,
    // 200 ms, past its last refusal).
    let until = SystemTime::now() + Duration::from_secs(60);
    let until_ms = until
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis()
        .to_string();
    let child = Reaped(
        Command::new(env!("CARGO_BIN_EXE_redlock-contender"))
            .arg(&key)
            .arg("wake")
            .arg(&until_ms)
            .args(servers.urls())
            .stdout(Stdio::null())
            .spawn()
            .expect("contender started"),
    );
    let pid = child.0.id();
    assert!(marked(&servers, &key), "{}", state(&servers, &key, &a));
    kill(
        Pid::from_raw(i32::try_from(pid).expect("pid")),
        Signal::SIGSTOP,
    )
    .expect("SIGSTOP");
    wait_until(BOUND, "the waiter stopped", || {
        process_state(pid) == Some('T')
    })
    .expect("stopped");
    // The release's reply says that a manager waits: `a`'s next `lock`
    // goes in line behind the stopped waiter's mark instead of taking the
    // free key (which it would at once without being told).
    lock.release().expect("held");
    let err = a
        .lock_timeout(key.as_str(), TTL, Duration::from_millis(100))
        .expect_err("in line behind the waiter");
    assert!(matches!(err, LockError::Timeout { .. }), "{err}");
    kill(
        Pid::from_raw(i32::try_from(pid).expect("pid")),
        Signal::SIGCONT,
    )
    .expect("SIGCONT");
    drop(child);
}
