#!/usr/bin/env bash
# Idle connections at several counts: RSS per idle keep-alive connection and
# close lateness (how long after its keep-alive timeout each connection was
# closed; never early), one scripts/soak.sh run per count, plain HTTP and
# then TLS (server "kas-tls": TLS=1 scripts/soak.sh), each drawing its
# lateness histogram (log-scale count axis) to
# docs/soak-N-TIMEOUT-batchB[-tls].svg. Writes a CSV (server,connections,
# batch,bytes_per_conn,closed,early, lateness min/p50/p99/max ms) and prints
# it as Markdown tables (a column per server), with the memory chart
# docs/idle-memory.svg (scripts/charts.py idle).
#
# Usage: scripts/idle-sweep.sh [timeout]        (default 5s)
#   Env: COUNTS="1000 10000 19000", BATCH (200), CSV (target/idle.csv),
#   OUT (docs), PIN (1: server on CPU 0, client on CPU 1, see soak.sh; 0 to
#   let them share cores), TLS (1: also over TLS; 0: plain only). The client
#   and the server each hold N descriptors.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."

timeout=${1:-5s}
counts=${COUNTS:-1000 10000 19000}
batch=${BATCH:-200}
pin=${PIN:-1}
csv=${CSV:-target/idle.csv}
out=${OUT:-docs}
python3 -c 'import matplotlib' 2>/dev/null \
  || { echo "scripts/charts.py draws with matplotlib: pip install matplotlib" >&2; exit 1; }
mkdir -p "$(dirname "$csv")" "$out"
echo "server,connections,batch,bytes_per_conn,closed,early,min_ms,p50_ms,p99_ms,max_ms" >"$csv"
modes="plain"
[ "${TLS:-1}" = 1 ] && modes="plain tls"
for n in $counts; do
  for mode in $modes; do
    server=kas suffix=""
    [ "$mode" = tls ] && server=kas-tls suffix=-tls
    json=$(TLS=$([ "$mode" = tls ] && echo 1 || echo 0) PIN=$pin JSON=1 BATCH=$batch \
      SVG="$out/soak-$n-$timeout-batch$batch$suffix.svg" scripts/soak.sh "$n" "$timeout")
    python3 - "$json" "$batch" "$server" >>"$csv" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
l = r["lateness_ms"]
print(f'{sys.argv[3]},{r["connections"]},{sys.argv[2]},{r["rss_bytes_per_idle_connection"]:.1f},{r["closed"]},{r["early"]},'
      f'{l["min"]},{l["p50"]},{l["p99"]},{l["max"]}')
PY
  done
done
echo "\`scripts/idle-sweep.sh $timeout\` (BATCH=$batch): $(date -u +%Y-%m-%dT%H:%MZ), scripts/soak.sh per count, PIN=$pin, --workers 1 --keep-alive-buffer 0s"
echo
scripts/charts.py idle "$csv" --out "$out"
echo
echo "| server | connections | batch | closed | early | lateness min / p50 / p99 / max (ms) |"
echo "|---|---|---|---|---|---|"
tail -n +2 "$csv" | while IFS=, read -r server n b _ closed early min p50 p99 max; do
  echo "| $server | $n | $b | $closed/$n | $early | $min / $p50 / $p99 / $max |"
done
