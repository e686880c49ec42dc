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
TOOL=litellm.sh SPEC="litellm[proxy]==$VERSION" NOTE="a few minutes"
. "$(dirname "$0")/pinned-venv.sh"
EXE="$VENV/bin/litellm"

installed() {  # cheap (importing litellm takes seconds): the marker, the CLI, the pinned version
  [ -f "$OK" ] && [ -x "$VENV/bin/litellm" ] && [ "$("$VENV/bin/python" -c \
    'import importlib.metadata as m; print(m.version("litellm"))' 2>/dev/null || true)" = "$VERSION" ]
}

imports() { LITELLM_LOCAL_MODEL_COST_MAP=True "$VENV/bin/python" -c 'import litellm.proxy.proxy_server'; }

pinned_main "$@"
