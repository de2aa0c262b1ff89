#!/usr/bin/env bash
# Keep-alive throughput and tail latency as the number of connections grows:
# wrk against keepalive-server and nginx (and Node's http server when
# SERVERS includes node) at 100, 1k, 5k, 10k and 19k keep-alive connections,
# one worker each, alternating between the servers, medians over the
# rounds. Writes a CSV (server,connections,rps,p50_ms,p99_ms,errors,
# cpu_us_per_req,wrk_cpu_pct) and prints it as a Markdown table with
# `scripts/charts.py scale`, which also draws docs/scale-rps.svg and
# docs/scale-p99.svg.
#
# Usage: scripts/scale.sh [rounds] [duration]   (defaults: 3 rounds, 10s)
#   Env: CONNS="100 1000 5000 10000 19000", SERVERS="kas nginx",
#   CSV (target/scale.csv), PORT_BASE (18560), OUT (docs).
#   Needs wrk and a descriptor limit above the largest count (20,000 here).

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

rounds=${1:-3}
duration=${2:-10s}
conns=${CONNS:-100 1000 5000 10000 19000}
wanted_servers=${SERVERS:-kas nginx}
csv=${CSV:-target/scale.csv}
port_base=${PORT_BASE:-18560}
declare -A pid_of port_of
port_of=([kas]=$port_base [nginx]=$((port_base + 1)) [node]=$((port_base + 2)))

command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
python3 -c 'import matplotlib' 2>/dev/null \
  || { echo "scripts/charts.py draws with matplotlib: pip install matplotlib" >&2; exit 1; }
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cargo build --release --quiet --bin keepalive-server
work=$(mktemp -d)
pids=()
trap stop_servers EXIT

servers=""
for server in $wanted_servers; do
  case $server in
    kas)
      ./target/release/keepalive-server --workers 1 --listen "127.0.0.1:${port_of[kas]}" >"$work/kas.log" 2>&1 &
      pids+=($!); pid_of[kas]=$! ;;
    nginx)
      command -v nginx >/dev/null || { echo "(nginx not installed: left out)" >&2; continue; }
      pid_of[nginx]=$(start_nginx "$work" "${port_of[nginx]}") ;;
    node)
      command -v node >/dev/null || { echo "(node not installed: left out)" >&2; continue; }
      node scripts/node-hello.js "${port_of[node]}" >"$work/node.log" 2>&1 &
      pids+=($!); pid_of[node]=$! ;;
    *) echo "unknown server $server" >&2; exit 2 ;;
  esac
  servers+=" $server"
done
sleep 0.5

mkdir -p "$(dirname "$csv")"
echo "server,connections,rps,p50_ms,p99_ms,errors,cpu_us_per_req,wrk_cpu_pct" >"$csv"
for n in $conns; do
  declare -A results=()
  for round in $(seq "$rounds"); do
    for server in $servers; do
      results[$server]+="$(wrk_run "${pid_of[$server]}" -t1 -c"$n" -d"$duration" --timeout 10s --latency \
        "http://127.0.0.1:${port_of[$server]}/")"$'\n'
      sleep 1 # let closed connections clear
    done
  done
  for server in $servers; do
    rows=${results[$server]}
    echo "$server,$n,$(awk '{print $1}' <<<"$rows" | median),$(awk '{print $2}' <<<"$rows" | median),$(awk '{print $3}' <<<"$rows" | median),$(awk '{s += $5} END {print s}' <<<"$rows"),$(awk '{print $4}' <<<"$rows" | median),$(awk '{print $7}' <<<"$rows" | median)" >>"$csv"
  done
  unset results
done
echo "\`scripts/scale.sh $rounds $duration\`: $(date -u +%Y-%m-%dT%H:%MZ), wrk -t1 -d$duration --timeout 10s, one worker each, $rounds alternating rounds, medians; errors summed over rounds"
echo
scripts/charts.py scale "$csv" --out "${OUT:-docs}"
