# Sourced by scripts/test.sh and scripts/bench.sh: makes sure redis-server is
# installed, from Debian's packages when it is missing, without leaving the
# package's own service running (the tests and benchmarks start their own
# servers on free ports). Exits with a clear message when it cannot.

install_redis() {
  command -v redis-server >/dev/null 2>&1 && return 0
  printf '==> %s\n' "redis-server not found: installing Debian's package" >&2
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "redis-server is missing and there is no root or sudo to install it" >&2; return 1; }
    sudo="sudo"
  fi
  # Keep the package's service from starting a server on the default port.
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

require_redis() {
  if ! install_redis || ! command -v redis-server >/dev/null 2>&1; then
    echo "error: redis-server is required ($1) and could not be installed" >&2
    exit 1
  fi
  printf '==> using %s\n' "$(redis-server --version | head -n1)" >&2
}
