#!/usr/bin/env bash
# The real agents that tests/record/test_real_agents.py drives through `agentload record`:
# Claude Code and Codex CLI from npm (today's release and an older one each) and mini-swe-agent
# from PyPI (in its own venv: it brings LiteLLM, which agentload's venv does not need).
#
# Usage:
#   scripts/agents.sh install     # install every pinned agent once (cached); prints "NAME PATH" lines
#   scripts/agents.sh path NAME   # an installed agent's executable, or one error line and exit 1
#   scripts/agents.sh list        # the pinned NAMEs (claude-code@2.1.332, ...)
#
# Cached under $AGENTLOAD_AGENTS_DIR (default /var/tmp/agentload-agents), one folder per agent
# and version. An agent counts as installed only after its executable ran on this machine and
# printed its version (a marker file is written last); a failed install leaves nothing behind.
# One install at a time (flock); each is bounded by $AGENTLOAD_AGENTS_TIMEOUT_S (default 600 s).
# A cold install takes ~1.5 min and ~1.7 GB (Claude Code and Codex ship native binaries).
set -euo pipefail
shopt -s inherit_errexit
D="${AGENTLOAD_AGENTS_DIR:-/var/tmp/agentload-agents}"
TIMEOUT="${AGENTLOAD_AGENTS_TIMEOUT_S:-600}"
PY="${PYTHON:-python3}"
# name@version → how it installs. Keep tests/record/real_agents.py's PINNED in step.
PINNED=(
  "claude-code@2.1.332"
  "claude-code@2.1.197"
  "codex@0.171.0"
  "codex@0.169.0"
  "mini-swe-agent@2.4.6"
)
log() { echo "agents.sh: $*" >&2; }
die() { echo "agents.sh: error: $*" >&2; exit 1; }

npm_package() {  # the npm package of an agent name
  case "$1" in
    claude-code) echo "@anthropic-ai/claude-code" ;;
    codex) echo "@openai/codex" ;;
    *) return 1 ;;
  esac
}

dir_of() { echo "$D/$1"; }

exe_of() {  # the executable of NAME@VERSION inside its folder
  local name="${1%@*}" dir; dir="$(dir_of "$1")"
  case "$name" in
    claude-code) echo "$dir/node_modules/.bin/claude" ;;
    codex) echo "$dir/node_modules/.bin/codex" ;;
    mini-swe-agent) echo "$dir/venv/bin/mini" ;;
    *) return 1 ;;
  esac
}

runs() {  # does the installed executable run here and report the pinned version?
  local spec="$1" version="${1#*@}" exe; exe="$(exe_of "$spec")"
  [ -x "$exe" ] || return 1
  case "${spec%@*}" in
    mini-swe-agent)
      "$(dirname "$exe")/python" -c "import minisweagent, sys; sys.exit(minisweagent.__version__ != '$version')" ;;
    *) timeout 60 "$exe" --version 2>/dev/null | grep -qF "$version" ;;
  esac
}

installed() { [ -f "$(dir_of "$1")/.agentload-ok" ]; }

install_one() {
  local spec="$1" name="${1%@*}" version="${1#*@}" dir rc=0
  dir="$(dir_of "$spec")"
  if installed "$spec"; then echo "$spec $(exe_of "$spec")"; return; fi
  rm -rf "$dir"
  mkdir -p "$dir"
  log "installing $spec into $dir (once)"
  if [ "$name" = mini-swe-agent ]; then
    { "$PY" -m venv "$dir/venv" \
      && timeout "$TIMEOUT" "$dir/venv/bin/python" -m pip install -q "mini-swe-agent==$version"; } \
      >"$D/$spec.log" 2>&1 || rc=$?
  else
    timeout "$TIMEOUT" npm install --no-audit --no-fund --loglevel=error --prefix "$dir" \
      "$(npm_package "$name")@$version" >"$D/$spec.log" 2>&1 || rc=$?
  fi
  if [ "$rc" != 0 ]; then
    rm -rf "$dir"
    [ "$rc" = 124 ] && die "installing $spec did not finish within $TIMEOUT s (log: $D/$spec.log)"
    die "installing $spec failed (exit $rc): $( (grep -m1 -i 'err' "$D/$spec.log" || tail -1 "$D/$spec.log") | cut -c1-240) (log: $D/$spec.log)"
  fi
  if ! runs "$spec"; then
    rm -rf "$dir"
    die "$spec installed but its executable does not run here or reports another version"
  fi
  touch "$dir/.agentload-ok"
  echo "$spec $(exe_of "$spec")"
}

case "${1:-}" in
  install)
    command -v npm >/dev/null || die "npm is not installed (apt-get install nodejs npm)"
    mkdir -p "$D"
    exec 9>"$D/install.lock"
    flock 9
    for spec in "${PINNED[@]}"; do install_one "$spec"; done
    ;;
  path)
    spec="${2:-}"
    [ -n "$spec" ] || die "usage: scripts/agents.sh path NAME@VERSION"
    printf '%s\n' "${PINNED[@]}" | grep -qxF "$spec" || die "$spec is not pinned here (scripts/agents.sh list)"
    installed "$spec" || die "$spec is not installed in $(dir_of "$spec") (run: scripts/agents.sh install)"
    exe_of "$spec"
    ;;
  list) printf '%s\n' "${PINNED[@]}" ;;
  *) die "usage: scripts/agents.sh install|path NAME@VERSION|list" ;;
esac
