//! The `redlock` binary against real `redis-server` processes from the
//! harness. Every wait polls with a generous bound (a hang bound, 10x and
//! more what is expected); only processes these tests started are
//! signalled.

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod check;
mod deploy;
mod elect;
mod limit;
mod run;
mod tool;
mod usage;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redlock_tests::harness::{wait_until, RedisCluster, ServerOptions};

/// `redlock run`'s exit code when the lock (or permit) was lost.
pub(crate) const LOST: i32 = 79;

/// The longest any one `redlock` process in these tests may take.
pub(crate) const HANG: Duration = Duration::from_secs(60);

/// How [`redlock`] starts the binary: with the signals it handles at their
/// default disposition, whatever this test process inherited. A runner
/// that starts the suite as a background job of a script ignores SIGINT
/// and SIGQUIT, and redlock keeps ignored signals ignored
/// (`signals_ignored_at_start_stay_ignored_for_the_command`), so the tests
/// that send them would wait for nothing.
const DEFAULT_SIGNALS: &str = "--default-signal=HUP,INT,QUIT,TERM";

/// `redlock` with no servers from the environment (through `env
/// --default-signal`, which execs it: the child's pid is redlock's).
pub(crate) fn redlock() -> Command {
    let mut command = Command::new("env");
    command
        .arg(DEFAULT_SIGNALS)
        .arg(env!("CARGO_BIN_EXE_redlock"))
        .env_remove("REDLOCK_SERVERS");
    command
}

/// `redlock run --server ...` with `options`, then `KEY -- sh -c SCRIPT`.
pub(crate) fn run_sh(urls: &[String], options: &[&str], key: &str, script: &str) -> Command {
    sh_under("run", urls, options, key, script)
}

/// `redlock SUBCOMMAND --server ...` with `options`, then `KEY -- sh -c
/// SCRIPT` (`run` or `elect`).
pub(crate) fn sh_under(
    subcommand: &str,
    urls: &[String],
    options: &[&str],
    key: &str,
    script: &str,
) -> Command {
    let mut command = redlock();
    command.arg(subcommand);
    for url in urls {
        command.args(["--server", url]);
    }
    command.args(options).args([key, "--", "sh", "-c", script]);
    command
}

/// `command` started with `signals` (as for `trap`, e.g. `"HUP INT"`)
/// ignored, as `nohup` or a shell's background job starts it.
pub(crate) fn ignoring(signals: &str, command: &Command) -> Command {
    let mut wrapper = Command::new("sh");
    wrapper
        .args(["-c", &format!("trap '' {signals}; exec \"$@\""), "sh"])
        .arg(command.get_program())
        // Without resetting them again.
        .args(command.get_args().filter(|a| *a != DEFAULT_SIGNALS))
        .env_remove("REDLOCK_SERVERS");
    wrapper
}

/// What a finished `redlock` said.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Finished {
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Whether one line of stdout contains every one of `words`.
    pub(crate) fn says(&self, words: &[&str]) -> bool {
        self.stdout
            .lines()
            .any(|line| words.iter().all(|w| line.contains(w)))
    }
}

/// Runs `command` to its end (killed after [`HANG`]).
pub(crate) fn finish(mut command: Command) -> Finished {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_output(child, HANG)
}

/// Waits for `child` (spawned with piped stdout and stderr) at most
/// `bound`, then kills it and fails. Its output is collected until its
/// pipes close, or until the same bound (a process it left behind may hold
/// them open).
pub(crate) fn wait_output(mut child: Child, bound: Duration) -> Finished {
    let stdout = child.stdout.take().map(reader);
    let stderr = child.stderr.take().map(reader);
    let deadline = Instant::now() + bound;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("redlock did not finish within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let collect = |rx: Option<mpsc::Receiver<String>>| {
        let mut lines = Vec::new();
        if let Some(rx) = rx {
            while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                lines.push(line);
            }
        }
        lines.join("\n")
    };
    Finished {
        status,
        stdout: collect(stdout),
        stderr: collect(stderr),
    }
}

/// The lines of `stream`, as they come.
pub(crate) fn reader(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (polling, at most [`HANG`]) until `path` exists.
pub(crate) fn wait_for_file(path: &Path) {
    redlock_tests::harness::wait_until(HANG, &path.display().to_string(), || path.exists())
        .unwrap();
}

/// Sends `signal` to a process these tests started.
pub(crate) fn signal(child: &Child, signal: Signal) {
    kill(Pid::from_raw(i32::try_from(child.id()).unwrap()), signal).unwrap();
}

/// The value of `key` on the server at `url`.
pub(crate) fn get(server: &redlock_tests::harness::RedisServer, key: &str) -> Option<Vec<u8>> {
    let mut connection = server.client().unwrap();
    redis::cmd("GET").arg(key).query(&mut connection).unwrap()
}

/// A key of its own for each test.
pub(crate) fn key(name: &str) -> String {
    format!("cli-test:{name}:{}", std::process::id())
}

/// Starts `command` with its output piped.
pub(crate) fn spawn(mut command: Command) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A child killed (and reaped) when the test ends while it still runs, as
/// after a failure.
pub(crate) struct Guarded(pub(crate) Child);

impl Drop for Guarded {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits at most `bound` for `child` to exit, polling; kills it and fails
/// after that.
pub(crate) fn exit_within(child: &mut Child, bound: Duration) -> ExitStatus {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no exit within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The first of `lines` that contains `what` (at most [`HANG`]).
pub(crate) fn line_with(lines: &mpsc::Receiver<String>, what: &str) -> String {
    let deadline = Instant::now() + HANG;
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains(what) => return line,
            Ok(line) => seen.push(line),
            Err(e) => panic!("no line with {what:?} ({e}); the lines before: {seen:#?}"),
        }
    }
}

/// Each of `signals` in turn to a `redlock run` (with `options`) that
/// waits on `name` behind a holder running `holder` (which touches
/// `started` and runs until `go` exists): it exits with 128 + the signal's
/// number promptly (a hang bound), its command never ran, and once the
/// holder is done nothing is left at `left` on any server.
pub(crate) fn signals_while_waiting(
    options: &[&str],
    name: &str,
    holder: fn(&Path) -> String,
    left: &str,
    signals: &[Signal],
) {
    let cluster = RedisCluster::start(3, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let holding = spawn(run_sh(&urls, options, name, &holder(dir.path())));
    wait_for_file(&dir.path().join("started"));
    let never = dir.path().join("never");
    let verbose: Vec<&str> = options.iter().copied().chain(["-v"]).collect();
    for &sent in signals {
        let mut waiter = spawn(run_sh(
            &urls,
            &verbose,
            name,
            &format!("touch {}", never.display()),
        ));
        // Waiting once it has reported a round that was refused.
        let lines = reader(waiter.stderr.take().unwrap());
        line_with(&lines, "still waiting");
        signal(&waiter, sent);
        let status = exit_within(&mut waiter, Duration::from_secs(5));
        assert_eq!(status.code(), Some(128 + sent as i32), "{sent}");
        assert!(!never.exists(), "{sent}: the command ran");
    }
    // Only the holder's key: once it is done, nothing is left. Its release
    // returns at a quorum and the exit waits (bounded) for the rest; one
    // answered late still runs on its server just after the exit: wait for
    // it. 10 s is well below the holder's 30 s TTL, so a release never sent
    // still leaves the key and fails.
    std::fs::write(dir.path().join("go"), "").unwrap();
    let out = wait_output(holding, HANG);
    assert_eq!(out.code(), Some(0), "{out:?}");
    for node in cluster.iter() {
        wait_until(Duration::from_secs(10), left, || get(node, left).is_none())
            .unwrap_or_else(|e| panic!("left on {}: {e}", node.url()));
    }
}

/// The one-letter state of process `pid` (`R`, `S`, `T` for stopped ...),
/// or `None` when it is gone.
pub(crate) fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": comm may hold spaces and parentheses.
    let end = stat.rfind(')')?;
    stat[end + 1..].trim_start().chars().next()
}

/// Whether process `pid` is gone: no such process, or a zombie (dead,
/// waiting to be reaped by whichever process adopted it).
pub(crate) fn gone(pid: u32) -> bool {
    state(pid).is_none_or(|state| matches!(state, 'Z' | 'X'))
}

/// Whether no process is left in process group `pgid` (zombies count).
pub(crate) fn group_is_empty(pgid: u32) -> bool {
    let pgid = Pid::from_raw(i32::try_from(pgid).unwrap());
    nix::sys::signal::killpg(pgid, None) == Err(nix::errno::Errno::ESRCH)
}

/// The pid a test's command wrote to `path`.
pub(crate) fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A process a test's command started (named by its pid file), killed
/// when the test ends if it is still there (as after a failure), so that
/// no `sleep 600` outlives the test. Only a process still running
/// `program` is killed (not another that got its pid since).
pub(crate) struct Leftover {
    pid: u32,
    program: &'static str,
}

impl Leftover {
    pub(crate) fn new(pid: u32, program: &'static str) -> Self {
        Leftover { pid, program }
    }
}

impl Drop for Leftover {
    fn drop(&mut self) {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.pid)).unwrap_or_default();
        let name = cmdline.split(|&b| b == 0).next().unwrap_or_default();
        let runs = Path::new(std::str::from_utf8(name).unwrap_or_default())
            .file_name()
            .is_some_and(|file| file == self.program);
        if !gone(self.pid) && runs {
            let _ = kill(
                Pid::from_raw(i32::try_from(self.pid).unwrap()),
                Signal::SIGKILL,
            );
        }
    }
}

/// A `redlock run` (with `options` and a TTL of 3 s) whose command ignores
/// SIGTERM and leaves a child (`sleep 600`, ignoring SIGTERM too), on
/// `name` over five masters: once three of them are frozen (SIGSTOP) the
/// command is SIGKILLed before the validity ends, `redlock` exits 79
/// saying `lost` (its wording for a lock or a permit), and by then no
/// process of the command's process group is left, its child included.
pub(crate) fn freezing_three_of_five_masters_stops_the_child(
    options: &[&str],
    name: &str,
    lost: &str,
) {
    let cluster = RedisCluster::start(5, &ServerOptions::new()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let ttl = Duration::from_secs(3);
    // The child ignores SIGTERM: only SIGKILL stops it.
    let script = format!(
        "trap '' TERM; echo $$ > {pid}; sleep 600 & echo $! > {child}; touch {started}; \
         i=0; while [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done",
        pid = dir.path().join("pid").display(),
        child = dir.path().join("child").display(),
        started = dir.path().join("started").display()
    );
    let with_ttl: Vec<&str> = options.iter().copied().chain(["--ttl", "3s"]).collect();
    let holder = spawn(run_sh(&urls, &with_ttl, name, &script));
    wait_for_file(&dir.path().join("started"));
    let pid = read_pid(&dir.path().join("pid"));
    let child = read_pid(&dir.path().join("child"));
    let _leftover = Leftover::new(child, "sleep");
    // Every extension so far started before this instant, so the validity
    // ends before `frozen + ttl`.
    let frozen = Instant::now();
    for i in 0..3 {
        cluster.node(i).pause().unwrap();
    }
    // Dead once a zombie (reaping it is redlock's business, after the kill).
    wait_until(HANG, "the child to be stopped", || gone(pid)).unwrap();
    let gone = frozen.elapsed();
    let out = wait_output(holder, HANG);
    for i in 0..3 {
        cluster.node(i).resume().unwrap();
    }
    // Nothing of the command's group is left once redlock has exited.
    assert!(crate::gone(child), "its child (sleep 600) runs on: {out:?}");
    assert!(
        group_is_empty(pid),
        "a process of the group runs on: {out:?}"
    );
    assert!(gone < ttl, "the child outlived the validity: {gone:?}");
    assert_eq!(out.code(), Some(LOST), "{out:?}");
    assert!(out.stderr.contains(lost), "{}", out.stderr);
    assert!(out.stderr.contains("SIGKILL"), "{}", out.stderr);
}
