#!/usr/bin/env bash
# LiteLLM's proxy in its own venv: the peer that benchmarks/record_overhead.py measures
# `agentload record` against (never installed into agentload's venv, never used by the tests).
#
# Usage:
#   scripts/litellm.sh install   # install litellm[proxy]==$LITELLM_VERSION once (cached); prints the venv's litellm
#   scripts/litellm.sh path      # the venv's litellm executable, or one error line and exit 1 when not installed
#
# The venv lives under $AGENTLOAD_LITELLM_DIR (default /var/tmp/agentload-litellm) as
# venv-$LITELLM_VERSION. One install at a time (flock); an install is bounded by
# $AGENTLOAD_LITELLM_TIMEOUT_S (default 900 s) and a failed one leaves nothing behind.
# The pin avoids 1.82.7 and 1.82.8, the two releases that were published with malicious code.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) stops the script too
D="${AGENTLOAD_LITELLM_DIR:-/var/tmp/agentload-litellm}"
VERSION="${LITELLM_VERSION:-1.80.5}"
TIMEOUT="${AGENTLOAD_LITELLM_TIMEOUT_S:-900}"
PY="${PYTHON:-python3}"
VENV="$D/venv-$VERSION"
OK="$VENV/.agentload-ok"  # written last: its presence means the install completed
log() { echo "litellm.sh: $*" >&2; }
die() { echo "litellm.sh: error: $*" >&2; exit 1; }

installed() {  # cheap (importing litellm takes seconds): the marker, the CLI, the pinned version
  [ -f "$OK" ] && [ -x "$VENV/bin/litellm" ] && [ "$("$VENV/bin/python" -c \
    'import importlib.metadata as m; print(m.version("litellm"))' 2>/dev/null || true)" = "$VERSION" ]
}

install() {
  if installed; then echo "$VENV/bin/litellm"; return; fi
  mkdir -p "$D"
  exec 9>"$D/install.lock"
  flock 9
  if installed; then echo "$VENV/bin/litellm"; return; fi
  rm -rf "$VENV"
  log "installing litellm[proxy]==$VERSION into $VENV (a few minutes, once)"
  "$PY" -m venv "$VENV" >&2 || { rm -rf "$VENV"; die "could not create a venv with $PY"; }
  local rc=0
  timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q "litellm[proxy]==$VERSION" >"$D/install.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    rm -rf "$VENV"
    [ "$rc" = 124 ] && die "pip install litellm[proxy]==$VERSION did not finish within $TIMEOUT s (log: $D/install.log)"
    die "pip install litellm[proxy]==$VERSION failed (exit $rc): $( (grep -m1 -i 'error' "$D/install.log" || tail -1 "$D/install.log") | cut -c1-240) (log: $D/install.log)"
  fi
  LITELLM_LOCAL_MODEL_COST_MAP=True "$VENV/bin/python" -c 'import litellm.proxy.proxy_server' >"$D/import.log" 2>&1 \
    || { rm -rf "$VENV"; die "litellm $VERSION installed but its proxy does not import: $(tail -1 "$D/import.log")"; }
  touch "$OK"
  echo "$VENV/bin/litellm"
}

path() {
  installed || die "litellm $VERSION is not installed in $VENV (run: scripts/litellm.sh install)"
  echo "$VENV/bin/litellm"
}

case "${1:-}" in
  install) install ;;
  path) path ;;
  *) die "usage: scripts/litellm.sh install|path" ;;
esac
