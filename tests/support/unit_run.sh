# tests/support/unit_run.sh: sourced (after `set -euo pipefail`) by the shell tests that run
# floodgated as its systemd unit would (tests/deploy, tests/package). Gives them a scratch
# directory $work removed at exit, fail (prints floodgated's log), and the unit's ExecStart
# started, waited for and stopped as systemd does.

work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [ -f "$work/log" ] && sed 's/^/  floodgated: /' "$work/log" >&2
  exit 1
}

# unit_command UNIT [FROM TO]...: the unit's ExecStart with its default FLOODGATED_ARGS
# expanded (as systemd runs it without /etc/default/floodgated), each FROM replaced by TO
# (installed paths by the ones under test), listening on a free port (127.0.0.1:0). Sets cmd.
unit_command() {
  local unit=$1 exec_start default_args
  shift
  exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
  default_args=$(sed -n 's/^Environment="FLOODGATED_ARGS=\(.*\)"$/\1/p' "$unit")
  [ -n "$exec_start" ] && [ -n "$default_args" ] || fail "$unit: no ExecStart or default FLOODGATED_ARGS"
  cmd=${exec_start//\$FLOODGATED_ARGS/$default_args}
  while [ $# -ge 2 ]; do
    cmd=${cmd//$1/$2}
    shift 2
  done
  cmd=${cmd//127.0.0.1:8080/127.0.0.1:0}
}

# start_unit: runs $cmd in the background, its log in $work/log; sets pid.
start_unit() {
  echo "ExecStart: $cmd"
  # shellcheck disable=SC2086 # split as systemd splits an unbraced $VAR
  $cmd 2> "$work/log" &
  pid=$!
}

wait_log() {  # TEXT: up to 10 s (a loaded 2-core machine starts floodgated in well under 1 s)
  for _ in $(seq 100); do
    grep -q "$1" "$work/log" && return 0
    kill -0 "$pid" 2>/dev/null || fail "floodgated exited while waiting for '$1'"
    sleep 0.1
  done
  fail "no '$1' in floodgated's log within 10 s"
}

# listening_port: the port floodgated logged it listens on (after wait_log 'msg="listening"').
listening_port() { sed -n 's/.*msg="listening".* port=\([0-9]*\).*/\1/p' "$work/log" | head -1; }

# stop_unit: SIGTERM (systemd's KillSignal default), then floodgated must exit 0.
stop_unit() {
  kill -TERM "$pid"
  local code=0
  wait "$pid" || code=$?
  pid=
  [ "$code" -eq 0 ] || fail "floodgated exited $code on SIGTERM"
}
