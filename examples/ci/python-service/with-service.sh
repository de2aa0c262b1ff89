#!/usr/bin/env bash
# Runs a command with the items service up: starts service.py (beside this
# script) on ITEMS_PORT (default 8766), waits until it listens, points the
# client at the guard's lab (ITEMS_URL from KAS_LAB_URL; at the service
# itself when run alone), runs the command in the current directory, and
# stops the service. Exits with the command's status. PYTHON (default
# python3) runs the service. run-suite.sh here and in ../node-client use it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
port=${ITEMS_PORT:-8766}
python=${PYTHON:-python3}
log=$(mktemp)
"$python" "$here/service.py" --port "$port" >"$log" 2>&1 &
service=$!
trap 'kill "$service" 2>/dev/null || true; wait "$service" 2>/dev/null || true; rm -f "$log"' EXIT
# The service says where it listens once it does.
for _ in $(seq 100); do
  grep -q '^items service on ' "$log" && break
  if ! kill -0 "$service" 2>/dev/null; then
    echo "with-service.sh: the service did not start:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
grep -q '^items service on ' "$log" || { echo "with-service.sh: the service never listened on $port" >&2; exit 1; }
export ITEMS_URL=${KAS_LAB_URL:-http://127.0.0.1:$port}
"$@"
