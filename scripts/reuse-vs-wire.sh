#!/usr/bin/env bash
# The lab's `reuses_past_advertised` against what the wire shows. Starts
# the server (keep-alive 2s, advertised as timeout=2, the default 1s of
# grace) with one worker and its admin listener, has CLIENTS keep-alive
# connections each send ROUNDS requests, each one AIM after the previous
# response (uniformly in that range of seconds; Python's sleep overshoots
# by ~0.3 ms here, so the wire sees the gaps around 2 s), while tcpdump
# captures loopback; then
# prints how many reuses came more than 2 s after the response on the wire
# (the server's last data segment to the client's request segment) beside
# the count /peers gives.
#
# Usage: sudo scripts/reuse-vs-wire.sh [CLIENTS] [ROUNDS]   (16 and 30)
#   BIN=path/to/keepalive-server to try another build; PORT (21700);
#   AIM ("1.9994 1.9999"); HOG=1 pins the server to CPU 0 beside a busy
#   loop, so its wake-ups come late, as on a shared core.
#   Needs tcpdump and python3.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-16} rounds=${2:-30} port=${PORT:-21700} aim=${AIM:-1.9994 1.9999}
admin=$((port + 1))
command -v tcpdump >/dev/null || { echo "tcpdump not found: apt-get install tcpdump" >&2; exit 1; }
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet --bin keepalive-server
    BIN=target/release/keepalive-server
fi
work=$(mktemp -d)
hog=
trap 'kill "$server" "$dump" $hog 2>/dev/null || true; rm -rf "$work"' EXIT
pin=()
if [ "${HOG:-0}" = 1 ]; then
    taskset -c 0 bash -c 'while :; do :; done' &
    hog=$!
    pin=(taskset -c 0)
fi
"${pin[@]}" "$BIN" --listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" --workers 1 \
    --keep-alive-timeout 2s 2>"$work/server.err" &
server=$!
tcpdump -i lo -n -tt -l -B 16384 "tcp port $port" >"$work/wire.txt" 2>"$work/tcpdump.err" &
dump=$!
sleep 1
python3 - "$port" "$clients" "$rounds" $aim <<'PY'
import random, socket, sys, threading, time
port, clients, rounds = (int(a) for a in sys.argv[1:4])
low, high = (float(a) for a in sys.argv[4:6])
def client():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(rounds + 1):
        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nUser-Agent: reuse-vs-wire\r\n\r\n")
        got = b""
        while not got.endswith(b"Hello, World!"):
            chunk = s.recv(4096)
            if not chunk:
                sys.exit("the server closed a connection")
            got += chunk
        answered = time.monotonic()
        time.sleep(max(0.0, answered + random.uniform(low, high) - time.monotonic()))
    s.close()
threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads:
    t.start()
    time.sleep(2.0 / clients)
for t in threads:
    t.join()
PY
sleep 0.5
kill "$dump"
wait "$dump" 2>/dev/null || true
curl -s "http://127.0.0.1:$admin/peers" >"$work/peers.json"
python3 - "$work/wire.txt" "$work/peers.json" "$port" <<'PY'
import json, re, sys
port = sys.argv[3]
last_response, past, reuses = {}, 0, 0
for line in open(sys.argv[1]):
    m = re.match(r"(\d+\.\d+) IP [\d.]+\.(\d+) > [\d.]+\.(\d+): Flags \[[^\]]*\].* length (\d+)", line)
    if not m or int(m[4]) == 0:
        continue
    t, src, dst = float(m[1]), m[2], m[3]
    if src == port:
        last_response[dst] = t
    elif src in last_response:
        reuses += 1
        past += t - last_response.pop(src) > 2.0
peers = json.load(open(sys.argv[2]))
counted = sum(p["reuses_past_advertised"] for p in peers["peers"])
print(f"reuses on the wire: {reuses}; past 2 s on the wire: {past}; "
      f"reuses_past_advertised in /peers: {counted}")
PY
