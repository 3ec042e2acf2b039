#!/usr/bin/env bash
# Benchmarks the Redlock manager against the peer crates and raw references
# on real redis-server masters, and prints a table and one summary line.
# Before that, the memory benchmark (src/bin/memory.rs of bench/) prints its
# own table and `memory ...` line (skipped with --help).
#
#   scripts/bench.sh            full run (3 rounds over every cell, ~5 min)
#   scripts/bench.sh --quick    one short round (well under 2 min)
#   scripts/bench.sh --help     every option (--rounds, --secs, --modes, --impls ...)
#   scripts/bench.sh --quick --modes fair --impls ours
#                               only the fair mode: two managers on one key
#   scripts/bench.sh --own-sessions
#                               the servers each in a session of their own, as
#                               daemons run (the default: the benchmark's children)
#
# The benchmark starts its own masters (5; 3, 7 and 9 for the N sweep) on free
# loopback ports and stops them, also when it fails. Needs a Rust toolchain;
# installs redis-server from Debian's packages when it is missing.
# docs/benchmarks.md explains every figure.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }

# shellcheck source=scripts/install-redis.sh
source scripts/install-redis.sh
require_redis "by the benchmark"

# First the memory benchmark (in-process, no servers: bytes per held lock and
# growth over a million cycles), unless only the usage was asked for. The main
# benchmark runs last, so that its summary line stays the last line printed.
memory=1
for arg in "$@"; do
    case "$arg" in
        -h | --help) memory=0 ;;
    esac
done
if ((memory)); then
    log "cargo run --release -p redlock-bench --bin memory"
    cargo run --release --locked -p redlock-bench --bin memory
fi

log "cargo run --release -p redlock-bench --bin redlock-bench -- $*"
exec cargo run --release --locked -p redlock-bench --bin redlock-bench -- "$@"
