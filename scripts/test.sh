#!/usr/bin/env bash
# Runs every check and test of the workspace, installing what the tests need.
#
#   scripts/test.sh            fmt + clippy + all tests (unit, integration, property,
#                              simulation, real-Redis, doc) + the in-memory examples
#                            + rustdoc without broken links + publishable checks
#                              (true rust-version, cargo package)
#
# Needs: a Rust toolchain (cargo, rustfmt, clippy). Installs redis-server from
# Debian's packages when it is missing (the Redis backend's tests start their
# own servers on free loopback ports; nothing is left running).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

# shellcheck source=scripts/install-redis.sh
source scripts/install-redis.sh
require_redis "by the tests"

# shellcheck source=scripts/run-dir.sh
source scripts/run-dir.sh
# This run's own TMPDIR: the harness starts each redis-server in a temp dir
# under it, so the check at the end counts only the servers of this run, not
# those another job on the host starts meanwhile. Removed at exit unless a
# process was left behind in it (its logs are there).
run_dir=$(make_run_dir)
export TMPDIR="$run_dir"
keep_run_dir=0
trap '((keep_run_dir)) || rm -rf "$run_dir"' EXIT

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (default members, all targets, warnings are errors)"
cargo clippy --all-targets --locked -- -D warnings

log "cargo test (unit, integration, doc tests)"
cargo test --locked

log "cargo doc (default members; broken or redundant links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --quiet

log "publishable: rust-version true for every dependency; cargo package (offline)"
python3 scripts/check-rust-version.py
# The core has no workspace dependency: packaged and verified (its tarball
# built on its own). The others depend on it and on each other: cargo
# verifies such a set through a local registry whose sources it extracts
# into CARGO_HOME under a name derived from the path of this checkout, and
# reuses an older extraction of the same name and version there (stale code
# from an earlier run), so they are packaged without that verification and
# without a lock file (which offline needs the registry for); their code is
# built and tested by the steps above.
cargo package --locked --offline --quiet --allow-dirty -p redlock-core
cargo package --locked --offline --quiet --allow-dirty --no-verify --exclude-lockfile \
  -p redlock-mock -p redlock-redis -p redlock-cli
echo "packages: redlock-core, redlock-mock, redlock-redis, redlock-cli"

log "examples on in-memory nodes (the README's main command and the others)"
for example in quickstart scoped multi_resource fencing; do
  cargo run -q --locked --example "$example" >/dev/null
done
echo "examples: all ran"

# No test may leave a server (or any other process) behind in this run's dir.
leaked=$(processes_under "$run_dir")
if [ -n "$leaked" ]; then
  keep_run_dir=1
  printf 'error: the tests left processes running (pid, name, working dir; kept: %s):\n%s\n' \
    "$run_dir" "$leaked" >&2
  exit 1
fi
echo "no process left behind"
