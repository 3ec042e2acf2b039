#!/usr/bin/env bash
# Benchmarks the Redlock manager against the peer crates and raw references
# on real redis-server masters, in two server setups, and prints each
# setup's table and summary line, then both side by side and one combined
# summary line (the last line printed).
# Before that, the memory benchmark (src/bin/memory.rs of bench/) prints its
# own table and `memory ...` line (skipped with --help).
#
# The two setups: the servers as the benchmark's children (in its session),
# then each server in a session of its own (--own-sessions), as daemons run;
# under Linux autogroup scheduling the two share the CPU differently.
#
#   scripts/bench.sh            both setups, full (3 rounds over every cell,
#                               ~5 min per setup)
#   scripts/bench.sh --quick    both setups, one short round each (~1-2 min each)
#   scripts/bench.sh --setup children
#                               only the servers as the benchmark's children
#   scripts/bench.sh --setup own-sessions
#                               only the servers in sessions of their own
#                               (--own-sessions alone means the same)
#   scripts/bench.sh --help     every option (--rounds, --secs, --modes, --impls ...)
#   scripts/bench.sh --quick --modes procs --impls ours
#                               only the procs mode: 8 processes on one key
#   scripts/bench.sh --quick --modes semaphore,mutex4x4 --impls ours
#                               the semaphore mode (4 managers x 4 threads on
#                               4 permits) next to the same layout on a mutex
#
# With one setup the last line is its `bench ...` summary line; with both it
# is `bench children.NAME=... own_sessions.NAME=...`, every figure of both.
#
# The benchmark starts its own masters (5; 3, 7 and 9 for the N sweep) on free
# loopback ports and stops them, also when it fails. Needs a Rust toolchain;
# installs redis-server from Debian's packages when it is missing.
# docs/benchmarks.md explains every figure.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'bench.sh: %s\n' "$*" >&2
    exit 2
}

# Our own options (--setup, and --own-sessions as a setup); the rest goes to
# the benchmark, unchanged, for every setup.
setups=(children own-sessions)
help=0
args=()
while (($#)); do
    case "$1" in
        --setup)
            (($# >= 2)) || die "--setup needs a value: children, own-sessions or both"
            setup_arg=$2
            shift
            ;;
        --setup=*) setup_arg=${1#--setup=} ;;
        --own-sessions) setup_arg=own-sessions ;;
        -h | --help)
            help=1
            args+=("$1")
            ;;
        *) args+=("$1") ;;
    esac
    shift
done
case "${setup_arg:-both}" in
    both) ;;
    children) setups=(children) ;;
    own-sessions) setups=(own-sessions) ;;
    *) die "--setup: expected children, own-sessions or both, got '${setup_arg}'" ;;
esac

bench() {
    cargo run --release --locked -p redlock-bench --bin redlock-bench -- "$@"
}

if ((help)); then
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    bench "${args[@]}"
    exit 0
fi

# shellcheck source=scripts/install-redis.sh
source scripts/install-redis.sh
require_redis "by the benchmark"

# First the memory benchmark (in-process, no servers: bytes per held lock and
# growth over a million cycles). The main benchmark runs last, so that a
# summary line stays the last line printed.
log "cargo run --release -p redlock-bench --bin memory"
cargo run --release --locked -p redlock-bench --bin memory

if ((${#setups[@]} == 1)); then
    extra=()
    [[ ${setups[0]} == own-sessions ]] && extra=(--own-sessions)
    log "cargo run --release -p redlock-bench --bin redlock-bench -- ${args[*]} ${extra[*]}"
    exec cargo run --release --locked -p redlock-bench --bin redlock-bench -- "${args[@]}" "${extra[@]}"
fi

# Both setups: each run's output is kept to read its summary line back.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
summaries=()
for setup in "${setups[@]}"; do
    extra=()
    [[ $setup == own-sessions ]] && extra=(--own-sessions)
    echo
    echo "### setup: $setup"
    log "cargo run --release -p redlock-bench --bin redlock-bench -- ${args[*]} ${extra[*]}"
    bench "${args[@]}" "${extra[@]}" | tee "$scratch/$setup.txt"
    summary=$(tail -n 1 "$scratch/$setup.txt")
    [[ $summary == "bench "* ]] || die "the $setup run did not end with a summary line"
    summaries+=("$summary")
done

# Side by side, then the combined line: children.NAME=... own_sessions.NAME=...
echo
echo "Both setups (servers as the benchmark's children | each in a session of its own):"
printf '%s\n' "${summaries[@]}" | awk '
    NR == 1 { for (i = 2; i <= NF; i++) { split($i, kv, "="); names[i] = kv[1]; first[i] = kv[2] }; n = NF }
    NR == 2 { for (i = 2; i <= NF; i++) { split($i, kv, "="); second[kv[1]] = kv[2] } }
    END {
        for (i = 2; i <= n; i++) {
            other = (names[i] in second) ? second[names[i]] : "nan"
            printf "  %-30s %10s %10s\n", names[i], first[i], other
        }
    }'
line="bench"
for i in "${!setups[@]}"; do
    prefix=${setups[$i]//-/_}
    for pair in ${summaries[$i]#bench }; do
        line+=" $prefix.$pair"
    done
done
echo "$line"
