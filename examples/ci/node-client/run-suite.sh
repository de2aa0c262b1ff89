#!/usr/bin/env bash
# The node:test suite with the items service up (../python-service/
# with-service.sh: started, waited for, the client pointed at the guard's
# lab, stopped after). Exits with the suite's status.
#   keepalive-server lab --upstream http://127.0.0.1:8766 --keep-alive-timeout 2s \
#     --keep-alive-buffer 0s --advertise none -- ./run-suite.sh
# ITEMS_PORT (default 8766) is the service's port, the one --upstream names;
# PYTHON (default python3) runs the service.
set -euo pipefail
cd "$(dirname "$0")"
exec ../python-service/with-service.sh node --test items.test.js "$@"
