//! Bad input: a clear message and EX_USAGE (64), never a panic.

use crate::{finish, redlock};

const USAGE: i32 = 64;

fn assert_usage(args: &[&str], env: Option<&str>, expect: &str) {
    let mut command = redlock();
    command.args(args);
    if let Some(servers) = env {
        command.env("REDLOCK_SERVERS", servers);
    }
    let out = finish(command);
    assert_eq!(out.code(), Some(USAGE), "{args:?}: {out:?}");
    assert!(
        out.stderr.to_lowercase().contains(&expect.to_lowercase()),
        "{args:?}: expected {expect:?} in {:?}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{args:?}: {out:?}");
}

#[test]
fn bad_input_gets_a_message_and_ex_usage() {
    let server = ["--server", "redis://127.0.0.1:1"];
    let with = |rest: &[&'static str]| -> Vec<&'static str> {
        let mut args = vec!["run"];
        args.extend_from_slice(&server);
        args.extend_from_slice(rest);
        args
    };
    // No servers at all, and an empty REDLOCK_SERVERS.
    assert_usage(&["run", "k", "--", "true"], None, "no servers");
    assert_usage(&["run", "k", "--", "true"], Some(" , "), "no servers");
    assert_usage(&["status", "k"], None, "no servers");
    assert_usage(&["check"], None, "no servers");
    // Malformed URL and wrong scheme, with the password kept out.
    assert_usage(
        &[
            "run",
            "--server",
            "redis://u:hunter2@[::1",
            "k",
            "--",
            "true",
        ],
        None,
        "invalid",
    );
    // A URL that does not parse is named by its scheme alone: whatever
    // follows may be a password.
    assert_usage(
        &["run", "--server", "http://127.0.0.1:1", "k", "--", "true"],
        None,
        "http://<unparsable>",
    );
    assert_usage(&["check", "--server", "ftp://x"], None, "invalid");
    assert_usage(&["status", "--server", "ftp://x", "k"], None, "invalid");
    // Durations.
    assert_usage(&with(&["--ttl", "0", "k", "--", "true"]), None, "--ttl");
    assert_usage(&with(&["--ttl", "abc", "k", "--", "true"]), None, "--ttl");
    assert_usage(
        &with(&["--ttl", "-5s", "k", "--", "true"]),
        None,
        "negative",
    );
    assert_usage(
        &with(&["--wait", "-1s", "k", "--", "true"]),
        None,
        "negative",
    );
    assert_usage(
        &with(&["--ttl", "99999999999999999999999999s", "k", "--", "true"]),
        None,
        "--ttl",
    );
    // A TTL that parses but that millisecond expiry cannot carry.
    assert_usage(
        &with(&["--ttl", "1000000000y", "k", "--", "true"]),
        None,
        "ttl",
    );
    assert_usage(
        &with(&["--kill-grace", "soon", "k", "--", "true"]),
        None,
        "--kill-grace",
    );
    assert_usage(
        &with(&["--conflict-exit-code", "300", "k", "--", "true"]),
        None,
        "300",
    );
    // No command after `--`, no `--` at all, an empty key.
    assert_usage(&with(&["k", "--"]), None, "COMMAND");
    assert_usage(&with(&["k"]), None, "COMMAND");
    assert_usage(&with(&["", "--", "true"]), None, "key");
    assert_usage(
        &["status", "--server", "redis://127.0.0.1:1", ""],
        None,
        "key",
    );
    // A number of permits out of 1..=64, or not a number.
    assert_usage(
        &with(&["--limit", "0", "k", "--", "true"]),
        None,
        "from 1 to 64",
    );
    assert_usage(
        &with(&["--limit", "65", "k", "--", "true"]),
        None,
        "at most 64 permits",
    );
    assert_usage(
        &with(&["--limit", "two", "k", "--", "true"]),
        None,
        "--limit",
    );
    assert_usage(
        &with(&["--limit", "-1", "k", "--", "true"]),
        None,
        "--limit",
    );
    assert_usage(&with(&["--limit", "k", "--", "true"]), None, "--limit");
    assert_usage(
        &[
            "status",
            "--server",
            "redis://127.0.0.1:1",
            "--limit",
            "0",
            "k",
        ],
        None,
        "from 1 to 64",
    );
    assert_usage(
        &[
            "status",
            "--server",
            "redis://127.0.0.1:1",
            "--limit",
            "x",
            "k",
        ],
        None,
        "not a number",
    );
    // --wait and --no-wait together.
    assert_usage(
        &with(&["--wait", "1s", "--no-wait", "k", "--", "true"]),
        None,
        "cannot be used",
    );

    // The password in a bad URL is never printed.
    let out = finish({
        let mut c = redlock();
        c.args([
            "run",
            "--server",
            "redis://u:hunter2@[::1",
            "k",
            "--",
            "true",
        ]);
        c
    });
    assert!(!out.stderr.contains("hunter2"), "{out:?}");
}

#[test]
fn help_lists_the_exit_codes() {
    let out = finish({
        let mut c = redlock();
        c.arg("--help");
        c
    });
    assert_eq!(out.code(), Some(0));
    for code in [
        "64", "69", "70", "74", "75", "79", "126", "127", "129", "130", "131", "143",
    ] {
        assert!(out.stdout.contains(code), "{code} missing from --help");
    }
}

#[test]
fn run_help_gives_the_defaults_docs_cli_md_gives() {
    const DOCS: &str = include_str!("../../../docs/cli.md");
    let help = finish({
        let mut c = redlock();
        c.args(["run", "--help"]);
        c
    })
    .stdout;
    let mut checked = Vec::new();
    // The options table's rows: | `--ttl D` | `30s` | meaning |
    for row in DOCS.lines().filter(|l| l.starts_with("| `--")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let option = cells[1].trim_matches('`').split(' ').next().unwrap();
        let Some(default) = cells[2].strip_prefix('`').and_then(|d| d.strip_suffix('`')) else {
            continue;
        };
        // The option's paragraph in --help, up to the next option.
        let start = help
            .find(&format!("      {option} "))
            .unwrap_or_else(|| panic!("{option} missing from run --help"));
        let rest = &help[start + 6..];
        let end = rest.find("\n  -").unwrap_or(rest.len());
        assert!(
            rest[..end].contains(&format!("[default: {default}]")),
            "{option}: the docs say {default}: {}",
            &rest[..end]
        );
        checked.push(option);
    }
    for option in [
        "--ttl",
        "--max-hold",
        "--kill-grace",
        "--no-quorum-timeout",
        "--node-timeout",
    ] {
        assert!(
            checked.contains(&option),
            "{option} not in docs/cli.md's table: {checked:?}"
        );
    }
}

#[test]
fn an_unexpected_error_is_ex_software() {
    // Four file descriptors: the standard streams, and one for the loader
    // to open libraries with; then redlock cannot set up its signal
    // handling, which never fails otherwise.
    let mut command = std::process::Command::new("sh");
    command
        .args([
            "-c",
            "ulimit -n 4; exec \"$0\" run --server redis://127.0.0.1:1 k -- true",
            env!("CARGO_BIN_EXE_redlock"),
        ])
        .env_remove("REDLOCK_SERVERS");
    let out = finish(command);
    assert_eq!(out.code(), Some(70), "{out:?}");
    assert!(out.stderr.contains("cannot handle signals"), "{out:?}");
}

/// Whatever a message quotes (an argument, a key) reaches the terminal
/// with its control characters escaped: an escape sequence (a window
/// title, a colour), a bell, a line break that would forge a line.
pub(crate) fn assert_escaped(stderr: &str, forged: &str) {
    assert!(
        !stderr.chars().any(|c| c.is_control() && c != '\n'),
        "a control character reached stderr: {stderr:?}"
    );
    assert!(
        !stderr.lines().any(|line| line.starts_with(forged)),
        "a forged line: {stderr:?}"
    );
    assert!(stderr.contains("\\u{1b}]0;title\\u{7}"), "{stderr:?}");
}

#[test]
fn what_a_usage_error_quotes_is_escaped() {
    let hostile = "x\u{1b}]0;title\u{7}\u{1b}[31m\nerror: forged";
    let unknown = format!("--{hostile}");
    for args in [
        vec![
            "run",
            "--server",
            "redis://127.0.0.1:1",
            "--ttl",
            hostile,
            "k",
            "--",
            "true",
        ],
        vec![hostile],
        vec!["run", &unknown],
    ] {
        let mut command = redlock();
        command.args(&args);
        let out = finish(command);
        assert_eq!(out.code(), Some(USAGE), "{args:?}: {out:?}");
        assert_escaped(&out.stderr, "error: forged");
    }
}
