#!/usr/bin/env bash
# Idle memory with and without --upstream: kas-soak opens N keep-alive
# connections in batches of 200 (each batch's requests in flight at once,
# forwarded to an nginx upstream when --upstream is given), waits
# SETTLE (default 3s: the buffer pool's one-shot settling timer fires
# within two seconds of a burst) and reports the RSS growth per idle
# connection. Rounds alternate between the variants.
#
# Usage: scripts/upstream-idle.sh VARIANT...
#   a VARIANT is BIN or BIN,EXTRA-FLAGS; UPSTREAM in the flags is replaced
#   by the nginx upstream's URL, e.g.
#   scripts/upstream-idle.sh target/release/keepalive-server \
#       "target/release/keepalive-server,--upstream UPSTREAM"
#   Env: N (2000), ROUNDS (3), SETTLE (3s), PORT (18777; the upstream
#   listens on PORT+1). Needs nginx; builds kas-soak.

case ${1:-} in -h | --help | "") awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

port=${PORT:-18777}
cargo build --release --quiet -p kas-soak
work=$(mktemp -d)
chmod 755 "$work" # nginx's worker runs as an unprivileged user
start_nginx "$work" $((port + 1)) >/dev/null
trap 'kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; rm -rf "$work"' EXIT
upstream="http://127.0.0.1:$((port + 1))"

for round in $(seq "${ROUNDS:-3}"); do
  for variant in "$@"; do
    bin=${variant%%,*}
    extra=${variant#*,}
    [ "$extra" = "$variant" ] && extra=""
    extra=${extra//UPSTREAM/$upstream}
    # shellcheck disable=SC2086 # the extra flags are words
    out=$(taskset -c 1 target/release/kas-soak --addr "127.0.0.1:$port" -n "${N:-2000}" --batch 200 \
      --expect-timeout 4s --grace 5s --settle "${SETTLE:-3s}" --server-bin taskset -- -c 0 "$bin" \
      --workers 1 --listen "127.0.0.1:$port" --keep-alive-timeout 4s --keep-alive-buffer 0s $extra 2>&1 || true)
    echo "round $round: $bin $extra: $(grep "per idle" <<<"$out" | sed 's/.*= //' | head -1)"
  done
done
