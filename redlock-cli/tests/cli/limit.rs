//! `redlock run --limit K` on real masters: at most K commands at once and
//! at least two together (not a mutex), conflicts, keep-alive, a lost
//! permit, signals, fencing, and `status --limit` next to the holders.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redlock_tests::harness::{wait_until, RedisCluster, ServerOptions};

use crate::{finish, get, key, run_sh, signal, spawn, wait_for_file, wait_output, HANG};

const CONFLICT: i32 = 75;

/// The marker files in `dir`: one per command inside.
fn markers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
        .collect()
}

/// `redlock status --limit K KEY`.
fn status(urls: &[String], k: &str, name: &str) -> crate::Finished {
    let mut status = crate::redlock();
    status.arg("status");
    for url in urls {
        status.args(["--server", url]);
    }
    status.args(["--limit", k, name]);
    finish(status)
}

#[test]
fn a_limit_of_two_runs_two_commands_together_never_three() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("inside");
    std::fs::create_dir(&inside).unwrap();
    let counts = dir.path().join("counts");
    let go = dir.path().join("go");
    let name = key("limit");
    // Each command leaves a marker (its permit and token) while it runs,
    // and writes how many markers it sees on entering and before leaving;
    // it stays until `go` exists (its loop ends by itself after a minute).
    let script = format!(
        "echo \"$REDLOCK_PERMIT $REDLOCK_FENCING_TOKEN\" > {inside}/$$; ls {inside} | wc -l >> {counts}; \
         i=0; while [ ! -e {go} ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done; \
         ls {inside} | wc -l >> {counts}; rm {inside}/$$",
        inside = inside.display(),
        counts = counts.display(),
        go = go.display()
    );
    let options = ["--limit", "2", "--fencing", "-v"];
    let runs: Vec<Child> = (0..3)
        .map(|_| spawn(run_sh(&urls, &options, &name, &script)))
        .collect();
    // Two inside at once: seen together by this test.
    let mut most = 0;
    // A marker exists before the shell's `echo` has written it: wait for
    // its whole line.
    wait_until(HANG, "two commands inside at once", || {
        let now = markers(&inside);
        most = most.max(now.len());
        now.len() >= 2 && now.iter().all(|text| text.ends_with('\n'))
    })
    .unwrap();
    assert_eq!(most, 2, "more than two inside");
    let mut held: Vec<(u32, u64)> = markers(&inside)
        .iter()
        .map(|text| {
            let (permit, token) = text.trim().split_once(' ').unwrap();
            (permit.parse().unwrap(), token.parse().unwrap())
        })
        .collect();
    held.sort_unstable();
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!([held[0].0, held[1].0], [0, 1], "one command per permit");

    // While two hold: a --no-wait run gets the conflict code at once, a
    // custom one, and a bounded wait that runs out.
    let started = Instant::now();
    let loser = finish(run_sh(
        &urls,
        &["--limit", "2", "--no-wait"],
        &name,
        "exit 0",
    ));
    assert_eq!(loser.code(), Some(CONFLICT), "{loser:?}");
    assert!(
        loser.stderr.contains("all 2 permits held by other holders"),
        "{loser:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "not at once");
    let custom = finish(run_sh(
        &urls,
        &["--limit", "2", "--no-wait", "--conflict-exit-code", "9"],
        &name,
        "exit 0",
    ));
    assert_eq!(custom.code(), Some(9), "{custom:?}");
    let waited = finish(run_sh(
        &urls,
        &["--limit", "2", "--wait", "300ms"],
        &name,
        "exit 0",
    ));
    assert_eq!(waited.code(), Some(CONFLICT), "{waited:?}");

    // `status --limit 2`: both permits held on a quorum (a racing round may
    // have won a permit on two of the three servers only), with the first
    // bytes of each permit key's token.
    let out = status(&urls, "2", &name);
    assert_eq!(out.code(), Some(0), "{out:?}");
    for slot in 0..2 {
        let permit_key = format!("{name}{}{slot}", redlock_redis::keys::PERMIT_INFIX);
        // The holder's token: the one on a majority.
        let tokens: Vec<Vec<u8>> = cluster
            .iter()
            .filter_map(|node| get(node, &permit_key))
            .collect();
        let holder = tokens
            .iter()
            .find(|t| tokens.iter().filter(|o| o == t).count() >= 2)
            .unwrap_or_else(|| panic!("{permit_key}: no token on a majority"));
        let on = tokens.iter().filter(|t| *t == holder).count();
        let full: String = holder.iter().map(|b| format!("{b:02x}")).collect();
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("permit {slot} ({})", permit_key.escape_debug())))
            .unwrap_or_else(|| panic!("no line for permit {slot}: {}", out.stdout));
        assert!(line.contains(&format!("held on {on} of 3")), "{line}");
        assert!(line.contains(&full[..6]), "{line}");
        assert!(
            !line.contains(&full[..8]),
            "more than the first bytes: {line}"
        );
    }
    assert!(
        out.stdout.contains("2 of 2 permit(s) held on a quorum"),
        "{}",
        out.stdout
    );

    std::fs::write(&go, "").unwrap();
    for run in runs {
        let out = wait_output(run, HANG);
        assert_eq!(out.code(), Some(0), "{out:?}");
        assert!(
            out.stderr.contains("waiting for one of 2 permits"),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("acquired permit "), "{}", out.stderr);
        assert!(out.stderr.contains("released permit "), "{}", out.stderr);
    }
    // What every command saw, entering and leaving: never three.
    let text = std::fs::read_to_string(&counts).unwrap();
    let seen: Vec<usize> = text.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(seen.len(), 6, "{text}");
    assert!(seen.iter().all(|&n| (1..=2).contains(&n)), "{seen:?}");
    // All released: status shows both free.
    let out = status(&urls, "2", &name);
    assert!(
        out.stdout.contains("0 of 2 permit(s) held on a quorum"),
        "{}",
        out.stdout
    );
}

/// A command that touches `started`, passes SIGTERM on as exit code 3
/// (writing `got`), and otherwise runs until `go` exists.
fn holder_script(dir: &Path) -> String {
    format!(
        "trap 'echo got > {got}; exit 3' TERM; touch {started}; i=0; while [ ! -e {go} ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done",
        got = dir.join("got").display(),
        started = dir.join("started").display(),
        go = dir.join("go").display()
    )
}

#[test]
fn permits_are_kept_alive_over_four_ttls_and_sigterm_frees_one() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let name = key("limit-keep");
    let ttl = Duration::from_millis(500);
    let options = ["--limit", "2", "--ttl", "500ms", "-v"];
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let holders: Vec<Child> = dirs
        .iter()
        .map(|dir| spawn(run_sh(&urls, &options, &name, &holder_script(dir.path()))))
        .collect();
    for dir in &dirs {
        wait_for_file(&dir.path().join("started"));
    }
    let started = Instant::now();
    let mut refused = 0;
    while started.elapsed() < ttl * 4 {
        let third = finish(run_sh(
            &urls,
            &["--limit", "2", "--no-wait"],
            &name,
            "exit 0",
        ));
        assert_eq!(
            third.code(),
            Some(CONFLICT),
            "acquired after {:?}: {third:?}",
            started.elapsed()
        );
        refused += 1;
    }
    assert!(refused > 0);
    let mut holders = holders.into_iter();
    let (first, second) = (holders.next().unwrap(), holders.next().unwrap());
    // SIGTERM reaches the first one's command, which exits 3; its permit
    // is released, so one try gets it.
    signal(&first, Signal::SIGTERM);
    let out = wait_output(first, HANG);
    assert_eq!(out.code(), Some(3), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(dirs[0].path().join("got"))
            .unwrap()
            .trim(),
        "got"
    );
    assert!(out.stderr.contains("extended"), "{}", out.stderr);
    assert!(out.stderr.contains("released permit "), "{}", out.stderr);
    let next = finish(run_sh(
        &urls,
        &["--limit", "2", "--no-wait"],
        &name,
        "exit 0",
    ));
    assert_eq!(next.code(), Some(0), "{next:?}");
    std::fs::write(dirs[1].path().join("go"), "").unwrap();
    let out = wait_output(second, HANG);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert!(out.stderr.contains("extended"), "{}", out.stderr);
}

#[test]
fn freezing_three_of_five_masters_stops_a_permit_holders_child_within_the_validity() {
    crate::freezing_three_of_five_masters_stops_the_child(
        &["--limit", "3"],
        &key("limit-lost"),
        "lost permit ",
    );
}

#[test]
fn sigint_or_sigterm_while_waiting_for_a_permit_exits_promptly_and_leaves_no_key() {
    let name = key("limit-int");
    let permit = format!("{name}{}0", redlock_redis::keys::PERMIT_INFIX);
    crate::signals_while_waiting(
        &["--limit", "1"],
        &name,
        holder_script,
        &permit,
        &[Signal::SIGINT, Signal::SIGTERM],
    );
}

/// What one server has counted, read over `admin` in one command (so one
/// read on the server).
#[derive(Debug, Clone, Copy)]
struct Counts {
    clients: u64,
    connections: u64,
    reads: u64,
    evals: u64,
    pttls: u64,
}

fn counts(admin: &mut redis::Connection) -> Counts {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .arg("stats")
        .arg("commandstats")
        .query(admin)
        .unwrap();
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map_or(0, |value| {
                // `cmdstat_eval:calls=N,usec=...`, or a plain number.
                let value = value.strip_prefix("calls=").unwrap_or(value);
                value.split(',').next().unwrap().trim().parse().unwrap()
            })
    };
    Counts {
        clients: field("connected_clients"),
        connections: field("total_connections_received"),
        reads: field("total_reads_processed"),
        evals: field("cmdstat_eval"),
        pttls: field("cmdstat_pttl"),
    }
}

#[test]
fn status_with_a_limit_costs_one_round_trip_per_server_whatever_k() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let name = key("limit-reads");
    let mut admins: Vec<redis::Connection> = cluster.iter().map(|n| n.client().unwrap()).collect();
    // Per K, per server: the reads the server did for `status`.
    let mut reads = Vec::new();
    for k in [1, 64] {
        let before: Vec<Counts> = admins.iter_mut().map(counts).collect();
        let out = status(&urls, &k.to_string(), &name);
        assert_eq!(out.code(), Some(0), "{out:?}");
        let mut per_server = Vec::new();
        for (admin, before) in admins.iter_mut().zip(&before) {
            // Until the server has seen `status` close its connection
            // (each look is one read of our own).
            let mut looks = 0;
            let mut after = before.to_owned();
            wait_until(HANG, "status's connection to close", || {
                looks += 1;
                after = counts(admin);
                after.clients == before.clients
            })
            .unwrap();
            assert_eq!(after.connections - before.connections, 1, "K={k}");
            assert_eq!(
                after.evals - before.evals,
                k,
                "K={k}: an inspection per permit"
            );
            assert_eq!(after.pttls - before.pttls, k, "K={k}: a PTTL per permit");
            per_server.push(after.reads - before.reads - looks);
        }
        reads.push(per_server);
    }
    // The handshake, the keys' one pipeline, the close: as many reads for
    // 64 permits as for one.
    assert_eq!(reads[0], reads[1], "reads per server for K=1, K=64");
}
