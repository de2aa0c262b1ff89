#!/usr/bin/env bash
# Load test: wrk against keepalive-server, and against nginx side by side
# when nginx is installed, for keep-alive, Connection: close, pipelined and
# HTTP/1.0 keep-alive traffic. Runs alternate between the servers; the table
# shows medians over the rounds: requests/s, latency p50/p99, and server CPU
# time (user+sys, all threads) per request. "floor" is examples/floor.rs, a
# bare mio loop answering each read with a canned response (no parsing, no
# timers): what the kernel and an event loop cost alone on this machine. It
# never closes, so it sits out the Connection: close scenario.
#
# Usage: scripts/loadtest.sh [rounds] [duration] [connections]
#   defaults: 3 rounds, 5s, 100 connections, one worker each (--workers 1,
#   worker_processes 1). Needs wrk (apt-get install wrk; nginx optional).
#   Env: SCENARIOS="keepalive close pipeline http10" to choose.
#   ACCESS_LOG=1 adds "kaslog": keepalive-server with --access-log to a file
#   (emptied before each of its runs), to price the access log.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
duration=${2:-5s}
connections=${3:-100}
scenarios=${SCENARIOS:-keepalive close pipeline http10}
kas_port=18480
kaslog_port=18481
nginx_port=18490
floor_port=18470

command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
ulimit -n 20000 2>/dev/null || true

cargo build --release --quiet --bin keepalive-server --example floor
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

./target/release/keepalive-server --workers 1 --listen "127.0.0.1:$kas_port" \
  --keep-alive-timeout 65s >"$work/kas.log" 2>&1 &
pids+=($!)
kas_pid=$!

./target/release/examples/floor "127.0.0.1:$floor_port" >/dev/null 2>&1 &
pids+=($!)
floor_pid=$!

servers="kas floor"
if [ "${ACCESS_LOG:-0}" = 1 ]; then
  ./target/release/keepalive-server --workers 1 --listen "127.0.0.1:$kaslog_port" \
    --keep-alive-timeout 65s --access-log "$work/access.log" >"$work/kaslog.log" 2>&1 &
  pids+=($!)
  kaslog_pid=$!
  servers="kas kaslog floor"
fi
if command -v nginx >/dev/null; then
  mkdir -p "$work/logs"
  cat >"$work/nginx.conf" <<CONF
worker_processes 1;
error_log $work/logs/error.log;
pid $work/nginx.pid;
events { worker_connections 20000; }
http {
  access_log off;
  keepalive_timeout 65s;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$nginx_port;
    location / { default_type text/plain; return 200 "Hello, World!"; }
  }
}
CONF
  nginx -p "$work" -c "$work/nginx.conf"
  servers="${servers/floor/nginx floor}"
else
  echo "(nginx not installed: measuring keepalive-server alone)" >&2
fi
sleep 0.5
nginx_worker() { pgrep -P "$(cat "$work/nginx.pid")" | head -1; }

# CPU nanoseconds used so far by every thread of a process.
cpu_ns() {
  local total=0 f
  for f in /proc/"$1"/task/*/schedstat; do
    total=$((total + $(cut -d' ' -f1 "$f")))
  done
  echo "$total"
}

# Latency as printed by wrk (e.g. 1.23ms, 850.00us, 1.01s) in milliseconds.
to_ms() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else printf "%s", v }'
}

run() { # server scenario -> "rps p50 p99 cpu_us_per_req errors"
  local server=$1 scenario=$2 port pid args=()
  case $server in
    kas) port=$kas_port; pid=$kas_pid ;;
    kaslog) port=$kaslog_port; pid=$kaslog_pid; : >"$work/access.log" ;;
    floor) port=$floor_port; pid=$floor_pid ;;
    nginx) port=$nginx_port; pid=$(nginx_worker) ;;
  esac
  case $scenario in
    keepalive) ;;
    close) args=(-s scripts/wrk/close.lua) ;;
    pipeline) args=(-s scripts/wrk/pipeline.lua) ;;
    http10) args=(-s scripts/wrk/http10.lua) ;;
  esac
  local before after out
  before=$(cpu_ns "$pid")
  out=$(wrk -t1 -c"$connections" -d"$duration" --latency "${args[@]}" "http://127.0.0.1:$port/" ${scenario/#pipeline/-- 16} 2>&1 | sed 's/^-- 16$//')
  after=$(cpu_ns "$pid")
  local requests rps p50 p99 errors
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
  # wrk's percentiles break under pipelining (they print 0.00us): say so.
  awk -v v="$p99" 'BEGIN { exit !(v + 0 == 0) }' && p99=n/a
  errors=$(awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10; found=1} END {if (!found) print 0}' <<<"$out")
  awk -v r="$requests" -v b="$before" -v a="$after" -v rps="$rps" -v p50="$p50" -v p99="$p99" -v e="$errors" \
    'BEGIN { printf "%s %s %s %.3f %s\n", rps, p50, p99, (a - b) / 1000 / r, e }'
}

median() { grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, wrk -t1 -c$connections -d$duration, $rounds rounds, medians"
printf "%-10s %-6s %10s %9s %9s %12s %7s\n" scenario server "req/s" "p50 ms" "p99 ms" "cpu us/req" errors
for scenario in $scenarios; do
  declare -A results=()
  for round in $(seq "$rounds"); do
    for server in $servers; do
      [ "$server/$scenario" = floor/close ] && continue
      results[$server]+="$(run "$server" "$scenario")"$'\n'
    done
  done
  for server in $servers; do
    [ "$server/$scenario" = floor/close ] && continue
    rows=${results[$server]}
    printf "%-10s %-6s %10s %9s %9s %12s %7s\n" "$scenario" "$server" \
      "$(awk '{print $1}' <<<"$rows" | median)" "$(awk '{print $2}' <<<"$rows" | median)" \
      "$(awk '{print $3}' <<<"$rows" | median)" "$(awk '{print $4}' <<<"$rows" | median)" \
      "$(awk '{s += $5} END {print s}' <<<"$rows")"
  done
  unset results
done
