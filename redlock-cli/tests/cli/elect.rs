//! `redlock elect NAME -- COMMAND` on real masters: one command at a time
//! across processes, terms rising, `--again`, and `status` naming the
//! leader.

use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use redlock_tests::harness::{wait_until, RedisCluster, ServerOptions};

use crate::{exit_within, finish, key, redlock, signal, spawn, wait_output, Guarded, HANG};

/// `redlock elect --server ... OPTIONS NAME -- sh -c SCRIPT`.
fn elect_sh(urls: &[String], options: &[&str], name: &str, script: &str) -> Command {
    crate::sh_under("elect", urls, options, name, script)
}

#[test]
fn three_elect_processes_run_their_commands_one_at_a_time_with_rising_terms() {
    let cluster = RedisCluster::start(5, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let name = key("elect");
    let script = format!(
        "echo start $$ $REDLOCK_TERM >> {log}; sleep 0.3; echo end $$ $REDLOCK_TERM >> {log}",
        log = log.display()
    );
    let runs: Vec<_> = (0..3)
        .map(|i| {
            spawn(elect_sh(
                &urls,
                &["--ttl", "5s", "--identity", &format!("elector-{i}")],
                &name,
                &script,
            ))
        })
        .collect();
    for run in runs {
        let out = wait_output(run, HANG);
        assert_eq!(out.code(), Some(0), "{out:?}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 6, "{text}");
    let mut terms = Vec::new();
    for pair in lines.chunks(2) {
        assert_eq!(
            (pair[0][0], pair[1][0]),
            ("start", "end"),
            "interleaved: {text}"
        );
        assert_eq!(pair[0][1..], pair[1][1..], "interleaved: {text}");
        terms.push(pair[0][2].parse::<u64>().expect("a term"));
    }
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "terms: {text}");
}

#[test]
fn elect_again_campaigns_after_each_end_until_a_signal_and_status_names_the_leader() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let name = key("elect-again");
    // Each run logs its term and ends at once; the next leadership starts.
    let script = format!("echo $REDLOCK_TERM >> {}; sleep 0.2", log.display());
    let mut leader = Guarded(spawn(elect_sh(
        &urls,
        &["--again", "--identity", "again-1"],
        &name,
        &script,
    )));
    let runs = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| l.parse::<u64>().expect("a term"))
            .collect::<Vec<_>>()
    };
    wait_until(HANG, "three leaderships in a row", || runs().len() >= 3).unwrap();
    let terms = runs();
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "{terms:?}");
    // Another process sees who leads.
    let status = || {
        let mut status = redlock();
        status.arg("status");
        for url in &urls {
            status.args(["--server", url]);
        }
        status.arg(&name);
        finish(status)
    };
    wait_until(HANG, "status naming the leader", || {
        status().says(&["held on 3 of 3", "by again-1", "fencing counter"])
    })
    .unwrap();
    // A signal stops redlock for good: no campaign after it (its command
    // ended by it, 143, or it had just ended, 0).
    signal(&leader.0, Signal::SIGTERM);
    let code = exit_within(&mut leader.0, HANG).code();
    assert!(matches!(code, Some(0 | 143)), "{code:?}");
    let after = runs().len();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(runs().len(), after, "campaigned after the signal");
}

#[test]
fn elect_gives_up_after_wait_with_the_conflict_code() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let name = key("elect-wait");
    let started = dir.path().join("started");
    let go = dir.path().join("go");
    let holder = format!(
        "touch {started}; i=0; while [ ! -e {go} ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done",
        started = started.display(),
        go = go.display()
    );
    let mut leader = Guarded(spawn(elect_sh(&urls, &[], &name, &holder)));
    crate::wait_for_file(&started);
    let out = finish(elect_sh(&urls, &["--wait", "300ms"], &name, "exit 0"));
    assert_eq!(out.code(), Some(75), "{out:?}");
    std::fs::write(&go, "").unwrap();
    assert_eq!(exit_within(&mut leader.0, HANG).code(), Some(0));
}
