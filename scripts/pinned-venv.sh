# A pinned tool in its own cached venv: sourced by scripts/aiperf.sh and scripts/litellm.sh.
#
# The caller sets TOOL (the script's name, for messages), D (the cache folder), VERSION, SPEC (the
# pip requirement), TIMEOUT (seconds an install may take), PY (the python that makes the venv),
# NOTE (how long an install takes) and EXE (what `install` and `path` print), and defines
# `installed` (cheap: is a complete install there?) and `imports` (does the installed tool import?
# its output goes to $D/import.log), and may define `pip_install` (its own pip steps into $VENV,
# run under the timeout instead of `pip install $SPEC`; it sees only $VENV and what it names). One install at a time (flock); a failed one leaves nothing.
VENV="$D/venv-$VERSION"
OK="$VENV/.agentload-ok"  # written last: its presence means the install completed
log() { echo "$TOOL: $*" >&2; }
die() { echo "$TOOL: error: $*" >&2; exit 1; }

pinned_install() {
  if installed; then echo "$EXE"; return; fi
  mkdir -p "$D"
  exec 9>"$D/install.lock"
  flock 9
  if installed; then echo "$EXE"; return; fi
  rm -rf "$VENV"
  log "installing $SPEC into $VENV ($NOTE, once)"
  "$PY" -m venv "$VENV" >&2 || { rm -rf "$VENV"; die "could not create a venv with $PY"; }
  local rc=0
  if declare -F pip_install >/dev/null; then  # the caller's own steps (scripts/dynamo.sh)
    timeout "$TIMEOUT" bash -c "$(declare -f pip_install); VENV='$VENV'; pip_install" >"$D/install.log" 2>&1 || rc=$?
  else
    timeout "$TIMEOUT" "$VENV/bin/python" -m pip install -q "$SPEC" >"$D/install.log" 2>&1 || rc=$?
  fi
  if [ "$rc" != 0 ]; then
    rm -rf "$VENV"
    [ "$rc" = 124 ] && die "pip install $SPEC did not finish within $TIMEOUT s (log: $D/install.log)"
    die "pip install $SPEC failed (exit $rc): $( (grep -m1 -i 'error' "$D/install.log" || tail -1 "$D/install.log") | cut -c1-240) (log: $D/install.log)"
  fi
  imports >"$D/import.log" 2>&1 \
    || { rm -rf "$VENV"; die "$SPEC installed but does not import: $(tail -1 "$D/import.log" | cut -c1-240)"; }
  touch "$OK"
  echo "$EXE"
}

pinned_path() {
  installed || die "$SPEC is not installed in $VENV (run: scripts/$TOOL install)"
  echo "$EXE"
}

pinned_main() {
  case "${1:-}" in
    install) pinned_install ;;
    path) pinned_path ;;
    *) die "usage: scripts/$TOOL install|path" ;;
  esac
}
