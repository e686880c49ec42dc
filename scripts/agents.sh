#!/usr/bin/env bash
# The pinned real agents (Claude Code, Codex CLI, Qwen Code, opencode and Gemini CLI from npm,
# mini-swe-agent and aider from PyPI; ripgrep from apt, which opencode's tools run) that
# `generate --agent` runs and tests/record/test_real_agents.py drives through `agentload record`.
# The pins are the products' entries in agentload/products/registry.py, the install is
# agentload/products/install.py (both stdlib only, so this runs with
# the system Python before agentload's venv exists; CI starts it in the background).
#
# Usage:
#   scripts/agents.sh install     # install every pinned agent once (cached); prints "NAME PATH" lines
#   scripts/agents.sh path NAME   # an installed agent's executable, or one error line and exit 1
#   scripts/agents.sh list        # the pinned NAMEs (claude-code@2.1.332, ...)
#
# Cached under $AGENTLOAD_AGENTS_DIR (default /var/tmp/agentload-agents), one folder per agent and
# version; a cold install takes ~3 min and ~2.9 GB (Claude Code and Codex ship native binaries).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
run() { PYTHONPATH="$REPO" "$PY" -m agentload.products.install "$@"; }
case "${1:-}" in
  install)
    command -v npm >/dev/null || { echo "agents.sh: error: npm is not installed (apt-get install nodejs npm)" >&2; exit 1; }
    # opencode's grep and glob run ripgrep, which it would download on first use (offline: fails)
    if ! command -v rg >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }  # CI installs Docker meanwhile
      { apt install -y -qq ripgrep || { apt update -qq && apt install -y -qq ripgrep; }; } >&2 \
        || echo "agents.sh: warning: apt-get install ripgrep failed (opencode's grep and glob need it)" >&2
    fi
    run ;;
  path) [ -n "${2:-}" ] || { echo "usage: scripts/agents.sh path NAME@VERSION" >&2; exit 1; }; run --path "$2" ;;
  list) run --list ;;
  *) echo "usage: scripts/agents.sh install|path NAME@VERSION|list" >&2; exit 1 ;;
esac
