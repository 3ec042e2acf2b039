//! The redis-server harness itself: servers start, stop, restart and pause
//! as promised, the TLS / password / ACL variants behave like real servers,
//! and the proxy's modes do what they say. Every test starts its own servers.

use std::net::TcpListener;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use redlock_tests::harness::{
    connect, process_exists, test_ca_pem, wait_until, AclUser, Direction, Proxy, RedisCluster,
    RedisServer, ServerOptions,
};

const SHORT: Duration = Duration::from_millis(300);
const LONG: Duration = Duration::from_secs(5);

fn ping(con: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("PING").query(con)
}

fn set(con: &mut redis::Connection, key: &str, value: &str) -> redis::RedisResult<()> {
    redis::cmd("SET").arg(key).arg(value).exec(con)
}

fn get(con: &mut redis::Connection, key: &str) -> redis::RedisResult<Option<String>> {
    redis::cmd("GET").arg(key).query(con)
}

fn redis_error(err: &anyhow::Error) -> &redis::RedisError {
    err.downcast_ref()
        .unwrap_or_else(|| panic!("not a redis error: {err:#}"))
}

/// The error of a connection attempt that must fail.
fn connect_error(attempt: anyhow::Result<redis::Connection>, why: &str) -> anyhow::Error {
    match attempt {
        Ok(_) => panic!("connected, but {why}"),
        Err(err) => err,
    }
}

fn assert_gone(pid: u32) {
    assert!(!process_exists(pid), "pid {pid} still exists");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "/proc/{pid} still exists"
    );
}

#[test]
fn server_starts_ready_and_leaves_no_process_or_dir() {
    let server = RedisServer::start().expect("start");
    let pid = server.pid().expect("running");
    assert!(process_exists(pid));
    assert!(server.is_running());
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port()));
    assert_eq!(server.addr().port(), server.port());
    let mut con = server.client().expect("client");
    assert_eq!(ping(&mut con).expect("ping"), "PONG");
    let config: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query(&mut con)
        .expect("config");
    assert_eq!(config, ["appendonly", "no"]);
    let dir = server.dir().to_owned();
    assert!(dir.join("redis.conf").exists());
    drop(server);
    assert_gone(pid);
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn a_panicking_test_still_stops_its_server() {
    let (tx, rx) = mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let server = RedisServer::start().expect("start");
        tx.send(server.pid().expect("running")).expect("send");
        panic!("deliberate panic with a running server");
    })
    .join();
    assert!(outcome.is_err(), "the thread should have panicked");
    assert_gone(rx.recv().expect("pid"));
}

#[test]
fn kill_stops_and_reaps_the_server() {
    let server = RedisServer::start().expect("start");
    let pid = server.pid().expect("running");
    server.kill().expect("kill");
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    assert_gone(pid);
    let err = connect_error(server.client_with_timeout(SHORT), "nothing listens");
    assert!(redis_error(&err).is_connection_refusal(), "{err:#}");
    server.kill().expect("killing twice is a no-op");
}

#[test]
fn restart_without_persistence_loses_keys() {
    let server = RedisServer::start().expect("start");
    let (port, old_pid) = (server.port(), server.pid().expect("running"));
    set(&mut server.client().expect("client"), "k", "v").expect("set");
    server.restart().expect("restart");
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), Some(old_pid));
    assert_gone(old_pid);
    let mut con = server.client().expect("client after restart");
    assert_eq!(get(&mut con, "k").expect("get"), None);
}

#[test]
fn restart_with_aof_always_keeps_keys_even_after_kill_9() {
    let server = ServerOptions::new().aof().start().expect("start");
    let port = server.port();
    let mut con = server.client().expect("client");
    set(&mut con, "k", "v").expect("set");
    redis::cmd("SET")
        .arg("ttl")
        .arg("v")
        .arg("PX")
        .arg(60_000)
        .exec(&mut con)
        .expect("set px");
    server.kill().expect("crash");
    server.restart().expect("start again");
    assert_eq!(server.port(), port);
    let mut con = server.client().expect("client after restart");
    assert_eq!(get(&mut con, "k").expect("get").as_deref(), Some("v"));
    let ttl: i64 = redis::cmd("PTTL").arg("ttl").query(&mut con).expect("pttl");
    assert!(ttl > 0, "the TTL survives too: {ttl}");
    // A running AOF server restarts the same way.
    server.restart().expect("restart");
    let mut con = server.client().expect("client after 2nd restart");
    assert_eq!(get(&mut con, "k").expect("get").as_deref(), Some("v"));
}

#[test]
fn pause_makes_commands_time_out_and_resume_restores_them() {
    let server = RedisServer::start().expect("start");
    let mut con = server.client_with_timeout(SHORT).expect("client");
    assert_eq!(ping(&mut con).expect("ping"), "PONG");
    server.pause().expect("pause");
    assert!(server.is_paused() && server.is_running());
    let started = Instant::now();
    let err = ping(&mut con).expect_err("a stopped server cannot answer");
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() >= SHORT - Duration::from_millis(50));
    server.resume().expect("resume");
    assert!(!server.is_paused());
    let mut fresh = server
        .client_with_timeout(LONG)
        .expect("client after resume");
    assert_eq!(ping(&mut fresh).expect("ping after resume"), "PONG");
}

#[test]
fn dropping_a_paused_server_stops_it() {
    let server = RedisServer::start().expect("start");
    let pid = server.pid().expect("running");
    server.pause().expect("pause");
    drop(server);
    assert_gone(pid);
}

#[test]
fn tls_server_talks_to_a_client_trusting_the_ca_only() {
    let server = ServerOptions::new().tls().start().expect("start");
    let url = server.url();
    assert_eq!(url, format!("rediss://127.0.0.1:{}", server.port()));
    assert_eq!(server.ca_pem(), Some(test_ca_pem().expect("ca")));
    let mut con = connect(&url, server.ca_pem(), LONG).expect("TLS client");
    assert_eq!(ping(&mut con).expect("ping over TLS"), "PONG");
    set(&mut con, "k", "v").expect("set over TLS");

    let plain = format!("redis://127.0.0.1:{}", server.port());
    let plain_ping =
        connect(&plain, None, SHORT).and_then(|mut con| ping(&mut con).map_err(Into::into));
    assert!(plain_ping.is_err(), "plain text answered: {plain_ping:?}");

    let untrusted = connect(&url, None, SHORT);
    assert!(untrusted.is_err(), "a client without the CA connected");
}

#[test]
fn password_is_required_and_checked() {
    let server = ServerOptions::new()
        .password("s3cret pw")
        .start()
        .expect("start");
    assert_eq!(
        server.url(),
        format!("redis://:s3cret%20pw@127.0.0.1:{}", server.port())
    );
    let mut con = server.client().expect("right password");
    assert_eq!(ping(&mut con).expect("ping"), "PONG");

    let mut anonymous = connect(&server.url_with_credentials(None, None), None, LONG)
        .expect("connecting sends no AUTH");
    let err = ping(&mut anonymous).expect_err("no password");
    assert_eq!(err.code(), Some("NOAUTH"), "{err:?}");

    let wrong = server.url_with_credentials(None, Some("wrong"));
    let err = connect_error(connect(&wrong, None, LONG), "the password is wrong");
    let err = redis_error(&err);
    assert_eq!(
        err.kind(),
        redis::ErrorKind::AuthenticationFailed,
        "{err:?}"
    );
}

#[test]
fn acl_user_is_limited_to_its_key_prefix() {
    let server = ServerOptions::new()
        .password("admin")
        .acl_user(AclUser::locker())
        .start()
        .expect("start");
    assert_eq!(
        server.url(),
        format!("redis://locker:locker-secret@127.0.0.1:{}", server.port())
    );
    let mut con = server.connect_url(&server.url(), LONG).expect("as locker");
    let mut admin = server.client().expect("admin");
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut admin)
        .expect("client list");
    assert!(clients.contains(" user=locker "), "{clients}");
    redis::cmd("SET")
        .arg("locks:a")
        .arg("token")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .exec(&mut con)
        .expect("a lock key");
    let script = "return redis.call('GET', KEYS[1])";
    let value: String = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("locks:a")
        .query(&mut con)
        .expect("a script on a lock key");
    assert_eq!(value, "token");

    let err = set(&mut con, "other:a", "x").expect_err("outside the prefix");
    assert_eq!(err.code(), Some("NOPERM"), "{err:?}");
    let err = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("other:a")
        .query::<Option<String>>(&mut con)
        .expect_err("a script outside the prefix");
    assert_eq!(err.code(), Some("NOPERM"), "{err:?}");
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1mb")
        .exec(&mut con)
        .expect_err("no admin commands");
    assert_eq!(err.code(), Some("NOPERM"), "{err:?}");

    // The admin client is the default user and may do anything.
    set(&mut admin, "other:a", "x").expect("admin writes anywhere");
    let wrong = server.url_with_credentials(Some("locker"), Some("wrong"));
    assert!(server.connect_url(&wrong, LONG).is_err());
}

#[test]
fn extra_config_lines_are_applied() {
    let server = ServerOptions::new()
        .config("maxmemory", "1mb")
        .config("maxmemory-policy", "noeviction")
        .start()
        .expect("start");
    let mut con = server.client().expect("client");
    let memory: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory*")
        .query(&mut con)
        .expect("config get");
    let pairs: Vec<_> = memory
        .chunks(2)
        .map(|p| (p[0].as_str(), p[1].as_str()))
        .collect();
    assert!(pairs.contains(&("maxmemory", "1048576")), "{pairs:?}");
    assert!(
        pairs.contains(&("maxmemory-policy", "noeviction")),
        "{pairs:?}"
    );
}

#[test]
fn a_missing_binary_fails_with_a_clear_message() {
    let err = ServerOptions::new()
        .binary("/nonexistent/redis-server")
        .start()
        .expect_err("no such binary");
    let message = format!("{err:#}");
    assert!(message.contains("not found"), "{message}");
    assert!(message.contains("install"), "{message}");
}

#[test]
fn a_taken_port_is_retried_on_another() {
    let blocker = TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = blocker.local_addr().expect("addr").port();
    let server = ServerOptions::new()
        .first_port(taken)
        .start()
        .expect("start despite the taken port");
    assert_ne!(server.port(), taken);
    assert_eq!(
        ping(&mut server.client().expect("client")).expect("ping"),
        "PONG"
    );
    assert!(server.log().contains("Address already in use"));
}

#[test]
fn cluster_starts_independent_nodes_and_stops_them_all() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).expect("start");
    assert_eq!(cluster.len(), 3);
    let urls = cluster.urls();
    let mut distinct = urls.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "{urls:?}");
    set(&mut cluster.node(0).client().expect("client"), "k", "v").expect("set");
    for (i, node) in cluster.iter().enumerate() {
        let mut con = node.client().expect("client");
        let expected = (i == 0).then(|| "v".to_owned());
        assert_eq!(get(&mut con, "k").expect("get"), expected, "node {i}");
    }
    let pids: Vec<u32> = cluster.iter().map(|n| n.pid().expect("running")).collect();
    drop(cluster);
    pids.into_iter().for_each(assert_gone);
}

#[test]
fn proxy_passes_through() {
    let server = RedisServer::start().expect("start");
    let proxy = Proxy::in_front_of(&server).expect("proxy");
    assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}", proxy.port()));
    let mut con = server.connect_url(proxy.url(), LONG).expect("via proxy");
    set(&mut con, "k", "v").expect("set via proxy");
    let mut direct = server.client().expect("direct");
    assert_eq!(get(&mut direct, "k").expect("get").as_deref(), Some("v"));
    assert_eq!(proxy.open_connections(), 1);
}

#[test]
fn proxy_passes_tls_and_credentials_through() {
    let server = ServerOptions::new()
        .tls()
        .password("pw")
        .start()
        .expect("start");
    let proxy = Proxy::in_front_of(&server).expect("proxy");
    assert_eq!(
        proxy.url(),
        format!("rediss://:pw@127.0.0.1:{}", proxy.port())
    );
    let mut con = server
        .connect_url(proxy.url(), LONG)
        .expect("TLS via proxy");
    assert_eq!(ping(&mut con).expect("ping"), "PONG");
}

#[test]
fn proxy_delay_adds_at_least_the_delay() {
    let server = RedisServer::start().expect("start");
    let proxy = Proxy::in_front_of(&server).expect("proxy");
    let mut con = server.connect_url(proxy.url(), LONG).expect("via proxy");
    let delay = Duration::from_millis(150);
    for (direction, at_least) in [
        (Direction::ToServer, delay),
        (Direction::ToClient, delay),
        (Direction::Both, delay * 2),
    ] {
        proxy.delay(delay, direction);
        let started = Instant::now();
        assert_eq!(ping(&mut con).expect("ping"), "PONG");
        let took = started.elapsed();
        assert!(took >= at_least, "{direction:?}: {took:?} < {at_least:?}");
    }
    proxy.pass_through();
    assert_eq!(ping(&mut con).expect("ping"), "PONG");
}

#[test]
fn proxy_blackhole_makes_commands_time_out() {
    let server = RedisServer::start().expect("start");
    let proxy = Proxy::in_front_of(&server).expect("proxy");
    let mut con = server.connect_url(proxy.url(), SHORT).expect("via proxy");
    assert_eq!(ping(&mut con).expect("ping"), "PONG");
    proxy.blackhole();
    let err = ping(&mut con).expect_err("blackholed");
    assert!(err.is_timeout(), "{err:?}");
    // New connections are accepted but get no answer either.
    let fresh = server
        .connect_url(proxy.url(), SHORT)
        .and_then(|mut con| ping(&mut con).map_err(Into::into));
    assert!(fresh.is_err(), "{fresh:?}");
    assert!(proxy.open_connections() >= 1, "connections stay open");
    proxy.pass_through();
    let mut healed = server
        .connect_url(proxy.url(), LONG)
        .expect("after healing");
    assert_eq!(ping(&mut healed).expect("ping"), "PONG");
}

#[test]
fn proxy_cut_breaks_open_connections_and_refuses_new_ones() {
    let server = RedisServer::start().expect("start");
    let proxy = Proxy::in_front_of(&server).expect("proxy");
    let mut con = server.connect_url(proxy.url(), LONG).expect("via proxy");
    assert_eq!(ping(&mut con).expect("ping"), "PONG");
    proxy.cut();
    assert_eq!(proxy.open_connections(), 0);
    let started = Instant::now();
    let err = ping(&mut con).expect_err("cut");
    assert!(!err.is_timeout(), "a cut is not a timeout: {err:?}");
    assert!(started.elapsed() < LONG, "{:?}", started.elapsed());
    let fresh = server
        .connect_url(proxy.url(), LONG)
        .and_then(|mut con| ping(&mut con).map_err(Into::into));
    let err = fresh.expect_err("new connections are reset while cut");
    assert!(
        !redis_error(&err).is_timeout(),
        "reset, not a timeout: {err:#}"
    );
    proxy.pass_through();
    let mut again = server
        .connect_url(proxy.url(), LONG)
        .expect("after the cut");
    assert_eq!(ping(&mut again).expect("ping"), "PONG");
}

#[test]
fn proxy_drop_ends_its_threads_even_with_stuck_connections() {
    let server = RedisServer::start().expect("start");
    let proxy = Proxy::in_front_of(&server).expect("proxy");
    let mut held = server.connect_url(proxy.url(), SHORT).expect("via proxy");
    let mut slow = server.connect_url(proxy.url(), LONG).expect("via proxy");
    proxy.blackhole();
    assert!(ping(&mut held).is_err(), "held back");
    // The held request now sleeps in a proxy thread for a minute.
    proxy.delay(Duration::from_secs(60), Direction::Both);
    let client = std::thread::spawn(move || ping(&mut slow));
    wait_until(LONG, "both connections open", || {
        proxy.open_connections() == 2
    })
    .expect("two connections");
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(proxy);
        done_tx.send(()).expect("send");
    });
    done_rx
        .recv_timeout(LONG)
        .expect("dropping the proxy joined its threads in time");
    let delayed = client.join().expect("client thread");
    assert!(delayed.is_err(), "{delayed:?}");
}

#[test]
fn proxy_only_forwards_to_loopback() {
    let err = Proxy::start("192.0.2.1:6379".parse().expect("addr")).expect_err("not loopback");
    assert!(format!("{err:#}").contains("loopback"), "{err:#}");
}

#[test]
fn a_rejected_config_fails_with_the_servers_log() {
    let err = ServerOptions::new()
        .config("no-such-directive", "1")
        .start()
        .expect_err("bad config");
    let message = format!("{err:#}");
    assert!(message.contains("exited"), "{message}");
    assert!(message.contains("no-such-directive"), "the log: {message}");
}

/// The session id of process `pid` (field 6 of /proc/<pid>/stat).
fn session_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // The command name (field 2) is in parentheses and may hold spaces.
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    after
        .split(' ')
        .nth(3)
        .expect("field 6")
        .parse()
        .expect("a number")
}

#[test]
fn a_server_in_its_own_session_is_still_controlled_by_its_pid() {
    let server = ServerOptions::new()
        .own_session(true)
        .start()
        .expect("start");
    let pid = server.pid().expect("running");
    // setsid exec'd the server itself under the child's pid.
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).expect("comm");
    assert_eq!(comm.trim(), "redis-server");
    assert_eq!(session_of(pid), pid, "a session of its own");
    assert_ne!(session_of(pid), session_of(std::process::id()));
    let mut con = server.client().expect("client");
    assert_eq!(ping(&mut con).expect("PING"), "PONG");
    server.kill().expect("kill");
    assert!(!process_exists(pid));
    // The default: the test's session.
    let child = RedisServer::start().expect("start");
    let child_pid = child.pid().expect("running");
    assert_eq!(session_of(child_pid), session_of(std::process::id()));
}
