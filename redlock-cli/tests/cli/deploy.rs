//! The recipes in deploy/: masters started with the shipped redis.conf are
//! fit for Redlock by `redlock check`, on every server kind, and keep a lock
//! across a crash.

use redlock_tests::harness::{RedisCluster, RedisServer, ServerKind, ServerOptions};

use crate::check::check;

const CONF: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/redis.conf");

fn config_set(node: &RedisServer, name: &str, value: &str) {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .exec(&mut node.client().unwrap())
        .unwrap();
}

#[test]
fn the_shipped_redis_conf_passes_redlock_check_on_every_server_kind() {
    // Redis 7.0, Redis 6.2 (the oldest supported) and Valkey 9.1, each with
    // deploy/redis.conf, only its port, dir and log set by the harness.
    let fleet =
        RedisCluster::start_kinds(&ServerKind::all(), &ServerOptions::new().config_file(CONF))
            .unwrap();
    // The file's settings are the ones in force.
    for node in fleet.iter() {
        let mut admin = node.client().unwrap();
        for (name, value) in [
            ("maxmemory-policy", "noeviction"),
            ("maxmemory", "268435456"),
            ("appendonly", "yes"),
            ("appendfsync", "always"),
            ("no-appendfsync-on-rewrite", "no"),
            ("save", ""),
            ("notify-keyspace-events", ""),
            ("protected-mode", "yes"),
        ] {
            let got: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query(&mut admin)
                .unwrap();
            assert_eq!(got, [name, value], "{}", node.url());
        }
    }
    let urls = fleet.urls();
    let out = check(&urls);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert!(out.stdout.contains("fit: 3 server(s)"), "{}", out.stdout);
    assert_eq!(
        out.stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        3,
        "{}",
        out.stdout
    );
    // Not even a warning: AOF with appendfsync always, no replicas.
    assert!(!out.stdout.contains("warning"), "{}", out.stdout);

    // The control: the same check fails one master that may evict, naming
    // it, and warns about one that no longer fsyncs every write.
    let evicting = fleet.node(1);
    config_set(evicting, "maxmemory-policy", "allkeys-lru");
    let out = check(&urls);
    assert_eq!(out.code(), Some(1), "{out:?}");
    let named = format!("127.0.0.1:{}/0", evicting.port());
    assert!(
        out.says(&["error", &named, "allkeys-lru"]),
        "{}",
        out.stdout
    );
    config_set(evicting, "maxmemory-policy", "noeviction");
    config_set(evicting, "appendfsync", "everysec");
    let out = check(&urls);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert!(out.says(&["warning", &named, "everysec"]), "{}", out.stdout);
}

#[test]
fn a_lock_key_on_a_master_of_the_shipped_conf_survives_kill_9() {
    let server = ServerOptions::new().config_file(CONF).start().unwrap();
    let mut admin = server.client().unwrap();
    redis::cmd("SET")
        .arg("locks:deploy")
        .arg("token")
        .arg("PX")
        .arg(600_000)
        .exec(&mut admin)
        .unwrap();
    // SIGKILL: no shutdown save; only what appendfsync always wrote is left.
    server.restart().unwrap();
    let mut admin = server.client().unwrap();
    let value: Option<String> = redis::cmd("GET")
        .arg("locks:deploy")
        .query(&mut admin)
        .unwrap();
    assert_eq!(value.as_deref(), Some("token"), "{}", server.log());
    let ttl: i64 = redis::cmd("PTTL")
        .arg("locks:deploy")
        .query(&mut admin)
        .unwrap();
    assert!(ttl > 0 && ttl <= 600_000, "{ttl}");
}

const UNIT: &str = include_str!("../../../deploy/redlock-master@.service");
const COMPOSE: &str = include_str!("../../../deploy/compose.yaml");

/// `redlock run`'s default TTL, in whole seconds, as its `--help` gives it.
fn default_ttl_secs() -> u64 {
    let mut command = crate::redlock();
    command.args(["run", "--help"]);
    let help = crate::finish(command).stdout;
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("--ttl "))
        .unwrap();
    let default = line.split("[default: ").nth(1).unwrap();
    default.strip_suffix("s]").unwrap().parse().unwrap()
}

#[test]
fn the_unit_and_the_compose_file_delay_a_start_past_the_default_ttl() {
    let unit: u64 = UNIT
        .lines()
        .find_map(|l| l.strip_prefix("Environment=REDLOCK_RESTART_DELAY="))
        .unwrap()
        .parse()
        .unwrap();
    let compose: u64 = COMPOSE
        .split("${REDLOCK_RESTART_DELAY:-")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .unwrap()
        .parse()
        .unwrap();
    // Both delay every start by the variable they set.
    assert!(UNIT.contains("\nExecStartPre=/bin/sleep ${REDLOCK_RESTART_DELAY}\n"));
    assert!(COMPOSE.contains("sleep \"$$REDLOCK_RESTART_DELAY\" &&"));
    // Longer than the TTL plus the drift allowance (1 % + 2 ms).
    let ttl = std::time::Duration::from_secs(default_ttl_secs());
    let longest = ttl + ttl / 100 + std::time::Duration::from_millis(2);
    for (file, delay) in [("unit", unit), ("compose", compose)] {
        assert!(
            std::time::Duration::from_secs(delay) > longest,
            "{file}: {delay} s"
        );
    }
    // Each runs the shipped redis.conf.
    assert!(UNIT.contains("ExecStart=/usr/bin/redis-server /etc/redlock/redis.conf "));
    assert_eq!(
        COMPOSE
            .matches("- ./redis.conf:/usr/local/etc/redis/redis.conf:ro")
            .count(),
        5
    );
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    let dir = tempfile::tempdir().unwrap();
    // An instance of the template, as `systemctl enable` would name it.
    let unit = dir.path().join("redlock-master@6379.service");
    std::fs::write(&unit, UNIT).unwrap();
    let mut verify = std::process::Command::new("systemd-analyze");
    verify.arg("verify").arg(&unit);
    let child = verify
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("systemd-analyze (from systemd) is needed here: {e}"));
    let out = crate::wait_output(child, crate::HANG);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}
