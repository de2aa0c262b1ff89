#!/usr/bin/env bash
# CPU per keep-alive request of two keepalive-server binaries, A/B in
# alternating rounds: the server pinned to CPU 0, wrk (-t1 -c100) to CPU 1,
# a 2 s warm-up and a 5 s measured run each, CPU from /proc/PID/stat
# (user + system, all threads) over the requests wrk counted. Prints each
# run, then the medians and their ratio (B over A).
#
# Usage: scripts/ab-cpu.sh ROUNDS BIN_A BIN_B   (needs wrk and taskset)
#   e.g. a binary built from main as A, the branch's as B.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: scripts/ab-cpu.sh ROUNDS BIN_A BIN_B (--help for more)" >&2; exit 2; }
rounds=$1 a=$2 b=$3
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
tick=$(getconf CLK_TCK)
results=$(mktemp)
trap 'rm -f "$results"' EXIT

run() {
  local label=$1 bin=$2 port=$3
  taskset -c 0 "$bin" --listen "127.0.0.1:$port" --workers 1 2>/dev/null &
  local pid=$!
  for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  taskset -c 1 wrk -t1 -c100 -d2s "http://127.0.0.1:$port/" >/dev/null 2>&1
  local before after requests
  before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  requests=$(taskset -c 1 wrk -t1 -c100 -d5s "http://127.0.0.1:$port/" | awk '/requests in/ {print $1}')
  after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  local us
  us=$(awk -v t="$((after - before))" -v hz="$tick" -v n="$requests" 'BEGIN { printf "%.3f", t / hz / n * 1e6 }')
  echo "$label $us"
  echo "$label $us" >>"$results"
}

for _ in $(seq "$rounds"); do
  run A "$a" 18711
  run B "$b" 18712
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
a = statistics.median(float(r[1]) for r in rows if r[0] == "A")
b = statistics.median(float(r[1]) for r in rows if r[0] == "B")
print(f"median CPU µs/request: A {a:.3f}, B {b:.3f}, B/A {b / a:.3f}")
PY
