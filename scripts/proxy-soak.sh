#!/usr/bin/env bash
# Proxy soak: keepalive-server behind nginx (config/nginx-upstream.conf), load
# from wrk in rounds separated by idle gaps shorter and longer than the
# server's keep-alive timeout. Reports per round: requests, 502s (wrk's
# "Non-2xx or 3xx responses"), upstream errors nginx logged (lost races,
# even those nginx retried), new upstream connections and requests per
# upstream connection (from the server's /metrics).
#
# Two configurations run, each with a fresh server and nginx:
#   good: nginx upstream keepalive_timeout 1s < server 2s + 1s buffer
#         (nginx drops idle connections first: expect 0 502s, 0 errors)
#   bad:  nginx upstream keepalive_timeout 10s > server 2s + 0s buffer
#         (nginx may reuse a connection the server is closing: the race;
#         the sparse round showed 502s in 5 of 5 runs, 14 to 58 each)
#
# Usage: scripts/proxy-soak.sh
# Environment:
#   METHOD   GET or POST (default POST: nginx retries idempotent requests
#            that hit a closing connection, hiding the race from the client;
#            a POST is not retried, so a lost race shows up as a 502)
#   GAPS     idle gaps in seconds before each measured round, after a
#            warm-up round (default "0.5 2.5 4": shorter than, past, and well
#            past the server's 2s keep-alive timeout)
#   WRK      wrk arguments for one round (default "-t1 -c20 -d2s")
#   SPARSE_WRK, SPARSE_MS  a last, "sparse" round: wrk arguments (default
#            "-t1 -c256 -d20s") and the range of each connection's random
#            pause before each request, "MIN MAX" ms (default "1999 2001":
#            bursts that reuse upstream connections idle for about the
#            server's 2s keep-alive timeout, right where the race lives)
#   UPSTREAM_KEEPALIVE  idle upstream connections nginx caches (default 256,
#            as many as the sparse round's connections, so each request of
#            a burst reuses a cached connection: 256 chances at the race
#            every 2s; with 64 connections and nginx's usual 32, a run
#            showed the race only about 3 times in 4)
#   CONFIGS  which configurations to run (default "good bad")
#   SERVER_PORT (18180), PROXY_PORT (18188), ADMIN_PORT (19911)
#   NGINX_WORKERS (1)
#   KEEP_LOGS=1 keeps the nginx and server logs (the path is printed)
# Needs nginx, wrk and curl; installs nothing.
# Exit status: 0 when the good configuration saw no 502s, 1 otherwise.

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

missing=()
for tool in nginx wrk curl; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "missing: ${missing[*]}" >&2
  echo "install with: sudo apt-get update && sudo apt-get install -y nginx wrk curl" >&2
  exit 2
fi

METHOD="${METHOD:-POST}"
GAPS="${GAPS:-0.5 2.5 4}"
WRK="${WRK:--t1 -c20 -d2s}"
SPARSE_WRK="${SPARSE_WRK:--t1 -c256 -d20s}"
UPSTREAM_KEEPALIVE="${UPSTREAM_KEEPALIVE:-256}"
CONFIGS="${CONFIGS:-good bad}"
SPARSE_MS="${SPARSE_MS:-1999 2001}"
SERVER_PORT="${SERVER_PORT:-18180}"
PROXY_PORT="${PROXY_PORT:-18188}"
ADMIN_PORT="${ADMIN_PORT:-19911}"
NGINX_WORKERS="${NGINX_WORKERS:-1}"
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
SERVER_BIN="$TARGET_DIR/release/keepalive-server"

cargo build --release --quiet --bin keepalive-server

WORK="$(mktemp -d -t kas-proxy-soak.XXXXXX)"
SERVER_PID=""
NGINX_PID=""

stop() {
  if [[ -n "$NGINX_PID" ]]; then
    kill -QUIT "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=""
  fi
  if [[ -n "$SERVER_PID" ]]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
cleanup() {
  stop
  if [[ "${KEEP_LOGS:-0}" == 1 ]]; then
    echo "logs kept in $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wrk request: POST with a small body (echoed by `/`) or a plain GET. With
# script arguments MIN MAX, each connection waits a random MIN..MAX ms before
# each request: synchronized bursts, so nginx's cached upstream connections
# sit idle for about that long between bursts.
cat >"$WORK/request.lua" <<EOF
wrk.method = "$METHOD"
if wrk.method == "POST" then
  wrk.body = "ping"
  wrk.headers["Content-Type"] = "text/plain"
end
local low, high = 0, 0
function init(args)
  low = tonumber(args[1] or "0") or 0
  high = tonumber(args[2] or tostring(low)) or low
  math.randomseed(os.time() + math.floor(os.clock() * 1000000))
end
function delay()
  if high > 0 then return math.random(low, high) end
  return 0
end
EOF

wait_for_port() {
  local port="$1"
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  echo "nothing listening on 127.0.0.1:$port" >&2
  return 1
}

# /metrics is read whole before awk sees it: piping curl into an awk that
# exits at the first match made curl fail writing (error 23), and
# pipefail turned that into a dead run.
metrics() {
  curl -fsS "http://127.0.0.1:$ADMIN_PORT/metrics"
}
metric() { # metric NAME -> value from the server's /metrics
  local text
  text=$(metrics)
  awk -v name="$1" '$1 == name { print $2; exit }' <<<"$text"
}
requests_total() {
  local text
  text=$(metrics)
  awk '$1 ~ /^kas_requests_total\{/ { sum += $2 } END { print sum + 0 }' <<<"$text"
}
upstream_errors() { # nginx error-log lines about an upstream connection failing under a request
  grep -E 'while (reading response header from|sending request to) upstream' \
    "$WORK/$1/error.log" 2>/dev/null | grep -vc 'client prematurely closed' || true
}

# run_config NAME NGINX_UPSTREAM_KEEPALIVE_TIMEOUT SERVER_TIMEOUT SERVER_BUFFER
# Prints one line per round; leaves the total 502s in $TOTAL_502.
run_config() {
  local name="$1" upstream_timeout="$2" server_timeout="$3" server_buffer="$4"
  local prefix="$WORK/$name"
  mkdir -p "$prefix/logs"

  "$SERVER_BIN" --listen "127.0.0.1:$SERVER_PORT" --admin "127.0.0.1:$ADMIN_PORT" \
    --keep-alive-timeout "$server_timeout" --keep-alive-buffer "$server_buffer" \
    >"$prefix/server.log" 2>&1 &
  SERVER_PID=$!
  wait_for_port "$SERVER_PORT"
  wait_for_port "$ADMIN_PORT"

  nginx_proxy_conf "$prefix" "$SERVER_PORT" "$PROXY_PORT" "$upstream_timeout" \
    "$UPSTREAM_KEEPALIVE" "$NGINX_WORKERS" info
  nginx -p "$prefix" -c "$prefix/nginx.conf" -t -q
  nginx -p "$prefix" -c "$prefix/nginx.conf" &
  NGINX_PID=$!
  wait_for_port "$PROXY_PORT"

  echo
  echo "== $name: nginx upstream keepalive_timeout $upstream_timeout;" \
    "server --keep-alive-timeout $server_timeout --keep-alive-buffer $server_buffer;" \
    "wrk $WRK, $METHOD"
  printf '%-8s %9s %6s %10s %9s %10s %8s\n' \
    round requests 502s sock_errs upstr_err new_conns req/conn
  TOTAL_502=0
  local round=0 gap
  for gap in warmup $GAPS sparse; do
    # shellcheck disable=SC2206 # word lists on purpose
    local wrk_args=($WRK) script_args=()
    case "$gap" in
      warmup) ;;
      sparse)
        # shellcheck disable=SC2206
        wrk_args=($SPARSE_WRK)
        # shellcheck disable=SC2206
        script_args=(-- $SPARSE_MS)
        ;;
      *) sleep "$gap" ;;
    esac
    local accepted_before requests_before errors_before out
    accepted_before="$(metric kas_connections_accepted_total)"
    requests_before="$(requests_total)"
    errors_before="$(upstream_errors "$name")"
    out="$(wrk "${wrk_args[@]}" -s "$WORK/request.lua" "http://127.0.0.1:$PROXY_PORT/" \
      "${script_args[@]}")"
    local requests non2xx sockerr accepted served errors
    requests="$(awk '/requests in/ { print $1 }' <<<"$out")"
    non2xx="$(awk -F': *' '/Non-2xx or 3xx responses/ { print $2 }' <<<"$out")"
    non2xx="${non2xx:-0}"
    sockerr="$(awk '/Socket errors/ { gsub(/,/, ""); print $4 + $6 + $8 + $10 }' <<<"$out")"
    sockerr="${sockerr:-0}"
    accepted=$(($(metric kas_connections_accepted_total) - accepted_before))
    served=$(($(requests_total) - requests_before))
    errors=$(($(upstream_errors "$name") - errors_before))
    TOTAL_502=$((TOTAL_502 + non2xx))
    local label="$gap"
    [[ "$gap" == warmup || "$gap" == sparse ]] || label="+${gap}s"
    printf '%-8s %9s %6s %10s %9s %10s %8s\n' "$label" "$requests" "$non2xx" "$sockerr" \
      "$errors" "$accepted" "$(awk -v r="$served" -v c="$accepted" \
        'BEGIN { if (c > 0) printf "%.0f", r / c; else print "all" }')"
    round=$((round + 1))
  done
  echo "total 502s: $TOTAL_502; server closes by cause:" \
    "$(curl -fsS "http://127.0.0.1:$ADMIN_PORT/metrics" |
      awk '$1 ~ /^kas_connections_closed_total\{/ && $2 > 0 {
             sub(/^kas_connections_closed_total\{cause="/, "", $1); sub(/"\}$/, "", $1);
             printf "%s=%s ", $1, $2 }')"
  stop
}

echo "new_conns: upstream connections the server accepted during the round;"
echo "req/conn: requests per new upstream connection (\"all\": every request reused"
echo "a connection from before); upstr_err: nginx error-log lines for an upstream"
echo "connection that failed under a request (a lost close race, retried or not)."

good_502=0 bad_502=0
for config in $CONFIGS; do
  case "$config" in
    good) run_config good 1s 2s 1s; good_502=$TOTAL_502 ;;
    bad) run_config bad 10s 2s 0s; bad_502=$TOTAL_502 ;;
    *) echo "unknown configuration: $config (good or bad)" >&2; exit 2 ;;
  esac
done

echo
echo "summary: good configuration $good_502 502s (expected 0);" \
  "bad configuration $bad_502 502s"
((good_502 == 0))
