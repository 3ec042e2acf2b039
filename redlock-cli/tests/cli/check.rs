//! `redlock check` on healthy and broken deployments, and what an
//! unreachable or aliased deployment does to `run`.

use redlock_tests::harness::{free_port, RedisCluster, ServerOptions};

use crate::{finish, key, redlock, run_sh};

pub(crate) fn check(urls: &[String]) -> crate::Finished {
    let mut command = redlock();
    command.arg("check");
    for url in urls {
        command.args(["--server", url]);
    }
    finish(command)
}

#[test]
fn a_healthy_five_server_deployment_passes() {
    let cluster = RedisCluster::start(5, &ServerOptions::new()).unwrap();
    let out = check(&cluster.urls());
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(
        out.stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        5,
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("fit: 5"), "{}", out.stdout);
    // The same from REDLOCK_SERVERS.
    let mut command = redlock();
    command
        .arg("check")
        .env("REDLOCK_SERVERS", cluster.urls().join(","));
    assert_eq!(finish(command).code(), Some(0));
}

#[test]
fn a_replica_an_evicting_server_and_an_alias_each_fail_naming_the_server() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let port = |i: usize| cluster.node(i).port();

    let replica = ServerOptions::new()
        .config("replicaof", format!("127.0.0.1 {}", port(0)))
        .start()
        .unwrap();
    let out = check(&[urls[0].clone(), urls[1].clone(), replica.url()]);
    assert_eq!(out.code(), Some(1), "{out:?}");
    let named = format!("127.0.0.1:{}/0", replica.port());
    assert!(out.says(&["error", &named, "replica"]), "{}", out.stdout);

    let evicting = ServerOptions::new()
        .config("maxmemory-policy", "allkeys-lru")
        .start()
        .unwrap();
    let out = check(&[urls[0].clone(), urls[1].clone(), evicting.url()]);
    assert_eq!(out.code(), Some(1), "{out:?}");
    let named = format!("127.0.0.1:{}/0", evicting.port());
    assert!(
        out.says(&["error", &named, "allkeys-lru"]),
        "{}",
        out.stdout
    );

    let alias = format!("redis://localhost:{}", port(0));
    let out = check(&[urls[0].clone(), urls[1].clone(), alias.clone()]);
    assert_eq!(out.code(), Some(1), "{out:?}");
    let named = format!("localhost:{}/0", port(0));
    assert!(out.says(&["same server", &named]), "{}", out.stdout);
    // `run` refuses the alias before locking: a usage error naming both.
    let run = finish(run_sh(
        &[urls[0].clone(), urls[1].clone(), alias],
        &[],
        &key("alias"),
        "exit 0",
    ));
    assert_eq!(run.code(), Some(64), "{run:?}");
    assert!(
        run.stderr.contains(&named) && run.stderr.contains(&format!("127.0.0.1:{}/0", port(0))),
        "{run:?}"
    );
}

#[test]
fn unreachable_servers_are_ex_unavailable() {
    let urls: Vec<String> = (0..3)
        .map(|_| format!("redis://127.0.0.1:{}", free_port().unwrap()))
        .collect();
    let out = check(&urls);
    assert_eq!(out.code(), Some(69), "{out:?}");
    assert!(out.stdout.contains("unreachable"), "{}", out.stdout);
    let run = finish(run_sh(&urls, &["--no-wait"], &key("down"), "exit 0"));
    assert_eq!(run.code(), Some(69), "{run:?}");
    assert!(run.stderr.contains("no quorum"), "{run:?}");
    // A bounded wait that runs out while no quorum answers (having
    // waited, shorter than --no-quorum-timeout) is unavailable too.
    let started = std::time::Instant::now();
    let waited = finish(run_sh(&urls, &["--wait", "300ms"], &key("down"), "exit 0"));
    assert_eq!(waited.code(), Some(69), "{waited:?}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    let mut status = redlock();
    status.arg("status");
    for url in &urls {
        status.args(["--server", url]);
    }
    status.arg("k");
    let status = finish(status);
    assert_eq!(status.code(), Some(69), "{status:?}");
    // A semaphore's permits are not called free when nobody answered.
    let mut permits = redlock();
    permits.arg("status");
    for url in &urls {
        permits.args(["--server", url]);
    }
    permits.args(["--limit", "3", "k"]);
    let permits = finish(permits);
    assert_eq!(permits.code(), Some(69), "{permits:?}");
    assert_eq!(
        permits
            .stdout
            .matches("free on the 0 of 3 server(s) that answered")
            .count(),
        3,
        "{}",
        permits.stdout
    );
}
