#!/usr/bin/env bash
# Regenerate docs/dashboard.png, the dashboard picture the README shows.
# Runs the browser test (tests/dashboard.rs: Chromium, node and
# tests/browser's npm packages, which `.ci/run` installs) with
# KAS_DASHBOARD_PNG naming where its screenshot goes; the test alone writes
# to a temporary file and never touches the tracked picture.
#
# Usage: scripts/dashboard-picture.sh [OUTPUT]   (default docs/dashboard.png)

case ${1:-} in -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" && exit 0 ;; esac
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/dashboard.png}
mkdir -p "$(dirname "$out")"
case $out in /*) ;; *) out="$PWD/$out" ;; esac
# CI=true makes a missing tool fail the test instead of skipping it.
CI=true KAS_DASHBOARD_PNG="$out" cargo test --test dashboard -- --nocapture
echo "wrote $out"
