#!/usr/bin/env bash
# Upstream load test: the lab as a reverse proxy (`--upstream`) side by
# side with nginx's `proxy_pass`, both in front of the same nginx upstream
# (one worker, `Hello, World!` at `/`, files at `/bytes/<n>`), one worker
# each. nginx's front reuses its upstream connections as its documentation
# asks (config/nginx-upstream.conf: `keepalive 32`, `proxy_http_version
# 1.1`, `Connection ""`); ours pools them on its own.
#
# Scenarios: keepalive (wrk -c50 on `/`, `Hello, World!` through the
# proxy) and bytes-256k (a 256 KiB answer streamed through). The table
# gives medians over alternating rounds: requests/s, latency p50/p99, the
# *front's* CPU time (user+sys, all threads) per request, and errors.
# "ratio" is the lab's CPU per request over nginx's, the figure issue 39
# asks for (≤ 0.80 keep-alive, ≤ 0.90 for 256 KiB).
#
# Usage: scripts/upstream-loadtest.sh [rounds] [duration] [connections]
#   defaults: 5 rounds, 3s, 50 connections. Needs wrk and nginx.
#   Env: SCENARIOS="keepalive bytes-256k"; PORT_BASE (default 18560): the
#   servers listen on PORT_BASE..+3. BIN=PATH measures another
#   keepalive-server binary (default target/release/keepalive-server,
#   built first). BASELINE=PATH adds "before": another binary as a third
#   front, measured in the same rounds, for before/after ratios.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

rounds=${1:-5}
duration=${2:-3s}
connections=${3:-50}
scenarios=${SCENARIOS:-keepalive bytes-256k}
port_base=${PORT_BASE:-18560}
upstream_port=$port_base
kas_port=$((port_base + 1))
nginx_port=$((port_base + 2))

command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
command -v nginx >/dev/null || { echo "nginx not found: apt-get install nginx" >&2; exit 1; }
ulimit -n 20000 2>/dev/null || true

if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet --bin keepalive-server
  BIN=./target/release/keepalive-server
fi
work=$(mktemp -d)
chmod 755 "$work" # nginx's worker runs as an unprivileged user
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pidfile in "$work/upstream/nginx.pid" "$work/front/nginx.pid"; do
    kill "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# The upstream both fronts share.
mkdir -p "$work/upstream" "$work/front"
start_nginx "$work/upstream" "$upstream_port" >/dev/null

# nginx's proxy_pass front, one worker, its documented upstream pool.
nginx_proxy_conf "$work/front" "$upstream_port" "$nginx_port" 60s 32 1 error
nginx -p "$work/front" -c "$work/front/nginx.conf" &
pids+=($!)

# The lab's front, one worker.
"$BIN" --workers 1 --listen "127.0.0.1:$kas_port" --keep-alive-timeout 65s \
  --upstream "http://127.0.0.1:$upstream_port" >"$work/kas.log" 2>&1 &
pids+=($!)
kas_pid=$!
fronts="kas nginx"
if [ -n "${BASELINE:-}" ]; then
  "$BASELINE" --workers 1 --listen "127.0.0.1:$((port_base + 3))" --keep-alive-timeout 65s \
    --upstream "http://127.0.0.1:$upstream_port" >"$work/before.log" 2>&1 &
  pids+=($!)
  fronts="kas before nginx"
fi
sleep 0.5
nginx_pid=$(pgrep -P "$(cat "$work/front/nginx.pid")" | head -1)
declare -A pid_of=([kas]=$kas_pid [nginx]=$nginx_pid) port_of=([kas]=$kas_port [nginx]=$nginx_port)
if [ -n "${BASELINE:-}" ]; then pid_of[before]=${pids[-1]} port_of[before]=$((port_base + 3)); fi

for server in $fronts; do
  body=$(curl -sf "http://127.0.0.1:${port_of[$server]}/") || { echo "$server: no answer through the proxy" >&2; cat "$work/kas.log" >&2; exit 1; }
  [ "$body" = "Hello, World!" ] || { echo "$server answered: $body" >&2; exit 1; }
  wrk -t1 -c"$connections" -d1s "http://127.0.0.1:${port_of[$server]}/" >/dev/null 2>&1 || true
done

run() { # server scenario -> "rps p50 p99 cpu_us_per_req errors ..."
  local server=$1 path=/
  case $2 in
    keepalive) ;;
    bytes-256k) path=/bytes/262144 ;;
    *) echo "unknown scenario $2" >&2; exit 2 ;;
  esac
  wrk_run "${pid_of[$server]}" -t1 -c"$connections" -d"$duration" --latency "http://127.0.0.1:${port_of[$server]}$path"
}

echo "\`scripts/upstream-loadtest.sh $rounds $duration $connections\`: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, wrk -t1 -c$connections -d$duration, both fronts in front of one nginx upstream, $rounds alternating rounds, medians; CPU is the front's alone"
echo
echo "| scenario | front | req/s | p50 ms | p99 ms | CPU µs/req | errors | CPU ratio to nginx |"
echo "|---|---|---|---|---|---|---|---|"
for scenario in $scenarios; do
  declare -A results=()
  for _ in $(seq "$rounds"); do
    for server in $fronts; do
      results[$server]+="$(run "$server" "$scenario")"$'\n'
    done
  done
  nginx_cpu=$(awk '{print $4}' <<<"${results[nginx]}" | median)
  ratio_of() { # a lab front's CPU per request over nginx's
    [ "$1" = nginx ] && return
    awk -v k="$(awk '{print $4}' <<<"${results[$1]}" | median)" -v n="$nginx_cpu" 'BEGIN { printf "%.2f", n ? k / n : 0 }'
  }
  for server in $fronts; do
    rows=${results[$server]}
    printf "| %s | %s | %.0f | %s | %s | %s | %s | %s |\n" "$scenario" "$server" \
      "$(awk '{print $1}' <<<"$rows" | median)" "$(awk '{print $2}' <<<"$rows" | median)" \
      "$(awk '{print $3}' <<<"$rows" | median)" "$(awk '{print $4}' <<<"$rows" | median)" \
      "$(awk '{s += $5} END {print s}' <<<"$rows")" "$(ratio_of "$server")"
  done
  unset results
done
