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
VENV="$D/venv-$VERSION"
OK="$VENV/.agentload-ok"  # written last: its presence means the install completed
log() { echo "aiperf.sh: $*" >&2; }
die() { echo "aiperf.sh: error: $*" >&2; exit 1; }

installed() {
  [ -f "$OK" ] && "$VENV/bin/python" -c 'import aiperf' >/dev/null 2>&1
}

install() {
  if installed; then echo "$VENV/bin/python"; return; fi
  mkdir -p "$D"
  exec 9>"$D/install.lock"
  flock 9
  if installed; then echo "$VENV/bin/python"; return; fi
  rm -rf "$VENV"
  log "installing aiperf==$VERSION into $VENV (~2.5 min, ~1.2 GB, once)"
  "$PY" -m venv "$VENV" >&2 || { rm -rf "$VENV"; die "could not create a venv with $PY"; }
  local rc=0
  timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q "aiperf==$VERSION" >"$D/install.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    rm -rf "$VENV"
    [ "$rc" = 124 ] && die "pip install aiperf==$VERSION did not finish within $TIMEOUT s (log: $D/install.log)"
    die "pip install aiperf==$VERSION failed (exit $rc): $(grep -m1 -i 'error' "$D/install.log" || tail -1 "$D/install.log")"
  fi
  "$VENV/bin/python" -c 'import aiperf' >/dev/null 2>&1 \
    || { rm -rf "$VENV"; die "aiperf $VERSION installed but does not import (log: $D/install.log)"; }
  touch "$OK"
  echo "$VENV/bin/python"
}

path() {
  installed || die "aiperf $VERSION is not installed in $VENV (run: scripts/aiperf.sh install)"
  echo "$VENV/bin/python"
}

case "${1:-}" in
  install) install ;;
  path) path ;;
  *) die "usage: scripts/aiperf.sh install|path" ;;
esac
