# Sourced by scripts/test.sh and scripts/bench.sh: makes sure redis-server is
# installed, from Debian's packages when it is missing, without leaving the
# package's own service running (the tests and benchmarks start their own
# servers on free ports). Exits with a clear message when it cannot.
#
# Only processes this script started are ever stopped: other redis-server
# processes on the host (another user's, another job's) are left alone.

# The pids of all running redis-server processes, one a line. Read from /proc
# (no procps on a minimal Debian image); the name is the kernel's `comm`,
# which redis-server keeps although it rewrites its command line.
redis_server_pids() {
  local dir comm
  for dir in /proc/[0-9]*; do
    comm=$(cat "$dir/comm" 2>/dev/null) || continue
    if [ "$comm" = redis-server ]; then printf '%s\n' "${dir#/proc/}"; fi
  done
  return 0
}

# Stops the package's service if it started during the install despite the
# policy-rc.d guard. $1: the redis-server pids from before the install. A
# server counts as the service's when it is new and either is the pid in the
# package's pidfile (init script and systemd unit alike) or runs as the
# package's user `redis`; a server someone else started meanwhile is neither.
stop_package_service() {
  local before=$1 sudo=${2:-} pidfile=/run/redis/redis-server.pid
  local pid owner ours=""
  for pid in $(redis_server_pids); do
    case $'\n'"$before"$'\n' in *$'\n'"$pid"$'\n'*) continue ;; esac
    owner=$(stat -c %U "/proc/$pid" 2>/dev/null) || continue
    if [ "$owner" = redis ] || { [ -r "$pidfile" ] && [ "$(cat "$pidfile" 2>/dev/null)" = "$pid" ]; }; then
      ours="$ours $pid"
    fi
  done
  [ -n "$ours" ] || return 0
  printf '==> %s\n' "stopping the package's redis-server service (pid$ours)" >&2
  # Under systemd the unit has Restart=always: a signal alone would bring the
  # server back, so stop the unit (it holds only the package's server).
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    $sudo systemctl stop redis-server.service 2>/dev/null || true
  fi
  for pid in $ours; do
    signal_as "$sudo" TERM "$pid"
  done
  local tries=0 left state
  while :; do
    left=""
    for pid in $ours; do
      # Gone, or a zombie (exited, not yet reaped by its parent).
      state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || continue
      if [ "${state%% *}" != Z ]; then left="$left $pid"; fi
    done
    [ -n "$left" ] || return 0
    if ((tries++ >= 50)); then
      # Five seconds after SIGTERM: no shutdown save is worth waiting for.
      for pid in $left; do signal_as "$sudo" KILL "$pid"; done
      return 0
    fi
    sleep 0.1
  done
}

# Sends signal $2 to pid $3, through sudo when $1 is `sudo`. The shell's own
# kill: a minimal image has no kill binary (procps) for sudo to run.
signal_as() {
  if [ -n "$1" ]; then
    "$1" sh -c 'kill -s "$1" "$2"' sh "$2" "$3" 2>/dev/null || true
  else
    kill -s "$2" "$3" 2>/dev/null || true
  fi
}

install_redis() {
  command -v redis-server >/dev/null 2>&1 && return 0
  printf '==> %s\n' "redis-server not found: installing Debian's package" >&2
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "redis-server is missing and there is no root or sudo to install it" >&2; return 1; }
    sudo="sudo"
  fi
  local before
  before=$(redis_server_pids)
  # Keep the package's service from starting a server on the default port.
  local policy=/usr/sbin/policy-rc.d restore=""
  if [ -e "$policy" ]; then restore=$(mktemp); $sudo cp -p "$policy" "$restore"; fi
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  local rc=0
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null; } || rc=$?
  if [ -n "$restore" ]; then $sudo mv "$restore" "$policy"; else $sudo rm -f "$policy"; fi
  # Should the service have started anyway, stop it, and only it.
  stop_package_service "$before" "$sudo"
  return $rc
}

require_redis() {
  if ! install_redis || ! command -v redis-server >/dev/null 2>&1; then
    echo "error: redis-server is required ($1) and could not be installed" >&2
    exit 1
  fi
  printf '==> using %s\n' "$(redis-server --version | head -n1)" >&2
}
