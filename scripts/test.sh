#!/usr/bin/env bash
# Runs every check and test of the workspace, installing what the tests need.
#
#   scripts/test.sh            fmt + clippy + all tests (unit, integration, property,
#                              simulation, real-Redis, doc) + the in-memory examples
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

# Servers running before the tests (not ours) are left alone by the check at the end.
before=$(pgrep -x redis-server 2>/dev/null | sort || true)

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (default members, all targets, warnings are errors)"
cargo clippy --all-targets --locked -- -D warnings

log "cargo test (unit, integration, doc tests)"
cargo test --locked

log "examples on in-memory nodes (the README's main command and the others)"
for example in quickstart scoped multi_resource fencing; do
  cargo run -q --locked --example "$example" >/dev/null
done
echo "examples: all ran"

# No test may leave a server behind.
after=$(pgrep -x redis-server 2>/dev/null | sort || true)
leaked=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | grep . || true)
if [ -n "$leaked" ]; then
  echo "error: the tests left redis-server processes running: $leaked" >&2
  exit 1
fi
