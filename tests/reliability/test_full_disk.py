"""A full disk loses nothing silently, on a real small tmpfs (as root; the test skips otherwise,
or fails under AGENTLOAD_REQUIRE_TMPFS=1, which CI sets).

* ``agentload record`` in front of the simulator, sent calls until its disk fills: every call
  answered 200 is in the trace, every other one got a 507, the stop lines name the disk, and
  ``trace validate`` passes; lines a refused write could not write are held and written once
  the disk takes them; a disk full at the start is one line, exit 2, no trace file.
* ``trace export weka|mooncake``, ``replay --out`` and ``generate -o`` on a full disk: one line,
  exit 2, before any work, and nothing left behind.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from genrun import one_line_exit_2, validate_cli
from ready_file import skip_or_fail

from agentload.errors import ConfigError
from agentload.record.server import RecordOptions, RecordServer
from agentload.trace.trace import load_trace

sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))
from replay_traces import agentic_trace

_URL = re.compile(r"agentload record on (http://127\.0\.0\.1:\d+)")
MiB = 1 << 20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Factory: ``small_disk("2m")`` mounts a tmpfs of that size (a fresh directory each time);
    all unmounted at teardown."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        why = "not root" if os.geteuid() != 0 else None
        if why is None:
            cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
            got = subprocess.run(cmd, capture_output=True, text=True, check=False)
            why = None if got.returncode == 0 else (got.stderr.strip() or "mount failed")
        if why is not None:
            skip_or_fail(f"a full disk needs a tmpfs mount: {why}", "AGENTLOAD_REQUIRE_TMPFS")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, name: str = "filler") -> Path:
    """Write zeros into ``disk/name`` until the disk refuses them."""
    path = disk / name
    with open(path, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
    with open(path, "ab", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 512)
    return path


def _call(client: httpx.Client, size: int, answered: list[str]) -> httpx.Response:
    """A chat call carrying ``size`` bytes of text that does not compress (a blob of its own);
    its text joins ``answered`` when it was answered 200."""
    text = base64.b64encode(os.urandom(size * 3 // 4)).decode()
    body = {"model": "agentload-sim", "messages": [{"role": "user", "content": text}]}
    resp = client.post("/chat/completions", json={**body, "max_tokens": 8})
    if resp.status_code == 200:
        answered.append(text)
    return resp


def _in_trace(path: Path) -> list[str]:
    trace = load_trace(path)
    assert trace.truncated is None, trace.truncated
    return [str(trace.messages(c)[-1]["content"]) for c in trace.calls.values()]


# -- record ---------------------------------------------------------------------------------
def test_record_refuses_calls_once_its_disk_is_full_and_keeps_every_answered_one(
    small_disk: Callable[[str], Path], simulator: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    disk = small_disk("66m")  # the default reserve is 64 MiB: ~2 MiB of calls fill it
    cmd = [sys.executable, "-m", "agentload", "record", "--upstream", simulator.base_url,
           "--listen", "127.0.0.1:0", "-o", str(disk)]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
    answered: list[str] = []
    refused: list[httpx.Response] = []
    try:
        assert proc.stderr is not None
        m = _URL.search(proc.stderr.readline())
        assert m, "no start line"
        with httpx.Client(base_url=m.group(1) + "/v1", timeout=30) as client:
            for _ in range(400):
                resp = _call(client, 32 << 10, answered)
                if resp.status_code != 200:
                    refused.append(resp)
                    if len(refused) >= 5:
                        break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert len(refused) == 5 and answered, (len(answered), err)
    for resp in refused:
        assert resp.status_code == 507, resp.text
        assert "disk of the trace" in resp.json()["error"]["message"]
    assert "Traceback" not in err, err
    assert f"the disk of {disk} is nearly full" in err, err
    assert f"5 calls refused with 507: the disk of {disk} was" in err, err
    assert "every call answered is in the trace" in err, err
    (path,) = disk.glob("*.agentload.jsonl.zst")
    assert sorted(_in_trace(path)) == sorted(answered)  # 0 missing
    validate_cli(path, capsys)


def test_record_holds_what_a_refused_write_could_not_write_and_writes_it_later(
    small_disk: Callable[[str], Path], simulator: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentload.record.cli import disk_line

    disk = small_disk("4m")
    opts = RecordOptions(upstream=simulator.base_url, out=disk, port=0, min_free=64 << 10)
    warned: list[str] = []
    with RecordServer(opts, warn=warned.append) as rs:
        client = httpx.Client(base_url=rs.url + "/v1", timeout=30)
        answered: list[str] = []
        _call(client, 8 << 10, answered)
        time.sleep(1.5)  # written
        filler = fill(disk)
        os.truncate(filler, filler.stat().st_size - (192 << 10))  # 192 KiB free: above the reserve
        big = _call(
            client, 1 << 20, answered
        )  # passes the guard; its trace lines cannot be written
        assert big.status_code == 200, big.text
        deadline = time.monotonic() + 10
        while rs.recorder is not None and rs.recorder.disk_error is None:
            assert time.monotonic() < deadline, "the recorder never said its write failed"
            time.sleep(0.05)
        assert _call(client, 1 << 10, answered).status_code == 507  # while it holds lines: refused
        filler.unlink()  # space again: the held lines are written, calls go through again
        deadline = time.monotonic() + 10
        while (resp := _call(client, 1 << 10, answered)).status_code != 200:
            assert resp.status_code == 507 and time.monotonic() < deadline, resp.text
            time.sleep(0.2)
        client.close()
    assert rs.stats.delayed > 0 and rs.stats.lost == 0, rs.stats
    assert warned and str(disk) in warned[0], warned
    line = disk_line(rs.guard, rs.stats)
    assert line is not None and "trace lines written late" in line, line
    assert sorted(_in_trace(rs.trace_path)) == sorted(answered)
    validate_cli(rs.trace_path, capsys)


def test_record_on_a_full_disk_is_one_line_and_leaves_no_trace(
    small_disk: Callable[[str], Path], simulator: Any
) -> None:
    disk = small_disk("1m")
    fill(disk)
    argv = ["record", "--upstream", simulator.base_url, "--listen", "127.0.0.1:0", "-o", str(disk)]
    line = one_line_exit_2(argv)
    assert f"--out {disk}: " in line and "No space left on device" in line, line
    assert [p.name for p in disk.iterdir()] == ["filler"]


# -- the other writers ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agentic_trace(tmp_path_factory.mktemp("trace") / "t.agentload.jsonl", sessions=2)


@pytest.mark.parametrize("fmt", ["weka", "mooncake"])
def test_export_to_a_full_disk_is_one_line_and_leaves_nothing(
    small_disk: Callable[[str], Path], trace: Path, fmt: str
) -> None:
    disk = small_disk("256k")
    fill(disk)
    out = disk / ("weka" if fmt == "weka" else "m.jsonl")
    line = one_line_exit_2(["trace", "export", fmt, str(trace), "-o", str(out)])
    assert str(out) in line, line
    assert [p.name for p in disk.iterdir()] == ["filler"]


def test_files_that_fill_the_disk_midway_are_all_removed(
    small_disk: Callable[[str], Path],
) -> None:
    """``outfile.new_files`` (the Weka export's directory of files): the disk fills after the
    check passed; every file the block wrote goes, and the directory it made."""
    from agentload.outfile import new_files

    disk = small_disk("4m")
    filler = fill(disk)
    os.truncate(filler, filler.stat().st_size - (3 << 19))  # 1.5 MiB: the check passes
    out = disk / "weka" / "files"
    with pytest.raises(ConfigError) as exc, new_files(out, option="-o/--out") as files:
        for i in range(8):
            files.add(out / f"{i}.json").write_bytes(os.urandom(512 << 10))
    assert f"-o/--out {out}: cannot write there (No space left on device)" in str(exc.value)
    assert len(files.paths) > 1
    assert [p.name for p in disk.iterdir()] == ["filler"]


def test_replay_to_a_full_disk_is_one_line_before_it_runs(
    small_disk: Callable[[str], Path], trace: Path, simulator: Any
) -> None:
    disk = small_disk("256k")
    fill(disk)
    out = disk / "results"
    t0 = time.monotonic()
    argv = ["replay", str(trace), "--endpoint", simulator.base_url, "--model", "agentload-sim",
            "--out", str(out)]  # fmt: skip
    line = one_line_exit_2(argv)
    assert f"--out {out}: " in line, line
    assert [p.name for p in disk.iterdir()] == ["filler"]
    assert time.monotonic() - t0 < 10


def test_generate_to_a_full_disk_is_one_line_before_any_session(
    small_disk: Callable[[str], Path],
) -> None:
    disk = small_disk("256k")
    fill(disk)
    out = disk / "gen"
    line = one_line_exit_2(["generate", "-s", "quick", "--sandbox", "local", "-o", str(out)])
    assert f"--out {out}: " in line, line
    assert [p.name for p in disk.iterdir()] == ["filler"]
