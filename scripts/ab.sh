#!/usr/bin/env bash
# Compares two builds by interleaved pairs of benchmark runs, so that both
# share the machine's drift: A B, then B A, then A B, ... Each run's last line
# must be a summary `bench NAME=VALUE ...` (as `scripts/bench.sh` prints).
#
#   scripts/ab.sh [--pairs N] [--run CMD] [--no-build] A B [-- ARGS...]
#
#   A, B        two revisions (each checked out once in a worktree under
#               target/ab/, built there) or two directories (checkouts used
#               as they are)
#   --pairs N   runs of each side (default 3)
#   --run CMD   what runs in each side's directory, with ARGS
#               (default: scripts/bench.sh)
#   --no-build  skip `cargo build --release -p redlock-bench` in each side
#   ARGS        passed to every run, e.g. -- --quick --modes 1x1,8x
#
# Prints each figure's median on each side, the ratio of the medians (B/A),
# each pair's ratio, and A's own spread (its largest run over its smallest):
# a ratio inside that spread is noise. The last line is
# `ab NAME=RATIO ...`. Each run's whole output stays in the log directory
# printed first. docs/benchmarks.md says how its figures were compared.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
    printf 'ab.sh: %s\n' "$*" >&2
    exit 2
}

pairs=3
run=scripts/bench.sh
build=1
sides=()
args=()
while (($#)); do
    case "$1" in
        --pairs)
            (($# >= 2)) || die "--pairs needs a number"
            pairs=$2
            shift
            ;;
        --run)
            (($# >= 2)) || die "--run needs a command"
            run=$2
            shift
            ;;
        --no-build) build=0 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        --)
            shift
            args=("$@")
            break
            ;;
        -*) die "unknown option $1 (try --help)" ;;
        *) sides+=("$1") ;;
    esac
    shift
done
((${#sides[@]} == 2)) || die "expected two revisions or directories, got ${#sides[@]} (try --help)"
[[ $pairs =~ ^[1-9][0-9]*$ ]] || die "--pairs: expected a positive number, got '$pairs'"

# A side's directory: the directory itself, or a worktree of the revision.
checkout() {
    local side=$1
    if [[ -d $side ]]; then
        (cd "$side" && pwd)
        return
    fi
    local commit dir
    commit=$(git rev-parse --verify --quiet "$side^{commit}") || die "'$side' is neither a directory nor a revision"
    dir=$PWD/target/ab/$commit
    if [[ ! -d $dir ]]; then
        git worktree add --detach "$dir" "$commit" >&2
        # Most of the dependencies are built already: start from this build.
        if [[ -d target/release ]]; then
            mkdir -p "$dir/target"
            cp -a target/release "$dir/target/"
        fi
    fi
    printf '%s\n' "$dir"
}

dirs=()
for side in "${sides[@]}"; do
    dirs+=("$(checkout "$side")")
done
if ((build)); then
    for dir in "${dirs[@]}"; do
        (cd "$dir" && cargo build --release --locked -p redlock-bench --bins >&2)
    done
fi

logs=$(mktemp -d "${TMPDIR:-/tmp}/ab.XXXXXX")
echo "ab: A = ${sides[0]} (${dirs[0]}), B = ${sides[1]} (${dirs[1]}); every run's output in $logs"
for ((i = 1; i <= pairs; i++)); do
    order=(0 1)
    ((i % 2 == 0)) && order=(1 0)
    for s in "${order[@]}"; do
        name=$([[ $s == 0 ]] && echo A || echo B)
        log=$logs/$name$i.txt
        echo "ab: pair $i, $name" >&2
        # shellcheck disable=SC2086 # --run may be a command with words
        (cd "${dirs[$s]}" && $run "${args[@]}") >"$log" 2>&1 ||
            die "run $name$i failed; its output: $log"
        summary=$(tail -n 1 "$log")
        [[ $summary == "bench "* ]] || die "run $name$i did not end with a summary line: $log"
        printf '%s\n' "$summary" >"$logs/$name$i.summary"
    done
done

# One line per figure: NAME side VALUE, then medians, ratios and spread.
for name in A B; do
    for ((i = 1; i <= pairs; i++)); do
        tr ' ' '\n' <"$logs/$name$i.summary" | awk -v side="$name" -v pair="$i" -F= 'NF == 2 { print $1, side, pair, $2 }'
    done
done | awk -v pairs="$pairs" '
    function median(list, n,    sorted, i, j, t) {
        for (i = 1; i <= n; i++) sorted[i] = list[i]
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && sorted[j - 1] > sorted[j]; j--) { t = sorted[j]; sorted[j] = sorted[j - 1]; sorted[j - 1] = t }
        return n % 2 ? sorted[(n + 1) / 2] : (sorted[n / 2] + sorted[n / 2 + 1]) / 2
    }
    function ratio(b, a) { return (a == 0 || a != a || b != b) ? "nan" : sprintf("%.2f", b / a) }
    {
        if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
        value[$1, $2, $3] = $4 + 0
        if ($4 == "nan") value[$1, $2, $3] = "nan"
    }
    END {
        printf "%-34s %10s %10s %6s  %-*s %s\n", "figure", "A median", "B median", "B/A", pairs * 5 + 6, "pairs B/A", "A spread"
        line = "ab"
        for (k = 1; k <= n; k++) {
            f = order[k]; bad = 0; lo = ""; hi = ""; each = ""
            for (i = 1; i <= pairs; i++) {
                if (!((f, "A", i) in value) || !((f, "B", i) in value) || value[f, "A", i] == "nan" || value[f, "B", i] == "nan") { bad = 1; break }
                a[i] = value[f, "A", i]; b[i] = value[f, "B", i]
                each = each " " ratio(b[i], a[i])
                if (lo == "" || a[i] < lo) lo = a[i]
                if (hi == "" || a[i] > hi) hi = a[i]
            }
            if (bad) { printf "%-34s %10s\n", f, "(not in every run)"; continue }
            ma = median(a, pairs); mb = median(b, pairs)
            r = ratio(mb, ma)
            printf "%-34s %10.2f %10.2f %6s  %-*s %s\n", f, ma, mb, r, pairs * 5 + 6, each, ratio(hi, lo)
            line = line " " f "=" r
        }
        print line
    }'
