//! The Redis examples of `redlock-redis/examples/` run against servers the
//! harness starts: each must exit 0 (they end with their own checks) and
//! print the lines that show what it promises.
//!
//! An example is another package's target, so Cargo gives its path to no
//! test (`CARGO_BIN_EXE_*` names this package's binaries only). It is found
//! beside this test binary, in `target/<profile>/examples/`, where
//! `cargo test` at the workspace root builds every example before it runs
//! any test (and `cargo build --examples` does too). A missing or stale
//! binary fails the test with the command to build it: never a skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use redlock_tests::harness::{RedisCluster, ServerOptions};

/// How long an example may run: they take seconds; this bound only stops
/// a hung one from hanging the suite (generous for a loaded machine).
const RUN_LIMIT: Duration = Duration::from_secs(120);

const BUILD_HINT: &str = "build the examples first: `cargo build --locked --examples` at the \
     workspace root (`cargo test` there, as scripts/test.sh runs it, builds them before any test)";

/// The built example `name` of `redlock-redis`: its path, checked to exist
/// and to be newer than its source.
fn example_binary(name: &str) -> PathBuf {
    let test_binary = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/integration-<hash> -> target/<profile>/examples/<name>
    let profile_dir = test_binary
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let built = std::fs::metadata(&binary)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| {
            panic!(
                "example {name} is not built ({}: {e}): {BUILD_HINT}",
                binary.display()
            )
        });
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../redlock-redis/examples")
        .join(format!("{name}.rs"));
    let written = std::fs::metadata(&source)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("example source {}: {e}", source.display()));
    assert!(
        built >= written,
        "example {name} is older than its source ({} built {:?} ago, source changed since): {BUILD_HINT}",
        binary.display(),
        SystemTime::now().duration_since(built).unwrap_or_default(),
    );
    binary
}

/// Runs `command` to its end, killing it if it outlives [`RUN_LIMIT`].
fn run(mut command: Command, what: &str) -> Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(RUN_LIMIT) {
        Ok(output) => output,
        Err(_) => {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("a pid fits i32"));
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = waiter.join(); // reaped
            panic!("{what} still ran after {RUN_LIMIT:?}: killed");
        }
    };
    waiter.join().expect("the waiter thread");
    output.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Runs example `name` against `servers`; returns its stdout, having
/// checked that it exited 0 and printed each of `lines`.
fn run_example(name: &str, servers: &RedisCluster, lines: &[&str]) -> String {
    let mut command = Command::new(example_binary(name));
    command.env("REDLOCK_SERVERS", servers.urls().join(","));
    let output = run(command, name);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "example {name} failed ({}):\n--- stdout\n{stdout}--- stderr\n{stderr}",
        output.status
    );
    for line in lines {
        assert!(
            stdout.contains(line),
            "example {name} did not print {line:?}:\n{stdout}"
        );
    }
    stdout
}

#[test]
fn keep_alive_keeps_a_long_job_and_signals_the_lost_lock() {
    let servers = RedisCluster::start(3, &ServerOptions::new()).expect("redis-server cluster");
    run_example(
        "keep_alive",
        &servers,
        &[
            "connected to 3 masters, quorum 2",
            "job 1: ran",
            "kept alive (",
            "committed 1204 rows",
            "job 2: ensure_held() failed: it stops before committing",
            "job 2: with_lock_kept returned Lost",
            "job 2: the on_lost callback said:",
            "done",
        ],
    );
}

#[test]
fn fencing_store_refuses_the_stale_writer() {
    let servers = RedisCluster::start(3, &ServerOptions::new()).expect("redis-server cluster");
    run_example(
        "fencing_store",
        &servers,
        &[
            "client A's lock expired: is_valid() = false",
            "client B writes with token",
            "refused: token",
            "the store holds: B's config",
            "done",
        ],
    );
}

#[test]
fn redis_examples_without_servers_say_how_to_start_them() {
    for name in ["keep_alive", "fencing_store"] {
        let mut command = Command::new(example_binary(name));
        command.env_remove("REDLOCK_SERVERS");
        let output = run(command, name);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{name}: {stderr}");
        assert!(
            stderr.contains("REDLOCK_SERVERS is not set") && stderr.contains("redis-server --port"),
            "{name} did not say how to start servers:\n{stderr}"
        );
    }
}
