# Sourced by scripts/test.sh: a fresh temp dir for one test run, and the
# processes left running in it.
#
# The test harness (tests/src/harness/server.rs) starts every redis-server in
# a new temp dir from the `tempfile` crate, which follows TMPDIR, and runs it
# there: the dir is the process's working directory and its config's `dir`.
# With TMPDIR pointed at a fresh dir for the run, a server of this run is a
# process whose working directory lies under that dir, and servers started by
# anyone else on the host never are. (Their command lines do not help:
# redis-server rewrites its own to "redis-server 127.0.0.1:<port>".)

# Creates the run's dir, prints its path.
make_run_dir() {
  mktemp -d "${TMPDIR:-/tmp}/redlock-test-run.XXXXXX"
}

# Prints "pid name cwd" for every live process (zombies excluded) whose
# working directory is $1 or below it: with a deleted dir the kernel appends
# " (deleted)", which still matches. Processes of other users whose cwd we
# may not read are not ours and are skipped.
processes_under() {
  local root=${1%/} dir cwd state
  for dir in /proc/[0-9]*; do
    cwd=$(readlink "$dir/cwd" 2>/dev/null) || continue
    case "$cwd" in
      "$root" | "$root"/* | "$root (deleted)") ;;
      *) continue ;;
    esac
    state=$(sed 's/.*) //' "$dir/stat" 2>/dev/null) || continue
    [ "${state%% *}" = Z ] && continue
    printf '%s %s %s\n' "${dir#/proc/}" "$(cat "$dir/comm" 2>/dev/null)" "$cwd"
  done
  return 0
}
