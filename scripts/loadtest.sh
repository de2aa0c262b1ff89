#!/usr/bin/env bash
# Load test: wrk against keepalive-server, side by side with nginx and
# Node's own http server when they are installed, for keep-alive,
# Connection: close (also with deferred accept: keepalive-server
# --defer-accept against nginx `listen ... deferred`, separate instances),
# pipelined and HTTP/1.0 keep-alive traffic, and for
# response sizes of 1 KiB, 16 KiB and 256 KiB (`/bytes/<n>`; nginx serves
# files of those sizes with sendfile, Node a Buffer made once). Runs
# alternate between the servers; the table shows medians over the rounds:
# requests/s, latency p50/p99, server CPU time (user+sys, all threads) per
# request, the server's context switches per request, and wrk's own CPU
# use (near 100%, the client is the limit). "floor" is
# examples/floor.rs, a bare mio loop answering each read with a canned
# response (no parsing, no timers): what the kernel and an event loop cost
# alone on this machine. It never closes and answers
# only hello, so it sits out the Connection: close and size scenarios
# (as Node and the baseline sit out the deferred one; a baseline must
# serve /bytes for the size ones).
#
# Usage: scripts/loadtest.sh [rounds] [duration] [connections]
#   defaults: 3 rounds, 5s, 100 connections, one worker each (--workers 1,
#   worker_processes 1, one Node process). Needs wrk (apt-get install wrk;
#   nginx and node optional). Prints a Markdown table.
#   Env: SCENARIOS="keepalive close close-deferred pipeline http10 bytes-1k
#   bytes-16k bytes-256k" to choose (also bytes-64k, bytes-1m); SERVERS="kas nginx node floor" likewise;
#   PORT_BASE (default 18460): the servers listen on PORT_BASE..+31.
#   ACCESS_LOG=1 adds "kaslog": keepalive-server with --access-log to a file
#   (emptied before each of its runs), to price the access log.
#   BASELINE=PATH adds "before": another keepalive-server binary (e.g. one
#   built from main), measured in the same rounds, for before/after ratios.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

rounds=${1:-3}
duration=${2:-5s}
connections=${3:-100}
scenarios=${SCENARIOS:-keepalive close close-deferred pipeline http10 bytes-1k bytes-16k bytes-256k}
wanted_servers=${SERVERS:-kas nginx node floor}
port_base=${PORT_BASE:-18460}
node_port=$port_base
floor_port=$((port_base + 10))
kas_port=$((port_base + 20))
nginx_port=$((port_base + 30))
kaslog_port=$((port_base + 22))

command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
ulimit -n 20000 2>/dev/null || true

cargo build --release --quiet --bin keepalive-server --example floor
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pidfile in "$work/nginx.pid" "$work/deferred/nginx.pid"; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

wants() { [[ " $wanted_servers " == *" $1 "* ]]; }
servers=""
declare -A pid_of port_of
port_of=([kas]=$kas_port [before]=$((kas_port + 3)) [kaslog]=$kaslog_port [nginx]=$nginx_port [node]=$node_port [floor]=$floor_port
  [kas-deferred]=$((kas_port + 1)) [nginx-deferred]=$((nginx_port + 1)))
deferred=$([[ " $scenarios " == *" close-deferred "* ]] && echo yes || true)

if wants kas; then
  ./target/release/keepalive-server --workers 1 --listen "127.0.0.1:$kas_port" \
    --keep-alive-timeout 65s >"$work/kas.log" 2>&1 &
  pids+=($!); pid_of[kas]=$!; servers+=" kas"
  if [ -n "${BASELINE:-}" ]; then
    "$BASELINE" --workers 1 --listen "127.0.0.1:${port_of[before]}" \
      --keep-alive-timeout 65s >"$work/before.log" 2>&1 &
    pids+=($!); pid_of[before]=$!; servers+=" before"
  fi
  if [ "${ACCESS_LOG:-0}" = 1 ]; then
    ./target/release/keepalive-server --workers 1 --listen "127.0.0.1:$kaslog_port" \
      --keep-alive-timeout 65s --access-log "$work/access.log" >"$work/kaslog.log" 2>&1 &
    pids+=($!); pid_of[kaslog]=$!; servers+=" kaslog"
  fi
  if [ -n "$deferred" ]; then
    ./target/release/keepalive-server --workers 1 --listen "127.0.0.1:${port_of[kas-deferred]}" \
      --keep-alive-timeout 65s --defer-accept >"$work/kas-deferred.log" 2>&1 &
    pids+=($!); pid_of[kas-deferred]=$!
  fi
fi

if wants nginx && command -v nginx >/dev/null; then
  pid_of[nginx]=$(start_nginx "$work" "$nginx_port")
  servers+=" nginx"
  if [ -n "$deferred" ]; then
    mkdir -p "$work/deferred"
    pid_of[nginx-deferred]=$(start_nginx "$work/deferred" "${port_of[nginx-deferred]}" deferred)
  fi
elif wants nginx; then
  echo "(nginx not installed: left out)" >&2
fi

if wants node && command -v node >/dev/null; then
  node scripts/node-hello.js "$node_port" >"$work/node.log" 2>&1 &
  pids+=($!); pid_of[node]=$!; servers+=" node"
elif wants node; then
  echo "(node not installed: left out)" >&2
fi

if wants floor; then
  ./target/release/examples/floor "127.0.0.1:$floor_port" >/dev/null 2>&1 &
  pids+=($!); pid_of[floor]=$!; servers+=" floor"
fi
sleep 0.5

# Whether a server takes part in a scenario.
plays() {
  case $2 in
    close-deferred) [ "$1" = kas ] || [ "$1" = nginx ] ;;
    close) [ "$1" != floor ] ;;
    bytes-*) [ "$1" != floor ] ;;
    *) true ;;
  esac
}

run() { # server scenario -> "rps p50 p99 cpu_us_per_req errors"
  local server=$1 scenario=$2 pid=${pid_of[$1]} port=${port_of[$1]} path=/ args=() extra=()
  [ "$server" = kaslog ] && : >"$work/access.log"
  case $scenario in
    keepalive) ;;
    close) args=(-s scripts/wrk/close.lua) ;;
    close-deferred)
      args=(-s scripts/wrk/close.lua) pid=${pid_of[$server-deferred]} port=${port_of[$server-deferred]} ;;
    pipeline) args=(-s scripts/wrk/pipeline.lua) extra=(-- 16) ;;
    http10) args=(-s scripts/wrk/http10.lua) ;;
    bytes-1k) path=/bytes/1024 ;;
    bytes-16k) path=/bytes/16384 ;;
    bytes-64k) path=/bytes/65536 ;;
    bytes-256k) path=/bytes/262144 ;;
    bytes-1m) path=/bytes/1048576 ;;
  esac
  wrk_run "$pid" -t1 -c"$connections" -d"$duration" --latency "${args[@]}" "http://127.0.0.1:$port$path" "${extra[@]}"
}

# Warm-up (not measured): Node's JIT, the servers' pools and caches.
for server in $servers; do
  wrk -t1 -c"$connections" -d1s "http://127.0.0.1:${port_of[$server]}/" >/dev/null 2>&1 || true
done

echo "\`scripts/loadtest.sh $rounds $duration $connections\`: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, wrk -t1 -c$connections -d$duration, $rounds alternating rounds, medians; errors: socket errors and non-2xx, summed over rounds"
echo
echo "| scenario | server | req/s | p50 ms | p99 ms | CPU µs/req | ctx sw/req | wrk CPU % | errors |"
echo "|---|---|---|---|---|---|---|---|---|"
for scenario in $scenarios; do
  declare -A results=()
  for round in $(seq "$rounds"); do
    for server in $servers; do
      plays "$server" "$scenario" || continue
      results[$server]+="$(run "$server" "$scenario")"$'\n'
    done
  done
  for server in $servers; do
    plays "$server" "$scenario" || continue
    rows=${results[$server]}
    printf "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s |\n" "$scenario" "$server" \
      "$(awk '{print $1}' <<<"$rows" | median)" "$(awk '{print $2}' <<<"$rows" | median)" \
      "$(awk '{print $3}' <<<"$rows" | median)" "$(awk '{print $4}' <<<"$rows" | median)" \
      "$(awk '{print $6}' <<<"$rows" | median)" "$(awk '{print $7}' <<<"$rows" | median)" \
      "$(awk '{s += $5} END {print s}' <<<"$rows")"
  done
  unset results
done
