# bench/lib.sh: what every bench/ script needs, sourced after `set -euo pipefail`.
# Bash only: a fresh machine has no python. Messages name the script that sourced this.

BENCH_SCRIPT=bench/$(basename "$0")
log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { echo "$BENCH_SCRIPT: $*" >&2; exit 1; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {  # a loopback port nobody listens on; below 55536 so it can be a cluster node's
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 35000))
    port_free "$p" && { echo "$p"; return; }
  done
  die "no free port"
}
wait_port() {  # port pid: true once something listens on port, false if pid exits first
  for _ in $(seq 200); do
    kill -0 "$2" 2>/dev/null || return 1
    port_free "$1" || return 0
    sleep 0.05
  done
  return 1
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }

# start_redis DIR: a redis-server without persistence on a free port, in the background;
# sets REDIS_PORT and REDIS_PID. Another port if one was taken meanwhile (5 tries); dies with
# its log's tail if it never listens. The caller stops it (kill "$REDIS_PID").
start_redis() {
  for _ in 1 2 3 4 5; do
    REDIS_PORT=$(free_port)
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$1" \
      >"$1/redis.log" 2>&1 &
    REDIS_PID=$!
    wait_port "$REDIS_PORT" "$REDIS_PID" && return
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
  done
  die "redis-server did not start: $(tail -3 "$1/redis.log")"
}

# Of the redis-server on port $1: user+system CPU seconds so far, and script calls so far
# (EVAL, EVALSHA, FCALL and their _ro forms, from INFO commandstats).
redis_cpu() {
  redis-cli -p "$1" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'
}
script_calls() {
  redis-cli -p "$1" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_(eval|evalsha|fcall)(_ro)?:/ {s += $3} END {print s + 0}'
}
