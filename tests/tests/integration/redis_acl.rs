//! The ACL rules docs/operations.md gives, one for the library and one for
//! the command-line tool, read from that file and set up with
//! `ACL SETUSER` on harness-started servers: under them everything works,
//! with a URL naming database 3 (connect and its check that no master is
//! listed twice, locks, fencing, extend, release, readers, wake-ups;
//! `redlock run`, `status` and `check`, run as the built binary); and
//! without each command the docs name, what they say happens does.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use redlock_core::engine::RoundKind;
use redlock_redis::{ConfigError, ConnectError, Event, EventHandler, LockError, Redlock};
use redlock_tests::harness::{wait_until, RedisCluster, RedisServer, ServerOptions};

use crate::redis_common::key;

const OPERATIONS: &str = include_str!("../../../docs/operations.md");
const PASSWORD: &str = "acl-test-password";
const TTL: Duration = Duration::from_secs(30);
/// Generous: a round that times out under load is not what these test.
const NODE_TIMEOUT: Duration = Duration::from_secs(2);
/// The waiters' pause between rounds: only a wake-up ends it early.
const PAUSE: Duration = Duration::from_secs(30);
/// Ten times and more what a wake-up or a command takes.
const BOUND: Duration = Duration::from_secs(10);

/// The rules of the documented `ACL SETUSER <user> ...` line (everything
/// after the user's name but its password).
fn documented(user: &str) -> Vec<String> {
    let line = OPERATIONS
        .lines()
        .find(|line| line.starts_with(&format!("ACL SETUSER {user} ")))
        .unwrap_or_else(|| panic!("docs/operations.md gives no rule for {user}"));
    line.split_whitespace()
        .skip(3)
        .filter(|word| !word.starts_with('>'))
        .map(str::to_owned)
        .collect()
}

/// `rules` without `left_out`.
fn without(rules: &[String], left_out: &[&str]) -> Vec<String> {
    for rule in left_out {
        assert!(
            rules.iter().any(|r| r == rule),
            "{rule} is not in {rules:?}"
        );
    }
    rules
        .iter()
        .filter(|rule| !left_out.contains(&rule.as_str()))
        .cloned()
        .collect()
}

/// Adds the user `name` with `rules` (and [`PASSWORD`]) on every server.
fn add_user(cluster: &RedisCluster, name: &str, rules: &[String]) {
    for server in cluster.iter() {
        let mut admin = server.client().expect("admin");
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg(name)
            .arg("on")
            .arg(format!(">{PASSWORD}"))
            .arg(rules)
            .exec(&mut admin)
            .unwrap_or_else(|e| panic!("ACL SETUSER {name} {rules:?}: {e}"));
    }
}

/// `server` as the user `user`, database `db`, on `host`.
fn url_on(server: &RedisServer, host: &str, user: &str, db: u32) -> String {
    format!("redis://{user}:{PASSWORD}@{host}:{}/{db}", server.port())
}

/// Every server of `cluster` as the user `user`, database 3.
fn urls(cluster: &RedisCluster, user: &str) -> Vec<String> {
    cluster
        .iter()
        .map(|server| url_on(server, "127.0.0.1", user, 3))
        .collect()
}

/// Counts the acquire rounds a manager decided, and the errors its
/// connections reported outside requests (a refused `SUBSCRIBE`).
#[derive(Debug, Default)]
struct Seen {
    rounds: AtomicU64,
    connection_errors: Mutex<Vec<String>>,
}

impl EventHandler for Seen {
    fn on_event(&self, event: &Event<'_>) {
        match event {
            Event::Round(round) if round.kind == RoundKind::Acquire => {
                self.rounds.fetch_add(1, Ordering::SeqCst);
            }
            Event::Connection { node, error } => self
                .connection_errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(format!("{node}: {error}")),
            _ => {}
        }
    }
}

/// A manager over `urls`, its rounds and connection errors seen by the
/// returned hook.
fn connect(urls: &[String], fencing: bool) -> Result<(Redlock, Arc<Seen>), ConnectError> {
    let seen = Arc::new(Seen::default());
    let locks = Redlock::builder([])
        .node_timeout(NODE_TIMEOUT)
        .retry_delay(PAUSE, PAUSE)
        .acquire_timeout(Duration::from_secs(120))
        .fencing(fencing)
        .events(seen.clone())
        .connect(urls)?;
    Ok((locks, seen))
}

/// The value of `name` in database 3 of `server`, read as the admin.
fn get_in_db3(server: &RedisServer, name: &str) -> Option<Vec<u8>> {
    let mut admin = server.client().expect("admin");
    redis::cmd("SELECT")
        .arg(3)
        .exec(&mut admin)
        .expect("SELECT");
    redis::cmd("GET").arg(name).query(&mut admin).expect("GET")
}

#[test]
fn the_librarys_documented_rule_allows_everything_it_sends_with_a_database() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).expect("cluster");
    add_user(&cluster, "locker", &documented("locker"));
    let urls = urls(&cluster, "locker");

    // Connect, and its check that no master is listed twice (PING, INFO):
    // one server under two names is refused.
    let mut twice = urls.clone();
    twice[2] = url_on(cluster.node(0), "localhost", "locker", 3);
    let refused = connect(&twice, false).map(drop).expect_err("listed twice");
    assert!(
        matches!(refused, ConnectError::Config(ConfigError::SameNode { .. })),
        "{refused}"
    );
    let (holder, holder_seen) = connect(&urls, true).expect("connect");

    // Lock (fenced: INCR), in database 3; extend; release.
    let name = key("acl:lib");
    let mut lock = holder.try_lock(name.as_str(), TTL).expect("lock");
    assert!(lock.fencing_token().is_some());
    for server in cluster.iter() {
        assert!(get_in_db3(server, &name).is_some(), "not in database 3");
    }
    lock.extend(TTL).expect("extend");
    lock.release().expect("release");

    // A read-write lock's readers (the sorted-set commands).
    let doc = key("acl:doc");
    let mut read = holder.try_read(&doc, TTL).expect("a reader");
    let busy = holder.try_write(&doc, TTL).expect_err("a reader inside");
    assert!(matches!(busy, LockError::Contended(_)), "{busy}");
    read.extend(TTL).expect("a reader extends");
    read.release().expect("a reader releases");
    holder
        .try_write(&doc, TTL)
        .expect("a writer")
        .release()
        .expect("held");

    // Wake-ups (SUBSCRIBE, and PUBLISH in the release script): a waiter of
    // another manager, pausing 30 s between rounds, gets the lock soon
    // after its release only if the release woke it.
    let (waiter, waiter_seen) = connect(&urls, false).expect("connect");
    let woken = waiter.stats().manager.woken;
    let lock = holder.try_lock(name.as_str(), TTL).expect("lock");
    std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            let got = waiter.lock(name.as_str(), TTL).expect("the waiter's lock");
            let at = Instant::now();
            got.release().expect("held");
            at
        });
        // Refused twice: its first round, and the one that leaves its
        // waiting mark (then it pauses).
        wait_until(BOUND, "the waiter's two refused rounds", || {
            waiter_seen.rounds.load(Ordering::SeqCst) >= 2
        })
        .expect("the waiter waits");
        let released = Instant::now();
        lock.release().expect("held");
        let at = waiting.join().expect("no panic");
        assert!(
            at.saturating_duration_since(released) < BOUND,
            "not woken: {:?} after the release",
            at.saturating_duration_since(released)
        );
    });
    assert!(waiter.stats().manager.woken > woken, "not woken");
    for seen in [&holder_seen, &waiter_seen] {
        let errors = seen
            .connection_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        assert!(errors.is_empty(), "{errors:?}");
    }
}

/// The built `redlock` binary (built now if it is not: this crate cannot
/// depend on a binary crate), with the features this test build unifies.
fn redlock_binary() -> &'static PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let workspace = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let out = Command::new(cargo)
            .current_dir(workspace)
            .args([
                "build",
                "--quiet",
                "-p",
                "redlock-cli",
                "-p",
                "redlock-tests",
                "--bin",
                "redlock",
                "--message-format=json",
            ])
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "building redlock: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let path = stdout
            .lines()
            .filter(|line| line.contains(r#""reason":"compiler-artifact""#))
            .find_map(|line| {
                let (_, rest) = line.split_once(r#""executable":""#)?;
                rest.split_once('"').map(|(path, _)| path.to_owned())
            })
            .expect("cargo names the redlock executable");
        PathBuf::from(path)
    })
}

/// `redlock SUBCOMMAND --server URL... ARGS...`, run to its end.
fn redlock(subcommand: &str, urls: &[String], args: &[&str]) -> Output {
    let mut command = Command::new(redlock_binary());
    command.arg(subcommand).env_remove("REDLOCK_SERVERS");
    for url in urls {
        command.args(["--server", url]);
    }
    let mut child = command
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("redlock starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("redlock {subcommand} {args:?} did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().expect("output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_tools_documented_rule_allows_run_status_and_check() {
    let cluster = RedisCluster::start(3, &ServerOptions::new().aof()).expect("cluster");
    add_user(&cluster, "redlock-cli", &documented("redlock-cli"));
    let urls = urls(&cluster, "redlock-cli");

    // check: every setting read (CONFIG GET included), fit.
    let out = redlock("check", &urls, &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert_eq!(stdout.matches("appendfsync always").count(), 3, "{stdout}");
    assert!(!stdout.contains("unknown"), "{stdout}");

    // run (fenced), then status next to a holder.
    let name = key("acl:cli");
    let out = redlock(
        "run",
        &urls,
        &[
            "--fencing",
            "--no-wait",
            "--node-timeout",
            "1s",
            &name,
            "--",
            "true",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (locks, _) = connect(&urls, false).expect("connect");
    let lock = locks.try_lock(name.as_str(), TTL).expect("lock");
    let out = redlock("status", &urls, &[&name]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("held on 3 of 3"), "{stdout}");
    let out = redlock(
        "run",
        &urls,
        &["--no-wait", "--node-timeout", "1s", &name, "--", "true"],
    );
    assert_eq!(out.status.code(), Some(75), "{}", text(&out.stderr));
    lock.release().expect("held");
    let out = redlock("status", &urls, &["--limit", "2", &name]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("0 of 2 permit(s) held"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn without_a_command_the_library_and_the_tool_fail_as_documented() {
    let cluster = RedisCluster::start(3, &ServerOptions::new().aof()).expect("cluster");
    let library = documented("locker");
    let tool = documented("redlock-cli");
    let name = key("acl:without");

    // +select: a database other than 0 fails at connect, so every round.
    add_user(&cluster, "no-select", &without(&library, &["+select"]));
    let (locks, _) = connect(&urls(&cluster, "no-select"), false).expect("connect is lazy");
    let err = locks.try_lock(name.as_str(), TTL).expect_err("no SELECT");
    assert!(matches!(err, LockError::NoQuorum(_)), "{err}");
    assert!(err.to_string().contains("NOPERM"), "{err}");

    // +ping or +info: the check that no master is listed twice is skipped
    // silently, locks work.
    for (user, left_out) in [("no-ping", "+ping"), ("no-info", "+info")] {
        add_user(&cluster, user, &without(&library, &[left_out]));
        let mut twice = urls(&cluster, user);
        twice[2] = url_on(cluster.node(0), "localhost", user, 3);
        let (locks, _) =
            connect(&twice, false).unwrap_or_else(|e| panic!("{left_out}: not skipped: {e}"));
        drop(locks);
        let (locks, _) = connect(&urls(&cluster, user), false).expect("connect");
        locks
            .try_lock(name.as_str(), TTL)
            .expect("lock")
            .release()
            .expect("held");
    }

    // +hello: the version check is skipped silently, locks work.
    add_user(&cluster, "no-hello", &without(&library, &["+hello"]));
    let (locks, _) = connect(&urls(&cluster, "no-hello"), false).expect("connect");
    locks
        .try_lock(name.as_str(), TTL)
        .expect("lock")
        .release()
        .expect("held");

    // The sorted-set commands: only readers need them.
    let zsets = [
        "+zadd",
        "+zrem",
        "+zscore",
        "+zrange",
        "+zcard",
        "+zremrangebyscore",
    ];
    add_user(&cluster, "no-zsets", &without(&library, &zsets));
    let (locks, _) = connect(&urls(&cluster, "no-zsets"), false).expect("connect");
    locks
        .try_lock(name.as_str(), TTL)
        .expect("lock")
        .release()
        .expect("held");
    let err = locks
        .try_read(&key("acl:no-zsets"), TTL)
        .expect_err("no ZADD");
    // Refused inside the script: Redis says the user "can't run this
    // command", Valkey that it "has no permissions to run the 'zadd'
    // command".
    assert!(matches!(err, LockError::NoQuorum(_)), "{err}");
    let shown = err.to_string();
    assert!(
        shown.contains("can't run this command")
            || shown.contains("has no permissions to run the 'z"),
        "{err}"
    );

    // +script|load: locks work (EVAL).
    add_user(&cluster, "no-load", &without(&library, &["+script|load"]));
    let (locks, _) = connect(&urls(&cluster, "no-load"), true).expect("connect");
    let mut lock = locks.try_lock(name.as_str(), TTL).expect("lock");
    lock.extend(TTL).expect("extend");
    lock.release().expect("release");

    // +pttl: status gets no answer, 69.
    add_user(&cluster, "no-pttl", &without(&tool, &["+pttl"]));
    let out = redlock("status", &urls(&cluster, "no-pttl"), &[&name]);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("only 0 of 3 servers answered"),
        "{}",
        text(&out.stderr)
    );

    // +config|get: check says appendfsync unknown, and still fit.
    add_user(&cluster, "no-config", &without(&tool, &["+config|get"]));
    let out = redlock("check", &urls(&cluster, "no-config"), &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let unknown = stdout
        .lines()
        .filter(|l| l.starts_with("ok ") && l.contains("appendfsync unknown"))
        .count();
    assert_eq!(unknown, 3, "{stdout}");
}
