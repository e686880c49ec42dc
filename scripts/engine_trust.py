"""Trust a llama-server binary only after it served: start it, ask one chat completion, stop it.

    python3 scripts/engine_trust.py BIN GGUF TEMPLATE --log FILE [--timeout S]

Starts BIN on a free 127.0.0.1 port with the model, waits for ``/health``, asks for one short
chat completion and checks the answer has a choice. Exit 0 when it did; otherwise one line on
stderr that says why (the exit code or the signal it died of, or what it answered, and the last
lines of its log) and exit 1. The server is always stopped. Standard library only: it runs
before any venv exists (``scripts/llama-server.sh`` calls it after a build and before it trusts
a cached binary).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

PREFIX = "llama-server.sh: error:"


class Untrusted(Exception):
    """The binary did not serve; the message says why."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_bytes()[-4096:].decode("utf-8", "replace")
    except OSError:
        return "no log"
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "its log is empty"


def how_it_ended(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name} ({-code})"
    return f"exited with code {code}"


def http(url: str, body: dict[str, object] | None, timeout: float) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read(1 << 20)
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read(1 << 16)


def check(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float) -> None:
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout

    def died() -> None:
        code = proc.poll()
        if code is not None:
            raise Untrusted(
                f"it {how_it_ended(code)} before it answered; last log lines: {log_tail(log)}"
            )

    while True:
        died()
        try:
            if http(base + "/health", None, 5)[0] == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise Untrusted(
                f"it did not answer /health within {timeout:.0f} s; last log lines: {log_tail(log)}"
            )
        time.sleep(0.25)
    body = {
        "model": "gemma",
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 4,
        "temperature": 0,
    }
    try:
        status, raw = http(
            base + "/v1/chat/completions", body, max(5.0, deadline - time.monotonic())
        )
    except OSError as exc:
        died()
        raise Untrusted(
            f"its chat completion failed ({exc}); last log lines: {log_tail(log)}"
        ) from None
    try:
        message = json.loads(raw)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        message = None
    if status != 200 or not isinstance(message, dict):
        died()
        raise Untrusted(
            f"its chat completion answered HTTP {status}: {raw[:200].decode('utf-8', 'replace')!r}"
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin")
    ap.add_argument("gguf")
    ap.add_argument("template")
    ap.add_argument("--log", required=True, type=Path)
    ap.add_argument("--timeout", type=float, default=180.0)
    args = ap.parse_args()
    port = free_port()
    cmd = [
        args.bin, "-m", args.gguf, "--host", "127.0.0.1", "--port", str(port), "-c", "4096",
        "-np", "1", "-t", "1", "--jinja", "--chat-template-file", args.template,
        "--alias", "gemma", "--no-webui",
    ]  # fmt: skip
    try:
        with args.log.open("wb") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as exc:
        print(
            f"{PREFIX} {args.bin} is not trusted: it did not start ({exc.strerror or exc})",
            file=sys.stderr,
        )
        return 1
    try:
        check(proc, port, args.log, args.timeout)
    except Untrusted as exc:
        print(f"{PREFIX} {args.bin} is not trusted: {exc}", file=sys.stderr)
        return 1
    finally:
        stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
