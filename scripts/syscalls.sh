#!/usr/bin/env bash
# System calls per one-request (`Connection: close`) connection, counted
# with `strace -c -f` on each server while wrk loads it: keepalive-server by
# default and with --defer-accept, nginx by default and with
# `listen ... deferred`. strace slows the servers down (the counts, not the
# times, are the point), so wrk runs at -c10 for a few seconds each.
# Prints a Markdown table: calls per connection, by system call.
#
# Usage: scripts/syscalls.sh [duration]   (default 3s)
#   Env: PORT_BASE (18660). Needs wrk and strace (apt-get install strace);
#   nginx optional.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

duration=${1:-3s}
port_base=${PORT_BASE:-18660}
command -v strace >/dev/null || { echo "strace not found: apt-get install strace" >&2; exit 1; }
cargo build --release --quiet --bin keepalive-server
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pidfile in "$work"/*/nginx.pid; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

declare -A pid_of port_of
servers=""
add() { servers+=" $1"; pid_of[$1]=$2; port_of[$1]=$3; }
./target/release/keepalive-server --workers 1 --listen "127.0.0.1:$port_base" >/dev/null 2>&1 &
pids+=($!); add kas $! "$port_base"
./target/release/keepalive-server --workers 1 --defer-accept --listen "127.0.0.1:$((port_base + 1))" >/dev/null 2>&1 &
pids+=($!); add kas-deferred $! $((port_base + 1))
if command -v nginx >/dev/null; then
  mkdir -p "$work/plain" "$work/deferred"
  add nginx "$(start_nginx "$work/plain" $((port_base + 2)))" $((port_base + 2))
  add nginx-deferred "$(start_nginx "$work/deferred" $((port_base + 3)) deferred)" $((port_base + 3))
fi
sleep 0.5

declare -A count
names=""
for server in $servers; do
  strace -c -f -p "${pid_of[$server]}" -o "$work/$server.strace" 2>/dev/null &
  tracer=$!
  sleep 0.5
  requests=$(wrk -t1 -c10 -d"$duration" -s scripts/wrk/close.lua "http://127.0.0.1:${port_of[$server]}/" |
    awk '/requests in/ {print $1}')
  kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
  while read -r calls name; do
    count[$server/$name]=$(awk -v c="$calls" -v r="$requests" 'BEGIN { printf "%.2f", c / r }')
    [[ " $names " == *" $name "* ]] || names+=" $name"
  done < <(awk '$NF ~ /^[a-z_0-9]+$/ && $NF != "total" && $(NF-1) ~ /^[0-9]+$/ {
      # columns: % seconds usecs/call calls [errors] syscall
      calls = ($(NF-2) ~ /^[0-9]+$/ && NF == 6) ? $(NF-2) : $(NF-1); print calls, $NF }' "$work/$server.strace")
done

echo "\`scripts/syscalls.sh $duration\`: $(date -u +%Y-%m-%dT%H:%MZ), strace -c -f on the server while wrk -t1 -c10 -s scripts/wrk/close.lua runs; calls per connection"
echo
printf "| system call |"; for s in $servers; do printf " %s |" "$s"; done; echo
printf "|---|"; for s in $servers; do printf -- "---|"; done; echo
for name in $names; do
  printf "| %s |" "$name"
  for s in $servers; do printf " %s |" "${count[$s/$name]:-0}"; done
  echo
done
printf "| **total** |"
for s in $servers; do
  printf " %s |" "$(for name in $names; do echo "${count[$s/$name]:-0}"; done | awk '{t += $1} END {printf "%.2f", t}')"
done
echo
