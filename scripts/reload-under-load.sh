#!/usr/bin/env bash
# Reload under load: wrk against keepalive-server while SIGHUP reloads its
# config file every second, alternating the keep-alive timeout (and the
# other reloadable timeouts) between two values. Reports wrk's requests,
# socket errors and non-2xx responses (expected: 0 and 0), how many reloads
# the server logged as applied, and the Keep-Alive timeouts a probe saw.
#
# Usage: scripts/reload-under-load.sh [duration_s] [connections]
#   defaults: 20 s, 100 connections, 2 workers. Needs wrk and curl.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-20}
connections=${2:-100}
port=${PORT:-18520}

for tool in wrk curl; do
  command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install $tool" >&2; exit 2; }
done
cargo build --release --quiet --bin keepalive-server

work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

config() { # config KEEP_ALIVE TIMEOUT
  printf 'keep_alive_timeout = "%s"\ntimeout = "%s"\nheaders_timeout = "30s"\n' "$1" "$2" >"$work/server.toml"
}
config 60s 120s
./target/release/keepalive-server --workers 2 --listen "127.0.0.1:$port" \
  --config "$work/server.toml" 2>"$work/server.log" &
server_pid=$!
until curl -sf "http://127.0.0.1:$port/" >/dev/null; do sleep 0.1; done

wrk -t2 -c"$connections" -d"${duration}s" "http://127.0.0.1:$port/" >"$work/wrk.txt" 2>&1 &
wrk_pid=$!
reloads=0
seen=""
sleep 1
while kill -0 "$wrk_pid" 2>/dev/null; do
  if ((reloads % 2)); then config 60s 120s; else config 30s 90s; fi
  kill -HUP "$server_pid"
  reloads=$((reloads + 1))
  sleep 1
  seen+=" $(curl -sI "http://127.0.0.1:$port/" | awk -F': ' 'tolower($1) == "keep-alive" { gsub(/\r/, ""); print $2 }' | head -1)"
done
wait "$wrk_pid" || true

requests=$(awk '/requests in/ { print $1 }' "$work/wrk.txt")
socket_errors=$(awk '/Socket errors/ { gsub(",", ""); print $4 + $6 + $8 + $10; found = 1 } END { if (!found) print 0 }' "$work/wrk.txt")
non2xx=$(awk -F': *' '/Non-2xx or 3xx responses/ { print $2; found = 1 } END { if (!found) print 0 }' "$work/wrk.txt")
applied=$(grep -c "reloaded:" "$work/server.log" || true)
failed=$(grep -c "reload failed" "$work/server.log" || true)
echo "wrk -t2 -c$connections -d${duration}s, 2 workers, SIGHUP every second"
echo "requests: $requests; socket errors: $socket_errors; non-2xx: $non2xx"
echo "reloads sent: $reloads; applied: $applied; failed: $failed"
echo "Keep-Alive seen after each reload:$seen"
((socket_errors == 0 && non2xx == 0 && failed == 0))
