#!/usr/bin/env bash
# Idle keep-alive soak: opens N keep-alive connections to a freshly started
# keepalive-server (one `GET /` each), then reports the server's RSS growth
# per idle connection and how late past the idle timeout each one was closed
# (never early), and draws the lateness histogram to target/soak.svg.
#
# Usage: scripts/soak.sh [N] [KEEP_ALIVE_TIMEOUT] [-- EXTRA_SERVER_ARGS...]
#   N                   connections (default 2000)
#   KEEP_ALIVE_TIMEOUT  server --keep-alive-timeout (default 1s); the server
#                       runs with --keep-alive-buffer $BUFFER (default 0s) and
#                       the close is expected at TIMEOUT + BUFFER
#   EXTRA_SERVER_ARGS   appended to the server's args (default: --workers 1)
# Environment: ADDR (127.0.0.1:18099), BUFFER (0s), BATCH (200), GRACE (5s),
#   SVG (target/soak.svg), JSON=1 for a JSON report, IDLE_CHECK (e.g. 10s:
#   also count server context switches while idle, before and after),
#   SERVER_LOG (server output file; default discarded), NOFILE (20000),
#   TLS=1 to soak over TLS (kas-soak --tls; the server gets a fresh
#   self-signed ECDSA P-256 certificate, the README's openssl command),
#   PIN=1 to pin the server to CPU 0 and the client to CPU 1 (taskset): on a
#   small machine the two otherwise share cores, and the client's own
#   wake-ups then make up most of the measured lateness tail.
# Examples:
#   scripts/soak.sh                                  # 2000 conns, 1s timeout
#   scripts/soak.sh 10000 2s                         # 10k conns, 2s timeout
#   IDLE_CHECK=10s scripts/soak.sh 2000 1s -- --workers 2
# Exit status: 0 ok, 2 when a connection closed early, failed or never closed.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail

cd "$(dirname "$0")/.."
N="${1:-2000}"
TIMEOUT="${2:-1s}"
shift $(( $# < 2 ? $# : 2 ))
if [[ "${1:-}" == "--" ]]; then shift; fi
if [[ $# -gt 0 ]]; then EXTRA=("$@"); else EXTRA=(--workers 1); fi
ADDR="${ADDR:-127.0.0.1:18099}"
BUFFER="${BUFFER:-0s}"
BATCH="${BATCH:-200}"
GRACE="${GRACE:-5s}"
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
SVG="${SVG:-$TARGET_DIR/soak.svg}"

cargo build --release --bins --quiet

# Client and server (a child of the tool) each hold N descriptors.
ulimit -n "${NOFILE:-20000}" 2>/dev/null || ulimit -n "$(ulimit -Hn)"

TOOL_ARGS=(--addr "$ADDR" -n "$N" --batch "$BATCH" --expect-timeout "$TIMEOUT $BUFFER"
  --grace "$GRACE" --svg "$SVG")
[[ "${JSON:-0}" == 1 ]] && TOOL_ARGS+=(--json)
[[ -n "${IDLE_CHECK:-}" ]] && TOOL_ARGS+=(--idle-check "$IDLE_CHECK")
[[ -n "${SERVER_LOG:-}" ]] && TOOL_ARGS+=(--server-log "$SERVER_LOG")

if [[ "${TLS:-0}" == 1 ]]; then
  command -v openssl >/dev/null || { echo "TLS=1 needs openssl" >&2; exit 1; }
  certs=$(mktemp -d)
  trap 'rm -rf "$certs"' EXIT
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -addext basicConstraints=critical,CA:FALSE \
    -keyout "$certs/key.pem" -out "$certs/cert.pem" 2>/dev/null
  TOOL_ARGS+=(--tls)
  EXTRA+=(--tls-cert "$certs/cert.pem" --tls-key "$certs/key.pem")
fi

CLIENT=("$TARGET_DIR/release/kas-soak")
SERVER=(--server-bin "$TARGET_DIR/release/keepalive-server" --)
if [[ "${PIN:-0}" == 1 ]]; then
  command -v taskset >/dev/null || { echo "PIN=1 needs taskset (util-linux)" >&2; exit 1; }
  CLIENT=(taskset -c 1 "${CLIENT[@]}")
  SERVER=(--server-bin "$(command -v taskset)" -- -c 0 "$TARGET_DIR/release/keepalive-server")
fi

status=0
"${CLIENT[@]}" "${TOOL_ARGS[@]}" "${SERVER[@]}" \
  --keep-alive-timeout "$TIMEOUT" --keep-alive-buffer "$BUFFER" "${EXTRA[@]}" || status=$?
[[ "${JSON:-0}" == 1 || $status == 1 ]] || echo "histogram: $SVG"
exit "$status"
