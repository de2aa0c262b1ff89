#!/usr/bin/env bash
# The probe's idle timeout against what the wire shows: runs
# `keepalive-server probe --json` on URL while tcpdump captures the
# server's segments on loopback, then prints, for the connections that sat
# idle, the time from the server's last data segment before the idle gap
# (the response) to its first segment after it (close_notify, or the FIN
# of a plain close), as min/median/max beside the probe's own figures.
#
# Usage: sudo scripts/probe-vs-wire.sh PORT URL [probe flags...]
#   e.g. scripts/probe-vs-wire.sh 8443 https://localhost:8443/ --cacert cert.pem
#   Needs tcpdump and python3; the server must be on 127.0.0.1:PORT.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/probe-vs-wire.sh PORT URL [probe flags...] (--help for more)" >&2; exit 2; }
cd "$(dirname "$0")/.."
port=$1 url=$2
shift 2
command -v tcpdump >/dev/null || { echo "tcpdump not found: apt-get install tcpdump" >&2; exit 1; }
cargo build --release --quiet --bin keepalive-server
work=$(mktemp -d)
trap 'kill "$dump" 2>/dev/null || true; rm -rf "$work"' EXIT
tcpdump -i lo -n -tt -l -B 16384 "tcp src port $port" >"$work/wire.txt" 2>"$work/tcpdump.err" &
dump=$!
sleep 1
./target/release/keepalive-server probe --json "$@" "$url" >"$work/probe.json"
sleep 0.5
kill "$dump"
wait "$dump" 2>/dev/null || true
python3 - "$work/wire.txt" "$work/probe.json" <<'PY'
import json, re, statistics, sys
segments = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\d+\.\d+) IP [\d.]+\.\d+ > [\d.]+\.(\d+): Flags \[([^\]]*)\].* length (\d+)", line)
    if m:
        t, port, flags, length = float(m[1]), m[2], m[3], int(m[4])
        segments.setdefault(port, []).append((t, flags, length))
idle = []
for port, segs in segments.items():
    data = [s for s in segs if s[2] > 0 or "F" in s[1]]
    for before, after in zip(data, data[1:]):
        if after[0] - before[0] > 0.5:
            idle.append((after[0] - before[0]) * 1e3)
            break
probe = json.load(open(sys.argv[2]))["idle_timeout_ms"]
if not idle or not probe:
    sys.exit("no idle closes seen on the wire or by the probe")
idle.sort()
wire = {"min": idle[0], "median": statistics.median(idle), "max": idle[-1]}
print(f"connections idle-closed on the wire: {len(idle)}")
for key in ("min", "median", "max"):
    print(f"{key:>6}: wire {wire[key]:9.2f} ms   probe {probe[key]:9.2f} ms   probe - wire {probe[key] - wire[key]:+6.2f} ms")
PY
