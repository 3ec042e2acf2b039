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

install_redis() {
  command -v redis-server >/dev/null 2>&1 && return 0
  log "redis-server not found: installing Debian's package"
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "redis-server is missing and there is no root or sudo to install it" >&2; return 1; }
    sudo="sudo"
  fi
  # Keep the package's service from starting a server on the default port:
  # the tests start their own.
  local policy=/usr/sbin/policy-rc.d restore=""
  if [ -e "$policy" ]; then restore=$(mktemp); $sudo cp -p "$policy" "$restore"; fi
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  local rc=0
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null; } || rc=$?
  if [ -n "$restore" ]; then $sudo mv "$restore" "$policy"; else $sudo rm -f "$policy"; fi
  # Should a service have started anyway, stop it: no server may be left behind.
  $sudo pkill -x redis-server 2>/dev/null || true
  return $rc
}

if ! install_redis || ! command -v redis-server >/dev/null 2>&1; then
  echo "error: redis-server is required by the tests and could not be installed" >&2
  exit 1
fi
log "using $(redis-server --version | head -n1)"

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
