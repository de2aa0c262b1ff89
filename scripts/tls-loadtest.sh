#!/usr/bin/env bash
# Load test over TLS: wrk against keepalive-server (--tls-cert/--tls-key,
# rustls with the ring provider) and nginx (OpenSSL; scripts/lib.sh's
# start_nginx with TLS_CERT and TLS_KEY), one worker each, the
# same ECDSA P-256 certificate, TLS 1.3 only, both following the client's
# cipher order (wrk's OpenSSL puts TLS_AES_256_GCM_SHA384 first, so both
# negotiate it, with X25519; the script prints what each negotiated).
# Scenarios: keepalive (many requests per handshake), close
# (`Connection: close`: a full handshake per request; wrk keeps no
# session, so nothing is resumed) and bytes-256k (`/bytes/262144` on
# keep-alive connections: nginx serves a 256 KiB file, which over TLS it
# reads and encrypts, as we encrypt our filler). Runs alternate between the servers;
# the table shows medians over the rounds and the CPU ratio of ours to
# nginx's in the same run.
#
# Usage: scripts/tls-loadtest.sh [rounds] [duration] [connections]
#   defaults: 5 rounds, 3s, 50 connections, wrk -t1. Needs wrk, nginx with
#   http_ssl_module and openssl (apt-get install wrk nginx openssl).
#   Env: PORT_BASE (default 18560; the servers listen on PORT_BASE..+2);
#   SCENARIOS (default "keepalive close bytes-256k").
#   BASELINE=PATH adds "before": another keepalive-server binary (e.g. one
#   built from main) with the same certificate, measured in the same
#   rounds, for before/after ratios.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

rounds=${1:-5}
duration=${2:-3s}
connections=${3:-50}
port_base=${PORT_BASE:-18560}
scenarios=${SCENARIOS:-keepalive close bytes-256k}
kas_port=$port_base
nginx_port=$((port_base + 1))
before_port=$((port_base + 2))

for tool in wrk nginx openssl; do
  command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install $tool" >&2; exit 1; }
done
ulimit -n 20000 2>/dev/null || true

cargo build --release --quiet --bin keepalive-server
work=$(mktemp -d)
pids=()
trap stop_servers EXIT

# The README's one command for a self-signed certificate.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -addext basicConstraints=critical,CA:FALSE \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

declare -A pid_of port_of
port_of=([kas]=$kas_port [nginx]=$nginx_port [before]=$before_port)
servers="kas"
# Starts keepalive-server binary $2 as server $1, over TLS.
start_kas() {
  "$2" --workers 1 --listen "127.0.0.1:${port_of[$1]}" --keep-alive-timeout 65s \
    --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" >"$work/$1.log" 2>&1 &
  pids+=($!)
  pid_of[$1]=$!
}
start_kas kas ./target/release/keepalive-server
if [ -n "${BASELINE:-}" ]; then
  start_kas before "$BASELINE"
  servers+=" before"
fi
servers+=" nginx"

pid_of[nginx]=$(TLS_CERT=$work/cert.pem TLS_KEY=$work/key.pem start_nginx "$work" "$nginx_port")

negotiated() {
  openssl s_client -connect "127.0.0.1:$1" -servername localhost </dev/null 2>/dev/null |
    awk '/^New, / { v = $2 } /Cipher is/ { c = $NF } /Server Temp Key/ { k = $4; sub(",", "", k) } END { printf "%s %s %s", v, c, k }'
}

run() { # server scenario -> wrk_run's fields
  local args=() path=/
  case $2 in
    close) args=(-s scripts/wrk/close.lua) ;;
    bytes-256k) path=/bytes/262144 ;;
  esac
  wrk_run "${pid_of[$1]}" -t1 -c"$connections" -d"$duration" --latency "${args[@]}" "https://127.0.0.1:${port_of[$1]}$path"
}

for server in $servers; do
  wrk -t1 -c"$connections" -d1s "https://127.0.0.1:${port_of[$server]}/" >/dev/null 2>&1 || true
done

echo "\`scripts/tls-loadtest.sh $rounds $duration $connections\`: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, wrk -t1 -c$connections -d$duration over https, $rounds alternating rounds, medians; ours: $(negotiated "$kas_port");${BASELINE:+ before: $(negotiated "$before_port");} nginx $(nginx -v 2>&1 | sed 's/.*\///'): $(negotiated "$nginx_port")"
echo
echo "| scenario | server | req/s | p50 ms | p99 ms | CPU µs/req | ctx sw/req | wrk CPU % | errors | CPU vs nginx |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for scenario in $scenarios; do
  declare -A results=()
  for round in $(seq "$rounds"); do
    for server in $servers; do
      results[$server]+="$(run "$server" "$scenario")"$'\n'
    done
  done
  declare -A cpu=()
  for server in $servers; do
    cpu[$server]=$(awk '{print $4}' <<<"${results[$server]}" | median)
  done
  for server in $servers; do
    rows=${results[$server]}
    printf "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s |\n" "$scenario" "$server" \
      "$(awk '{print $1}' <<<"$rows" | median)" "$(awk '{print $2}' <<<"$rows" | median)" \
      "$(awk '{print $3}' <<<"$rows" | median)" "${cpu[$server]}" \
      "$(awk '{print $6}' <<<"$rows" | median)" "$(awk '{print $7}' <<<"$rows" | median)" \
      "$(awk '{s += $5} END {print s}' <<<"$rows")" \
      "$(awk -v a="${cpu[$server]}" -v b="${cpu[nginx]}" 'BEGIN { printf "%.2f×", b ? a / b : 0 }')"
  done
  unset results cpu
done
