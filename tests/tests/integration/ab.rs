//! `scripts/ab.sh`, the harness that compares two builds by interleaved
//! pairs of benchmark runs (docs/benchmarks.md): run here on two
//! directories with a fake benchmark whose figures are known, so that the
//! order of the runs, the medians, the ratios and the refusals are checked
//! without building or benchmarking anything.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root (this package is `tests/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Two sides `a` and `b` in a fresh directory, and a fake benchmark that
/// appends its side to `runs` and prints figures that depend on its side
/// and on how often that side ran: A's `x` is always 2, B's is 3 × its run
/// number; `y` is A's run number and 1.5 on B; `z` is only ever printed
/// by A, and as nan.
fn fake_bench(summary: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for side in ["a", "b"] {
        std::fs::create_dir(dir.path().join(side)).expect("a side's directory");
    }
    let last = if summary {
        r#"if [ "$side" = a ]; then echo "bench x=2.00 y=$n z=nan"; else echo "bench x=$((3 * n)) y=1.5"; fi"#
    } else {
        r#"echo "no summary""#
    };
    let script = format!(
        "#!/bin/sh\n\
         side=$(basename \"$PWD\")\n\
         n=$(cat count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > count\n\
         echo \"$side $*\" >> ../runs\n\
         echo 'a table nobody reads'\n\
         {last}\n"
    );
    let fake = dir.path().join("fake.sh");
    std::fs::write(&fake, script).expect("the fake benchmark");
    let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&fake, executable).expect("the fake benchmark runs");
    (dir, fake)
}

fn ab(dir: &Path, fake: &Path, pairs: &str) -> Output {
    Command::new("bash")
        .arg(root().join("scripts/ab.sh"))
        .args(["--pairs", pairs, "--no-build", "--run"])
        .arg(fake)
        .arg(dir.join("a"))
        .arg(dir.join("b"))
        .args(["--", "--quick", "--modes", "1x1"])
        .env("TMPDIR", dir)
        .output()
        .expect("bash runs scripts/ab.sh")
}

#[test]
fn ab_alternates_the_sides_and_compares_their_medians() {
    let (dir, fake) = fake_bench(true);
    let out = ab(dir.path(), &fake, "3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ab.sh failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A B, then B A, then A B, each with the benchmark's arguments.
    let runs = std::fs::read_to_string(dir.path().join("runs")).expect("the runs' order");
    let order: Vec<&str> = runs.lines().collect();
    let args = "--quick --modes 1x1";
    let expected: Vec<String> = ["a", "b", "b", "a", "a", "b"]
        .iter()
        .map(|side| format!("{side} {args}"))
        .collect();
    assert_eq!(order, expected, "the runs' order");
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}: {stdout}"))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    // x: A 2, 2, 2; B 3, 6, 9: medians 2 and 6, pairs 1.5, 3, 4.5; A steady.
    assert_eq!(row("x"), "2.00 6.00 3.00 1.50 3.00 4.50 1.00");
    // y: A 1, 2, 3 (its spread 3), B 1.5 each time.
    assert_eq!(row("y"), "2.00 1.50 0.75 1.50 0.75 0.50 3.00");
    // z: nan and missing on B: no ratio, and not in the summary.
    assert_eq!(row("z"), "(not in every run)");
    assert_eq!(stdout.lines().last(), Some("ab x=3.00 y=0.75"), "{stdout}");
}

#[test]
fn ab_refuses_a_run_without_a_summary_and_bad_arguments() {
    let (dir, fake) = fake_bench(false);
    let out = ab(dir.path(), &fake, "1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("run A1 did not end with a summary line"),
        "{stderr}"
    );

    let out = ab(dir.path(), &fake, "0");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--pairs: expected a positive number"),
        "{stderr}"
    );

    let out = Command::new("bash")
        .arg(root().join("scripts/ab.sh"))
        .args(["--no-build", "no-such-revision-or-directory", "HEAD"])
        .output()
        .expect("bash runs scripts/ab.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("neither a directory nor a revision"),
        "{stderr}"
    );
}
