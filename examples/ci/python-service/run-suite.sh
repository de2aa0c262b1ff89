#!/usr/bin/env bash
# Starts the items service (python service.py), waits until it listens,
# runs the pytest suite with the client pointed at the guard's lab
# (KAS_LAB_URL; at the service itself when run alone), and stops the
# service. Exits with pytest's status; its arguments go to pytest.
#   keepalive-server lab --upstream http://127.0.0.1:8766 --keep-alive-timeout 2s \
#     --keep-alive-buffer 0s --advertise none -- ./run-suite.sh
# ITEMS_PORT (default 8766) is the service's port, the one --upstream names;
# PYTHON (default python3) the Python with httpx and pytest.
set -euo pipefail
cd "$(dirname "$0")"
port=${ITEMS_PORT:-8766}
python=${PYTHON:-python3}
log=$(mktemp)
"$python" service.py --port "$port" >"$log" 2>&1 &
service=$!
trap 'kill "$service" 2>/dev/null || true; wait "$service" 2>/dev/null || true; rm -f "$log"' EXIT
# The service says where it listens once it does.
for _ in $(seq 100); do
  grep -q '^items service on ' "$log" && break
  if ! kill -0 "$service" 2>/dev/null; then
    echo "run-suite.sh: the service did not start:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
grep -q '^items service on ' "$log" || { echo "run-suite.sh: the service never listened on $port" >&2; exit 1; }
export ITEMS_URL=${KAS_LAB_URL:-http://127.0.0.1:$port}
"$python" -m pytest "$@"
