//! `redlock run` on real masters: mutual exclusion, conflicts, keep-alive,
//! a lost lock, signals, fencing, and `status` next to a holder.

use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redlock_tests::harness::{free_port, wait_until, RedisCluster, ServerOptions};

use crate::{
    exit_within, finish, get, gone, ignoring, key, line_with, read_pid, reader, run_sh, signal,
    spawn, wait_for_file, wait_output, Guarded, Leftover, HANG, LOST,
};

const CONFLICT: i32 = 75;
const UNAVAILABLE: i32 = 69;

/// A child that says it started (touches `started`) and runs until `go`
/// exists. Its loops here end by themselves after about a minute, so a
/// failed test leaves nothing running for long.
fn until_go(dir: &std::path::Path) -> String {
    format!(
        "touch {started}; i=0; while [ ! -e {go} ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done",
        started = dir.join("started").display(),
        go = dir.join("go").display()
    )
}

#[test]
fn two_runs_never_interleave_and_a_no_wait_loser_gets_the_conflict_code() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let name = key("exclusive");
    let script = format!(
        "echo start $$ >> {log}; sleep 0.3; echo end $$ >> {log}",
        log = log.display()
    );
    let runs: Vec<Child> = (0..2)
        .map(|_| spawn(run_sh(&urls, &["--ttl", "5s"], &name, &script)))
        .collect();
    for run in runs {
        let out = wait_output(run, HANG);
        assert_eq!(out.code(), Some(0), "{out:?}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for pair in lines.chunks(2) {
        let start = pair[0].strip_prefix("start ").unwrap();
        let end = pair[1].strip_prefix("end ").unwrap();
        assert_eq!(start, end, "interleaved: {text}");
    }

    // A holder, then a --no-wait loser: the conflict code at once.
    let holder = spawn(run_sh(&urls, &[], &name, &until_go(dir.path())));
    wait_for_file(&dir.path().join("started"));
    // The holder's acquire returns at a quorum: let it land on the third
    // server too before the losers' rounds (which could otherwise win that
    // server first) and `status` look at every server.
    wait_until(
        Duration::from_secs(10),
        "the holder's key on every server",
        || cluster.iter().all(|node| get(node, &name).is_some()),
    )
    .unwrap();
    let started = Instant::now();
    let loser = finish(run_sh(&urls, &["--no-wait"], &name, "exit 0"));
    assert_eq!(loser.code(), Some(CONFLICT), "{loser:?}");
    assert!(loser.stderr.contains("held by another holder"), "{loser:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "not at once");
    let custom = finish(run_sh(
        &urls,
        &["--no-wait", "--conflict-exit-code", "9"],
        &name,
        "exit 0",
    ));
    assert_eq!(custom.code(), Some(9), "{custom:?}");
    // A bounded wait that runs out (having waited) is a conflict too.
    let started = Instant::now();
    let waited = finish(run_sh(&urls, &["--wait", "300ms"], &name, "exit 0"));
    assert_eq!(waited.code(), Some(CONFLICT), "{waited:?}");
    assert!(started.elapsed() >= Duration::from_millis(300));

    // `status` next to the holder: held everywhere, a short token prefix.
    let mut status = crate::redlock();
    status.arg("status");
    for url in &urls {
        status.args(["--server", url]);
    }
    status.arg(&name);
    let out = finish(status);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(out.stdout.matches(": held, ").count(), 3, "{}", out.stdout);
    let token = get(cluster.node(0), &name).unwrap();
    let full: String = token.iter().map(|b| format!("{b:02x}")).collect();
    assert!(out.stdout.contains(&full[..6]), "{}", out.stdout);
    assert!(
        !out.stdout.contains(&full[..8]),
        "more than the first bytes: {}",
        out.stdout
    );
    assert!(out.stdout.contains("held on 3 of 3"), "{}", out.stdout);

    std::fs::write(dir.path().join("go"), "").unwrap();
    let out = wait_output(holder, HANG);
    assert_eq!(out.code(), Some(0), "{out:?}");
}

#[test]
fn a_child_running_four_ttls_keeps_the_lock_and_the_next_acquires_at_once() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let name = key("keep");
    let ttl = Duration::from_millis(500);
    let holder = spawn(run_sh(
        &urls,
        &["--ttl", "500ms", "-v"],
        &name,
        &until_go(dir.path()),
    ));
    wait_for_file(&dir.path().join("started"));
    let started = Instant::now();
    let mut refused = 0;
    while started.elapsed() < ttl * 4 {
        let third = finish(run_sh(&urls, &["--no-wait"], &name, "exit 0"));
        assert_eq!(
            third.code(),
            Some(CONFLICT),
            "acquired after {:?}: {third:?}",
            started.elapsed()
        );
        refused += 1;
    }
    assert!(refused > 0);
    std::fs::write(dir.path().join("go"), "").unwrap();
    let out = wait_output(holder, HANG);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert!(
        out.stderr.contains("waiting on 3 servers (quorum 2)"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("acquired after"), "{}", out.stderr);
    assert!(out.stderr.contains("extended"), "{}", out.stderr);
    assert!(out.stderr.contains("released"), "{}", out.stderr);
    // Released on exit: one round gets it.
    let next = finish(run_sh(&urls, &["--no-wait"], &name, "exit 0"));
    assert_eq!(next.code(), Some(0), "{next:?}");
}

#[test]
fn freezing_three_of_five_masters_stops_the_child_within_the_validity() {
    crate::freezing_three_of_five_masters_stops_the_child(&[], &key("lost"), "lost the lock");
}

#[test]
fn signals_to_redlock_reach_the_commands_group_and_the_lock_is_released() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let name = key("term");
    for sent in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        let dir = tempfile::tempdir().unwrap();
        // With SIGTERM and SIGHUP the command leaves a child too, which
        // the signal must reach as well (a shell's background child
        // ignores SIGINT and SIGQUIT).
        let with_child = matches!(sent, Signal::SIGTERM | Signal::SIGHUP);
        let script = format!(
            "trap 'echo got > {got}; exit 3' TERM INT HUP QUIT; {child}touch {started}; \
             i=0; while [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done",
            got = dir.path().join("got").display(),
            child = if with_child {
                format!(
                    "sleep 600 & echo $! > {}; ",
                    dir.path().join("child").display()
                )
            } else {
                String::new()
            },
            started = dir.path().join("started").display()
        );
        let holder = spawn(run_sh(&urls, &[], &name, &script));
        wait_for_file(&dir.path().join("started"));
        let child = with_child.then(|| read_pid(&dir.path().join("child")));
        let _leftover = child.map(|pid| Leftover::new(pid, "sleep"));
        signal(&holder, sent);
        let out = wait_output(holder, HANG);
        assert_eq!(out.code(), Some(3), "{sent}: the command's code: {out:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("got"))
                .unwrap()
                .trim(),
            "got"
        );
        if let Some(child) = child {
            wait_until(HANG, "the command's child to end", || gone(child))
                .unwrap_or_else(|e| panic!("{sent}: {e}"));
        }
        // Released: one round (one round trip) acquires.
        let next = finish(run_sh(&urls, &["--no-wait"], &name, "exit 0"));
        assert_eq!(next.code(), Some(0), "{sent}: {next:?}");
    }
}

#[test]
fn killing_redlock_stops_the_command_and_its_children() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let name = key("killed");
    // Both ignore SIGTERM: only SIGKILL, after the grace, stops them.
    let script = format!(
        "trap '' TERM; echo $$ > {pid}; sleep 600 & echo $! > {child}; touch {started}; wait",
        pid = dir.path().join("pid").display(),
        child = dir.path().join("child").display(),
        started = dir.path().join("started").display()
    );
    // The guardian's grace is --kill-grace cut to a tenth of the TTL:
    // half a second here, not an hour.
    let holder = spawn(run_sh(
        &urls,
        &["--ttl", "5s", "--kill-grace", "1h"],
        &name,
        &script,
    ));
    wait_for_file(&dir.path().join("started"));
    let pid = read_pid(&dir.path().join("pid"));
    let child = read_pid(&dir.path().join("child"));
    let _leftovers = (Leftover::new(pid, "sh"), Leftover::new(child, "sleep"));
    signal(&holder, Signal::SIGKILL);
    let out = wait_output(holder, HANG);
    assert_eq!(out.status.signal(), Some(9), "{out:?}");
    // Stopped about half a second after; a hang bound only.
    wait_until(HANG, "the command and its child to end", || {
        gone(pid) && gone(child)
    })
    .unwrap();
}

#[test]
fn signals_ignored_at_start_stay_ignored_for_the_command() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let name = key("nohup");
    let ignored = dir.path().join("ignored");
    let started = dir.path().join("started");
    // The command signals itself: it survives only if it ignores both.
    let script = format!(
        "kill -HUP $$; kill -INT $$; grep SigIgn /proc/$$/status > {ignored}; touch {started}; {}",
        until_go(dir.path()),
        ignored = ignored.display(),
        started = started.display()
    );
    // As under nohup (SIGHUP) and in a script's background job (SIGINT).
    let mut holder = spawn(ignoring("HUP INT", &run_sh(&urls, &[], &name, &script)));
    let deadline = Instant::now() + HANG;
    while !started.exists() {
        if holder.try_wait().unwrap().is_some() || Instant::now() >= deadline {
            panic!(
                "the command did not get that far: {:?}",
                wait_output(holder, HANG)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // SigIgn masks: bit 0 is SIGHUP, bit 1 SIGINT.
    let both = 0b11;
    let mask = |status: &str| {
        let hex = status
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .unwrap()
            .trim();
        u64::from_str_radix(hex, 16).unwrap()
    };
    let command = mask(&std::fs::read_to_string(&ignored).unwrap());
    assert_eq!(command & both, both, "the command: {command:x}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", holder.id())).unwrap();
    assert_eq!(mask(&status) & both, both, "redlock: {status}");
    // So these do nothing to redlock, nor to the command.
    signal(&holder, Signal::SIGHUP);
    signal(&holder, Signal::SIGINT);
    std::fs::write(dir.path().join("go"), "").unwrap();
    let out = wait_output(holder, HANG);
    assert_eq!(out.code(), Some(0), "{out:?}");
}

#[test]
fn a_command_reads_from_the_terminal_redlock_runs_in() {
    // util-linux `script` runs redlock on a pseudo-terminal, with
    // redlock's process group in its foreground, as a shell would.
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let got = dir.path().join("got");
    let redlock = run_sh(
        &urls,
        &[],
        &key("tty"),
        &format!("read line; echo \"got $line\" > {}", got.display()),
    );
    let mut script = std::process::Command::new("script");
    script
        .args(["-q", "-e", "-c", &shell_line(&redlock), "/dev/null"])
        .env_remove("REDLOCK_SERVERS")
        .stdin(Stdio::piped());
    let mut child = spawn(script);
    // Typed on the terminal: read by the command once it is in the
    // terminal's foreground (a background group reading it is stopped).
    child.stdin.as_mut().unwrap().write_all(b"hello\n").unwrap();
    let out = wait_output(child, HANG);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read_to_string(&got).unwrap().trim(), "got hello");
}

#[test]
fn ctrl_z_or_reading_the_terminal_in_the_background_stops_redlock_too_and_fg_continues() {
    // An interactive shell with job control on a pseudo-terminal (util-
    // linux `script`), typed to as a user would.
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let mut script = std::process::Command::new("script");
    script
        .args(["-q", "-f", "-c", "bash --norc --noprofile -i", "/dev/null"])
        .env_remove("REDLOCK_SERVERS")
        .stdin(Stdio::piped());
    let mut shell = Guarded(spawn(script));
    let _output = (
        reader(shell.0.stdout.take().unwrap()),
        reader(shell.0.stderr.take().unwrap()),
    );
    let mut terminal = shell.0.stdin.take().unwrap();
    let mut typed = |text: &str| terminal.write_all(text.as_bytes()).unwrap();
    // Ctrl-Z once the command runs; in the background (`&`): the command
    // reads the terminal at once.
    for (name, background) in [("ctrl-z", false), ("background", true)] {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| dir.path().join(name);
        let redlock = run_sh(
            &urls,
            &[],
            &key(name),
            &format!(
                "echo $PPID > {pid}; touch {started}; read line; echo \"got $line\" > {got}",
                pid = file("redlock").display(),
                started = file("started").display(),
                got = file("got").display()
            ),
        );
        let ampersand = if background { " &" } else { "" };
        typed(&format!("{}{ampersand}\n", shell_line(&redlock)));
        wait_for_file(&file("started"));
        let redlock = read_pid(&file("redlock"));
        let stopped = || matches!(crate::state(redlock), Some('T' | 't'));
        if !background {
            typed("\x1a");
        }
        // The command is stopped, and then redlock (the shell's job).
        wait_until(HANG, "redlock to be stopped", stopped)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // fg: both go on, and the command has the terminal. Only once the
        // shell has seen the job stop: bash's `fg` sends no SIGCONT to a
        // job it still counts as running (a background job's stop is seen
        // when bash gets to its SIGCHLD, which a busy machine delays).
        typed("until [ -n \"$(jobs -sp)\" ]; do sleep 0.01; done; fg\n");
        wait_until(HANG, "redlock to go on", || !stopped()).unwrap();
        typed("hello\n");
        wait_until(HANG, "the command's line", || {
            std::fs::read_to_string(file("got")).is_ok_and(|got| got.ends_with('\n'))
        })
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            std::fs::read_to_string(file("got")).unwrap().trim(),
            "got hello",
            "{name}"
        );
        wait_until(HANG, "redlock to exit", || gone(redlock)).unwrap();
    }
    typed("exit\n");
    exit_within(&mut shell.0, HANG);
}

/// `command` as one line for `sh -c`, each word single-quoted.
fn shell_line(command: &std::process::Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|word| format!("'{}'", word.to_str().unwrap().replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_hold_bound_ends_the_lock_and_stops_the_child() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let name = key("max-hold");
    // The command leaves a child, which is stopped with it.
    let child = dir.path().join("child");
    let holder = spawn(run_sh(
        &urls,
        &["--ttl", "2s", "--max-hold", "4s"],
        &name,
        &format!(
            "sleep 600 & echo $! > {}; {}",
            child.display(),
            until_go(dir.path())
        ),
    ));
    wait_for_file(&dir.path().join("started"));
    let child = read_pid(&child);
    let _leftover = Leftover::new(child, "sleep");
    let out = wait_output(holder, HANG);
    assert_eq!(out.code(), Some(LOST), "{out:?}");
    assert!(
        out.stderr.contains("bound on total hold time"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("SIGTERM"), "{}", out.stderr);
    assert!(gone(child), "the command's child runs on: {out:?}");
}

#[test]
fn signals_while_waiting_exit_promptly_with_128_plus_n_and_leave_no_key() {
    let name = key("int");
    crate::signals_while_waiting(
        &[],
        &name,
        until_go,
        &name,
        &[
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ],
    );
}

#[test]
fn waiting_while_no_quorum_answers_is_said_and_ends_in_ex_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let never = dir.path().join("never");
    let touch = format!("touch {}", never.display());
    let name = key("no-quorum");
    // Nothing listens on these ports (free a moment ago).
    let dead: Vec<String> = (0..3)
        .map(|_| format!("redis://127.0.0.1:{}", free_port().unwrap()))
        .collect();

    // By default, said on stderr at once (no -v), and waiting on.
    let mut waiter = Guarded(spawn(run_sh(&dead, &[], &name, &touch)));
    let lines = reader(waiter.0.stderr.take().unwrap());
    let said = line_with(&lines, "no quorum of servers answers");
    assert!(said.contains("--no-quorum-timeout"), "{said}");
    assert!(said.contains("127.0.0.1:"), "names the servers: {said}");
    assert!(waiter.0.try_wait().unwrap().is_none(), "gave up at once");
    signal(&waiter.0, Signal::SIGTERM);
    let status = exit_within(&mut waiter.0, Duration::from_secs(5));
    assert_eq!(status.code(), Some(143));

    // Given up once no quorum answered for the bound (and not before).
    let started = Instant::now();
    let out = finish(run_sh(&dead, &["--no-quorum-timeout", "1s"], &name, &touch));
    assert_eq!(out.code(), Some(UNAVAILABLE), "{out:?}");
    assert!(started.elapsed() >= Duration::from_secs(1), "{out:?}");
    assert!(
        out.stderr.contains("no quorum of servers answered for"),
        "{out:?}"
    );

    // Masters that all die while it waits behind a holder: said, then
    // given up.
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let holder = spawn(run_sh(&urls, &[], &name, &until_go(dir.path())));
    wait_for_file(&dir.path().join("started"));
    // Two of the three frozen for a while: said at once, again after 10 s,
    // and when they answer again.
    let mut waiter = Guarded(spawn(run_sh(&urls, &["-v"], &name, &touch)));
    let lines = reader(waiter.0.stderr.take().unwrap());
    line_with(&lines, "still waiting");
    for node in cluster.iter().take(2) {
        node.pause().unwrap();
    }
    line_with(&lines, "no quorum of servers answers");
    let again = line_with(&lines, "still no quorum after 10s");
    assert!(again.contains("last round"), "{again}");
    for node in cluster.iter().take(2) {
        node.resume().unwrap();
    }
    line_with(&lines, "a quorum of servers answers again");
    signal(&waiter.0, Signal::SIGTERM);
    assert_eq!(exit_within(&mut waiter.0, HANG).code(), Some(143));
    // All three killed: given up after the bound.
    let mut waiter = Guarded(spawn(run_sh(
        &urls,
        &["-v", "--no-quorum-timeout", "2s"],
        &name,
        &touch,
    )));
    let lines = reader(waiter.0.stderr.take().unwrap());
    line_with(&lines, "still waiting");
    for node in cluster.iter() {
        node.kill().unwrap();
    }
    line_with(&lines, "no quorum of servers answers");
    let status = exit_within(&mut waiter.0, HANG);
    assert_eq!(status.code(), Some(UNAVAILABLE));
    assert!(!never.exists(), "a command ran");
    // The holder's command ends; its release fails (no servers).
    std::fs::write(dir.path().join("go"), "").unwrap();
    let out = wait_output(holder, HANG);
    assert_eq!(out.code(), Some(0), "{out:?}");
}

#[test]
fn fencing_tokens_seen_by_successive_children_rise() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tokens");
    let name = key("fence");
    let script = format!(
        "echo \"$REDLOCK_KEY $REDLOCK_FENCING_TOKEN\" >> {}",
        log.display()
    );
    for _ in 0..4 {
        let out = finish(run_sh(&urls, &["--fencing"], &name, &script));
        assert_eq!(out.code(), Some(0), "{out:?}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let tokens: Vec<u64> = text
        .lines()
        .map(|line| {
            let (key, token) = line.split_once(' ').unwrap();
            assert_eq!(key, name);
            token.parse().unwrap()
        })
        .collect();
    assert_eq!(tokens.len(), 4);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    // Without --fencing the child gets no token.
    let plain = dir.path().join("plain");
    let script = format!("echo \"[$REDLOCK_FENCING_TOKEN]\" > {}", plain.display());
    assert_eq!(finish(run_sh(&urls, &[], &name, &script)).code(), Some(0));
    assert_eq!(std::fs::read_to_string(plain).unwrap().trim(), "[]");
}

#[test]
fn the_childs_exit_code_and_a_missing_command() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let name = key("code");
    assert_eq!(
        finish(run_sh(&urls, &[], &name, "exit 42")).code(),
        Some(42)
    );
    // Ended by signal N: 128 + N.
    for (signal, code) in [
        ("KILL", 137),
        ("TERM", 143),
        ("USR1", 128 + Signal::SIGUSR1 as i32),
    ] {
        let out = finish(run_sh(&urls, &[], &name, &format!("kill -{signal} $$")));
        assert_eq!(out.code(), Some(code), "SIG{signal}: {out:?}");
    }
    let mut missing = crate::redlock();
    missing.arg("run");
    for url in &urls {
        missing.args(["--server", url]);
    }
    missing.args([name.as_str(), "--", "/nonexistent/command"]);
    let out = finish(missing);
    assert_eq!(out.code(), Some(127), "{out:?}");
    let mut not_runnable = crate::redlock();
    not_runnable.arg("run");
    for url in &urls {
        not_runnable.args(["--server", url]);
    }
    not_runnable.args([name.as_str(), "--", "/"]);
    let out = finish(not_runnable);
    assert_eq!(out.code(), Some(126), "{out:?}");
    // Released after that too.
    assert_eq!(
        finish(run_sh(&urls, &["--no-wait"], &name, "exit 0")).code(),
        Some(0)
    );
    // A command that exits leaving a process in the background: the lock
    // is released, the process neither waited for nor stopped.
    let dir = tempfile::tempdir().unwrap();
    let child = dir.path().join("child");
    let out = finish(run_sh(
        &urls,
        &[],
        &name,
        &format!(
            "sleep 600 </dev/null >/dev/null 2>&1 & echo $! > {}",
            child.display()
        ),
    ));
    assert_eq!(out.code(), Some(0), "{out:?}");
    let child = read_pid(&child);
    let _leftover = Leftover::new(child, "sleep");
    assert!(!gone(child), "the background process was stopped");
    assert_eq!(
        finish(run_sh(&urls, &["--no-wait"], &name, "exit 0")).code(),
        Some(0)
    );
}

/// `redlock run --identity` in one process, `redlock status` in another:
/// the status names the holder, per server and for the quorum; a run
/// without one shows none; a bad identity is a usage error.
#[test]
fn status_in_another_process_names_the_holder_of_run_identity() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let name = key("identity");
    let status = || {
        let mut status = crate::redlock();
        status.arg("status");
        for url in &urls {
            status.args(["--server", url]);
        }
        status.arg(&name);
        finish(status)
    };
    // A holder started with `options`, once its key is on every server.
    let hold = |options: &[&str]| {
        let _ = std::fs::remove_file(dir.path().join("started"));
        let _ = std::fs::remove_file(dir.path().join("go"));
        let holder = Guarded(spawn(run_sh(&urls, options, &name, &until_go(dir.path()))));
        wait_for_file(&dir.path().join("started"));
        wait_until(
            Duration::from_secs(10),
            "the holder's key on every server",
            || cluster.iter().all(|node| get(node, &name).is_some()),
        )
        .unwrap();
        holder
    };
    let mut holder = hold(&["--identity", "deploy-runner:4711", "--fencing"]);
    let out = status();
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(
        out.stdout.matches(", by deploy-runner:4711").count(),
        4,
        "three servers and the quorum: {}",
        out.stdout
    );
    assert!(
        out.says(&["held on 3 of 3", "by deploy-runner:4711", "fencing counter"]),
        "{}",
        out.stdout
    );
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(exit_within(&mut holder.0, HANG).code(), Some(0));

    // Without an identity: no name shown.
    let mut plain = hold(&[]);
    let out = status();
    assert!(out.says(&["held on 3 of 3"]), "{}", out.stdout);
    assert!(!out.stdout.contains(", by "), "{}", out.stdout);
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(exit_within(&mut plain.0, HANG).code(), Some(0));

    // A bad identity: a usage error naming the problem, nothing run.
    let long = "x".repeat(129);
    for bad in ["two\nlines", long.as_str(), ""] {
        let out = finish(run_sh(&urls, &["--identity", bad], &name, "exit 3"));
        assert_eq!(out.code(), Some(64), "{bad:?}: {out:?}");
        assert!(out.stderr.contains("identity"), "{out:?}");
        assert!(!out.stderr.contains("two\nlines"), "printed raw: {out:?}");
    }
}

#[test]
fn a_key_reaches_the_terminal_escaped() {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let name = format!("{}\u{1b}]0;title\u{7}\nredlock: forged", key("escaped"));
    let out = finish(run_sh(&cluster.urls(), &["--verbose"], &name, "exit 0"));
    assert_eq!(out.code(), Some(0), "{out:?}");
    // Said at least once (acquired, released), escaped every time.
    assert!(out.stderr.contains(&key("escaped")), "{out:?}");
    crate::usage::assert_escaped(&out.stderr, "redlock: forged");
}
