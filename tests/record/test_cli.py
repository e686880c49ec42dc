"""``agentload record`` as a user runs it: a real process in front of the simulator; bad options
are one line and exit 2; Ctrl-C, --idle-timeout and --max-sessions stop it with the trace
closed; ``kill -9`` leaves the trace readable to its last complete record, or closed by the
recorder process when only the proxy was killed."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from agentload.trace.trace import load_trace

_URL = re.compile(r"agentload record on (http://127\.0\.0\.1:\d+)")


@contextmanager
def _record(upstream: str, out: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    cmd = [sys.executable, "-m", "agentload", "record", "--upstream", upstream]
    cmd += ["--listen", "127.0.0.1:0", "-o", str(out), *extra]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        m = _URL.search(line)
        assert m, f"no start line: {line!r}"
        yield proc, m.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)  # reaps it and closes its pipes
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its recorder process, if a test left one


def _chat(url: str, text: str, n: int = 1) -> None:
    msgs: list[Any] = [{"role": "user", "content": text}]
    with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as client:
        for _ in range(n):
            r = client.chat.completions.create(model="agentload-sim", messages=msgs)
            msgs += [{"role": "assistant", "content": r.choices[0].message.content},
                     {"role": "user", "content": "and then?"}]  # fmt: skip


def _trace(out: Path) -> Path:
    (path,) = out.glob("*.agentload.jsonl.zst")
    return path


def test_ctrl_c_closes_the_trace_and_exits_0(simulator: Any, tmp_path: Path) -> None:
    with _record(simulator.base_url, tmp_path) as (proc, url):
        _chat(url, "first session", 2)
        _chat(url, "second session")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "recorded 3 calls in 2 sessions (0 failed)" in err and "[interrupted]" in err
    t = load_trace(_trace(tmp_path))
    assert t.truncated is None
    assert len(t.sessions) == 2 and len(t.calls) == 3
    assert all(s.end_ns is not None for s in t.sessions.values())
    check = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "validate", str(_trace(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_idle_timeout_and_max_sessions_stop_it(simulator: Any, tmp_path: Path) -> None:
    with _record(simulator.base_url, tmp_path / "idle", "--idle-timeout", "1") as (proc, url):
        _chat(url, "one")
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "[idle for 1s]" in err
    with _record(simulator.base_url, tmp_path / "max", "--max-sessions", "2") as (proc, url):
        _chat(url, "one", 2)
        _chat(url, "two")
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "[2 sessions recorded]" in err
    assert len(load_trace(_trace(tmp_path / "max")).sessions) == 2


def test_kill_9_of_both_processes_leaves_the_trace_readable(simulator: Any, tmp_path: Path) -> None:
    with _record(simulator.base_url, tmp_path) as (proc, url):
        _chat(url, "before the kill", 3)
        time.sleep(1.6)  # the writer puts out a complete frame every second
        os.killpg(proc.pid, signal.SIGKILL)  # the proxy and its recorder process
    t = load_trace(_trace(tmp_path))
    assert t.truncated is not None  # never closed
    assert len(t.calls) == 3
    assert [c.seq for c in t.calls.values()] == [0, 1, 2]


def test_kill_9_of_the_proxy_lets_the_recorder_close_the_trace(
    simulator: Any, tmp_path: Path
) -> None:
    with _record(simulator.base_url, tmp_path) as (proc, url):
        _chat(url, "before the kill", 3)
        os.kill(proc.pid, signal.SIGKILL)  # at once: the last call's record may still be queued
        proc.wait(10)
        trace = _trace(tmp_path)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and load_trace(trace).truncated is not None:
            time.sleep(0.1)  # the recorder sees its input end, writes the rest and closes it
    t = load_trace(trace)
    assert t.truncated is None
    assert [c.seq for c in t.calls.values()] == [0, 1, 2]
    assert all(s.end_ns is not None for s in t.sessions.values())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--upstream", "ftp://x"], "--upstream 'ftp://x': expected an http(s):// URL"),
        (["--upstream", "http://127.0.0.1:1", "--listen", "nope"], "--listen 'nope': expected"),
        (["--upstream", "http://127.0.0.1:1", "--tokenizer", "bogus"], "--tokenizer 'bogus'"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(args: list[str], needle: str, tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "agentload", "record", *args, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_a_taken_port_is_one_line_and_exit_2(simulator: Any, tmp_path: Path) -> None:
    port = simulator.base_url.rsplit(":", 1)[1].split("/")[0]
    r = subprocess.run(
        [sys.executable, "-m", "agentload", "record", "--upstream", simulator.base_url,
         "--listen", f"127.0.0.1:{port}", "-o", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "cannot listen on 127.0.0.1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
