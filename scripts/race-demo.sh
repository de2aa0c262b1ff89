#!/usr/bin/env bash
# The keep-alive race behind a proxy, as docs/lab.md ("A walkthrough
# with nginx in front") walks through it: nginx in front of keepalive-server,
# first misconfigured (nginx keeps idle upstream connections longer than
# the server does), then fixed. Each round sends POSTs through nginx (which
# it does not retry) from a few clients that pause just about the server's
# idle timeout between requests, counts the 502s, and prints what the
# server's /peers says about nginx (one peer: 127.0.0.1).
#
# Usage: scripts/race-demo.sh            Needs nginx and python3.
#   Env: SECONDS_PER_ROUND (20), CLIENTS (16), PORT_BASE (18300).

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
command -v nginx >/dev/null || { echo "needs nginx (apt-get install nginx)" >&2; exit 2; }

rounds_seconds=${SECONDS_PER_ROUND:-20}
clients=${CLIENTS:-16}
base=${PORT_BASE:-18300}
server_port=$base admin_port=$((base + 1)) proxy_port=$((base + 2))
prefix=$(mktemp -d)
cargo build --release --quiet --bin keepalive-server
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$prefix"; }
trap cleanup EXIT

wait_for_port() {
  for _ in $(seq 100); do
    (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on $1" >&2
  exit 1
}

# One round: nginx keeps idle upstream connections for $1; the server
# closes them at 2 s (advertising 2 s, no buffer).
round() {
  local upstream_timeout=$1
  target/release/keepalive-server --listen "127.0.0.1:$server_port" \
    --admin "127.0.0.1:$admin_port" --keep-alive-timeout 2s --keep-alive-buffer 0s \
    --workers 1 >"$prefix/server.log" 2>&1 &
  local server=$!
  pids+=("$server")
  nginx_proxy_conf "$prefix" "$server_port" "$proxy_port" "$upstream_timeout" 32 1 error
  nginx -p "$prefix" -c "$prefix/nginx.conf" &
  local proxy=$!
  pids+=("$proxy")
  wait_for_port "$server_port"
  wait_for_port "$admin_port"
  wait_for_port "$proxy_port"

  echo "== nginx upstream keepalive_timeout $upstream_timeout; server --keep-alive-timeout 2s --keep-alive-buffer 0s"
  python3 - "$proxy_port" "$clients" "$rounds_seconds" <<'PY'
import http.client, random, sys, threading, time
port, clients, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
counts = {"ok": 0, "502": 0, "other": 0}
lock = threading.Lock()
def client():
    end = time.time() + seconds
    while time.time() < end:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("POST", "/", body=b"x")
            status = conn.getresponse().status
        except OSError:
            status = None
        finally:
            conn.close()
        key = "ok" if status == 200 else "502" if status == 502 else "other"
        with lock:
            counts[key] += 1
        # Pause just about the server's idle timeout.
        time.sleep(random.uniform(1.990, 2.010))
threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
print(f"requests: {sum(counts.values())}, 200: {counts['ok']}, 502: {counts['502']}, other: {counts['other']}")
PY
  echo "GET /peers:"
  python3 -c '
import json, sys, urllib.request
doc = json.load(urllib.request.urlopen(sys.argv[1]))
for peer in doc["peers"]:
    keep = ["addr", "connections", "requests", "client_idle_closes", "client_idle_timeout_ms",
            "server_idle_closes", "near_misses", "late_requests", "recent", "verdict",
            "safe_pool_idle_timeout_ms", "advice"]
    shown = {k: peer[k] for k in keep}
    shown["recent"] = {k: v for k, v in peer["recent"].items() if v}  # what is not 0
    print(json.dumps(shown, indent=2))
' "http://127.0.0.1:$admin_port/peers"
  kill "$proxy" "$server"
  wait "$proxy" "$server" 2>/dev/null || true
  echo
}

round 10s
round 1s
