#!/usr/bin/env bash
# NVIDIA Dynamo for agentload's tests, without a GPU: the real Rust frontend, its real KV-aware
# router and Dynamo's `mocker` workers (which model a vLLM worker's KV cache, batching, prefill and
# decode timing), from PyPI's ai-dynamo, discovering each other through files (no etcd, no NATS).
#
# Usage:
#   scripts/dynamo.sh install      # the cached venv and the offline model folder; prints the venv's python
#   eval "$(scripts/dynamo.sh start [--workers N | --prefill N --decode M] [--router-mode MODE]
#                                   [--speedup R] [--port P])"
#       # a frontend on 127.0.0.1:P (default 18600) and its workers; prints
#       # `export AGENTLOAD_DYNAMO_URL=http://127.0.0.1:P/v1 AGENTLOAD_DYNAMO_MODEL=...
#       #  AGENTLOAD_DYNAMO_METRICS=...` (the frontend's /metrics and each worker process's,
#       #  comma-separated, as replay's --scrape-metrics takes them)
#   scripts/dynamo.sh stop [--port P]        # that deployment (default: every one started here)
#   scripts/dynamo.sh check URL              # does URL answer one chat completion? (exit 0, else one line)
#
# Install: `pip install ai-dynamo` fails here, as its dependency `aisimulate` is a placeholder that
# downloads from outside PyPI (only Dynamo's planner imports it), so the two Dynamo wheels go in
# with --no-deps and then scripts/dynamo-requirements.txt (pinned). ~1.5 min and ~650 MB once,
# under $AGENTLOAD_DYNAMO_DIR (default /var/tmp/agentload-dynamo); a failed install leaves nothing.
# The model folder (scripts/dynamo_model.py: a Llama-shaped config and a tokenizer trained here on
# Python's own sources; no weights) is built once beside it.
#
# Start: each deployment has its own folder (run-PORT: HOME, where Dynamo writes model cards, and
# DYN_FILE_KV, the discovery store), so two deployments never see each other's workers. Workers
# are one mocker process (`--num-workers N`), or a prefill and a decode process for
# `--prefill N --decode M` (disaggregated: the KV cache moves from a prefill worker to a decode
# worker). The router mode is the frontend's (`kv`, `round-robin`, `random`, ...; default kv).
# `--speedup R` runs the mocker's modeled timings R times faster (default 1: as modeled). A
# deployment is trusted only after /v1/models lists its model and one chat completion is
# answered. Processes run in their own process groups and are stopped by `stop`; the mocker binds
# its ZMQ sockets on 0.0.0.0 at free ports (its traffic stays on loopback here).
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) stops the script too
HERE="$(cd "$(dirname "$0")/.." && pwd)"
D="${AGENTLOAD_DYNAMO_DIR:-/var/tmp/agentload-dynamo}"
REQS="$HERE/scripts/dynamo-requirements.txt"
DYNAMO_VERSION="${AGENTLOAD_DYNAMO_VERSION:-1.6.1}"
VERSION="$DYNAMO_VERSION-$(sha256sum "$REQS" | cut -c1-8)"
TIMEOUT="${AGENTLOAD_DYNAMO_TIMEOUT_S:-900}"
PY="${PYTHON:-python3}"
MODEL_NAME="${AGENTLOAD_DYNAMO_MODEL:-agentload-dynamo-mock}"
START_S="${AGENTLOAD_DYNAMO_START_S:-120}"
TOOL=dynamo.sh SPEC="ai-dynamo==$DYNAMO_VERSION" NOTE="~1.5 min, ~650 MB"
. "$(dirname "$0")/pinned-venv.sh"
EXE="$VENV/bin/python"
MODEL="$D/model-$(sha256sum "$HERE/scripts/dynamo_model.py" | cut -c1-12)"

export DYNAMO_VERSION REQS
pip_install() {
  "$VENV/bin/python" -m pip install -q --no-deps "ai-dynamo==$DYNAMO_VERSION" "ai-dynamo-runtime==$DYNAMO_VERSION" \
    && "$VENV/bin/python" -m pip install -q -r "$REQS"
}

installed() {
  [ -f "$OK" ] && "$EXE" -c 'import dynamo.frontend, dynamo.mocker' >/dev/null 2>&1
}

imports() {
  "$EXE" -m dynamo.frontend --help >/dev/null && "$EXE" -m dynamo.mocker --help >/dev/null
}

model() {  # the model folder, built once (its name carries the builder's hash)
  [ -d "$MODEL" ] && return
  log "building the model folder $MODEL (a tokenizer trained on Python's sources, ~30 s, once)"
  "$EXE" "$HERE/scripts/dynamo_model.py" "$MODEL" >"$D/model.log" 2>&1 \
    || die "could not build the model folder: $(tail -1 "$D/model.log" | cut -c1-240) (log: $D/model.log)"
}

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

system_port() {  # a free port for a worker's /metrics: Dynamo 1.6.1 reads DYN_SYSTEM_PORT as an
  # i16, so it must lie below 32768, under the kernel's ephemeral range
  "$PY" - <<'PY'
import random, socket
for port in random.sample(range(20000, 32768), 200):
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            continue
        print(port)
        break
else:
    raise SystemExit("no free port below 32768 for a worker's /metrics")
PY
}

check() {  # check URL: the model listed, and one chat completion answered with text
  "$PY" - "$1" "$MODEL_NAME" <<'PY'
import json, sys, urllib.request
url, model = sys.argv[1].rstrip("/"), sys.argv[2]
body = {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4}
req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                             headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(url + "/models", timeout=10) as r:
        if model not in [m.get("id") for m in json.load(r).get("data", [])]:
            sys.exit(f"dynamo.sh: error: {url}/models does not list {model} (yet)")
    with urllib.request.urlopen(req, timeout=30) as r:
        text = json.load(r)["choices"][0]["message"]["content"]
except Exception as exc:
    sys.exit(f"dynamo.sh: error: {url} did not answer a chat completion ({exc})")
if not text:
    sys.exit(f"dynamo.sh: error: {url} answered a chat completion with no text")
PY
}

wait_ready() {  # wait_ready PORT RUN: the model listed and one completion answered, within START_S
  local port="$1" run="$2" t0=$SECONDS
  while (( SECONDS - t0 < START_S )); do
    local pid name
    while read -r pid name; do
      if ! kill -0 "$pid" 2>/dev/null; then
        local why
        why="$(sed 's/\x1b\[[0-9;]*m//g' "$run/$name.log" | grep -v '^[[:space:]]*$' | tail -1 | cut -c1-240)"
        kill_run "$run"
        die "Dynamo's $name exited at start: ${why:-no output} (log: $run/$name.log)"
      fi
    done <"$run/pids"
    if check "http://127.0.0.1:$port/v1" 2>/dev/null; then
      return 0
    fi
    sleep 0.5
  done
  kill_run "$run"
  die "Dynamo on port $port was not ready within $START_S s (logs: $run)"
}

spawn() {  # spawn RUN NAME CMD...: in its own process group, its pid noted
  local run="$1" name="$2"; shift 2
  (cd "$run" && exec setsid "$@" >"$run/$name.log" 2>&1 </dev/null) &
  echo "$! $name" >>"$run/pids"
}

start() {
  local port=18600 workers=2 prefill=0 decode=0 mode=kv speedup=1
  while [ $# -gt 0 ]; do
    case "$1" in
      --port) port="$2"; shift 2 ;;
      --workers) workers="$2"; shift 2 ;;
      --prefill) prefill="$2"; shift 2 ;;
      --decode) decode="$2"; shift 2 ;;
      --router-mode) mode="$2"; shift 2 ;;
      --speedup) speedup="$2"; shift 2 ;;
      *) die "start: unknown option $1 (see the usage at the top of scripts/dynamo.sh)" ;;
    esac
  done
  if (( (prefill > 0) != (decode > 0) )); then die "start: --prefill and --decode go together"; fi
  installed || pinned_install >/dev/null
  model
  local run="$D/run-$port"
  stop_run "$run"
  mkdir -p "$run/home" "$run/kv"
  : >"$run/pids"
  export HOME="$run/home" DYN_FILE_KV="$run/kv" DYN_LOG="${DYN_LOG:-warn}" DYN_SELF_HOST_METADATA=0
  # DYN_REQUEST_TRACE* (Dynamo's request trace) is for the frontend: a worker that inherits it
  # binds the same tool-event socket and opens the same trace file
  local untrace=(env) v
  for v in $(compgen -e -X '!DYN_REQUEST_TRACE*' || true); do untrace+=(-u "$v"); done
  local mock=("$EXE" -m dynamo.mocker --model-path "$MODEL"
              --model-name "$MODEL_NAME" --discovery-backend file --speedup-ratio "$speedup")
  # each worker process serves its own /metrics on its system port (DYN_SYSTEM_PORT)
  local metrics="http://127.0.0.1:$port/metrics" sys
  spawn "$run" frontend "$EXE" -m dynamo.frontend --http-host 127.0.0.1 --http-port "$port" \
    --discovery-backend file --router-mode "$mode"
  if (( prefill > 0 )); then
    local ports=() i
    for ((i = 0; i < prefill; i++)); do ports+=("$(free_port)"); done
    sys="$(system_port)"; metrics+=",http://127.0.0.1:$sys/metrics"
    spawn "$run" prefill "${untrace[@]}" DYN_SYSTEM_PORT="$sys" "${mock[@]}" \
      --disaggregation-mode prefill --num-workers "$prefill" \
      --bootstrap-ports "$(IFS=,; echo "${ports[*]}")"
    sys="$(system_port)"; metrics+=",http://127.0.0.1:$sys/metrics"
    spawn "$run" decode "${untrace[@]}" DYN_SYSTEM_PORT="$sys" "${mock[@]}" \
      --disaggregation-mode decode --num-workers "$decode"
  else
    sys="$(system_port)"; metrics+=",http://127.0.0.1:$sys/metrics"
    spawn "$run" workers "${untrace[@]}" DYN_SYSTEM_PORT="$sys" "${mock[@]}" --num-workers "$workers"
  fi
  wait_ready "$port" "$run"
  echo "export AGENTLOAD_DYNAMO_URL=http://127.0.0.1:$port/v1 AGENTLOAD_DYNAMO_MODEL=$MODEL_NAME" \
    "AGENTLOAD_DYNAMO_METRICS=$metrics"
}

stop_run() {  # stop_run RUN: every process group it started, then its folder
  kill_run "$1"
  rm -rf "$1"
}

kill_run() {  # kill_run RUN: every process group it started (TERM, then KILL after 5 s)
  local run="$1" pid
  [ -f "$run/pids" ] || return 0
  local pids; pids="$(cut -d' ' -f1 "$run/pids")"
  for pid in $pids; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for pid in $pids; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in $pids; do kill -KILL -- "-$pid" 2>/dev/null || true; done
}

stop() {
  if [ "${1:-}" = --port ]; then stop_run "$D/run-$2"; return; fi
  local run
  for run in "$D"/run-*; do [ -d "$run" ] && stop_run "$run"; done
  return 0
}

case "${1:-}" in
  install) pinned_install; model ;;
  path) pinned_path ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  check) [ $# = 2 ] || die "usage: scripts/dynamo.sh check URL"; check "$2" ;;
  *) die "usage: scripts/dynamo.sh install|path|start [...]|stop [--port P]|check URL" ;;
esac
