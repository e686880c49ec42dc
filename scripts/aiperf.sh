#!/usr/bin/env bash
# NVIDIA AIPerf in its own venv, for the acceptance test of `agentload trace export weka|mooncake`
# (tests/interop/test_aiperf.py replays our exports with AIPerf's own loaders).
#
# Usage:
#   scripts/aiperf.sh install   # install aiperf==$AIPERF_VERSION once (cached); prints the venv's python
#   scripts/aiperf.sh path      # the venv's python, or one error line and exit 1 when not installed
#
# The venv lives under $AGENTLOAD_AIPERF_DIR (default /var/tmp/agentload-aiperf) as
# venv-$AIPERF_VERSION. One install at a time (flock); an install is bounded by $AGENTLOAD_AIPERF_TIMEOUT_S
# (default 900 s; it takes ~2.5 min and ~1.2 GB) and a failed one leaves nothing behind.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) stops the script too
D="${AGENTLOAD_AIPERF_DIR:-/var/tmp/agentload-aiperf}"
VERSION="${AIPERF_VERSION:-0.13.0}"
TIMEOUT="${AGENTLOAD_AIPERF_TIMEOUT_S:-900}"
PY="${PYTHON:-python3}"
TOOL=aiperf.sh SPEC="aiperf==$VERSION" NOTE="~2.5 min, ~1.2 GB"
. "$(dirname "$0")/pinned-venv.sh"
EXE="$VENV/bin/python"

installed() {
  [ -f "$OK" ] && "$VENV/bin/python" -c 'import aiperf' >/dev/null 2>&1
}

imports() { "$VENV/bin/python" -c 'import aiperf'; }

pinned_main "$@"
