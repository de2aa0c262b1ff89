#!/usr/bin/env bash
# The pytest suite with the items service up (with-service.sh: started,
# waited for, the client pointed at the guard's lab, stopped after).
# Exits with pytest's status; its arguments go to pytest.
#   keepalive-server lab --upstream http://127.0.0.1:8766 --keep-alive-timeout 2s \
#     --keep-alive-buffer 0s --advertise none -- ./run-suite.sh
# ITEMS_PORT (default 8766) is the service's port, the one --upstream names;
# PYTHON (default python3) the Python with httpx and pytest.
set -euo pipefail
cd "$(dirname "$0")"
exec ./with-service.sh "${PYTHON:-python3}" -m pytest "$@"
