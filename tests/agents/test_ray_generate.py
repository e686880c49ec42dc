"""``generate --ray`` against a real Ray cluster on 127.0.0.1 (the ``ray_cluster`` fixture),
through the real CLI: the trace is the single-machine run's, a worker killed mid-session fails
only its sessions, and the option errors are one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from agent_runs import agentload, fingerprint, one_error_line

from agentload.trace import Trace, load_trace

pytestmark = pytest.mark.ray

SEED = 31
RUN = ("generate", "-s", "quick", "-c", "context_target=16000", "--sandbox", "local")


def _trace(proc: subprocess.CompletedProcess[str]) -> tuple[dict[str, Any], Trace]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = orjson.loads(proc.stdout)
    return doc, load_trace(doc["trace"])


def _blocks(trace: Trace) -> dict[str, list[str]]:
    return {c.id: trace.blocks(c) for c in trace.calls.values()}


@pytest.fixture(scope="module")
def two_runs(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same seeds on one machine and on the cluster with 2 workers (4 sessions, 2 at once),
    both at the same time (the Ray run spends most of its start waiting for its workers)."""
    out = tmp_path_factory.mktemp("raygen")
    cmd = [sys.executable, "-m", "agentload", *RUN, "-n", "4", "-p", "2", "--seed", str(SEED)]
    cmd.append("--json")
    ray = ["--ray", ray_cluster.address, "--workers", "2"]
    procs = {
        "here": subprocess.Popen([*cmd, "-o", str(out / "here")], **_PIPES),  # type: ignore[call-overload]
        "ray": subprocess.Popen(
            [*cmd, "-o", str(out / "ray"), *ray], env=ray_cluster.subprocess_env(), **_PIPES
        ),
    }
    done: dict[str, Any] = {}
    try:
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=240)
            done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return {"here": _trace(done["here"]), "ray": _trace(done["ray"]), "stderr": done["ray"].stderr}


_PIPES: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}


def test_the_ray_trace_is_the_single_machine_one(two_runs: dict[str, Any]) -> None:
    (doc_here, here), (doc_ray, on_ray) = two_runs["here"], two_runs["ray"]
    assert sorted(on_ray.sessions) == [f"s{SEED}-{i}" for i in range(4)]
    assert fingerprint(on_ray) == fingerprint(here)
    assert _blocks(on_ray) == _blocks(here)  # the prefix blocks too, whatever call they chain on
    assert on_ray.truncated is None
    ray = on_ray.header.generator["ray"]
    assert ray["workers"] == 2 and ray["nodes"] == 1 and len(ray["worker"]) == 2
    assert not any(w["times_moved"] for w in ray["worker"])  # one machine: one clock
    # the header differs only there (and in what a run's time and endpoint port make differ)
    gen = dict(on_ray.header.generator)
    del gen["ray"]
    assert gen == here.header.generator
    assert on_ray.header.scenario_hash == here.header.scenario_hash
    assert on_ray.header.token_calibration == here.header.token_calibration
    # the summary: the same sessions, ends and counts; --json says which cluster ran them
    keep = ("session", "end_reason", "agents", "calls", "prompt_tokens", "completion_tokens")
    rows = [{k: r[k] for k in keep} for r in doc_ray["sessions"]]
    assert rows == [{k: r[k] for k in keep} for r in doc_here["sessions"]]
    assert doc_ray["ray"]["workers"] == 2
    # live progress merged both workers: every session started and ended on the driver
    for i in range(4):
        assert f"s{SEED}-{i}: started" in two_runs["stderr"]
        assert re.search(rf"s{SEED}-{i}: ended \(\w+\) after", two_runs["stderr"])


def test_trace_commands_accept_the_ray_trace(two_runs: dict[str, Any]) -> None:
    path = two_runs["ray"][0]["trace"]
    validate = agentload("trace", "validate", path)
    assert validate.returncode == 0 and "OK: whole file" in validate.stdout, validate.stderr
    stats = agentload("trace", "stats", path, "--json")
    assert stats.returncode == 0, stats.stderr
    assert orjson.loads(stats.stdout)["sessions"] == 4


def test_option_errors_are_one_line(ray_cluster: Any, tmp_path: Path) -> None:
    out = ("-o", str(tmp_path))
    line = one_error_line(agentload(*RUN, *out, "--workers", "2"))
    assert "--workers counts Ray workers: give --ray" in line
    line = one_error_line(
        agentload(*RUN, *out, "--ray", "127.0.0.1:1", env=ray_cluster.subprocess_env())
    )
    assert "--ray 127.0.0.1:1: cannot start or join a Ray cluster" in line
    line = one_error_line(agentload(*RUN, *out, "--ray", ray_cluster.address, "--workers", "0"))
    assert "--workers 0: Input should be greater than or equal to 1" in line


def test_without_ray_the_flag_is_one_line(tmp_path: Path) -> None:
    """The real CLI in a process where ``import ray`` fails as it does when Ray is absent."""
    code = (
        "import sys, runpy; sys.modules['ray'] = None; "
        f"sys.argv = ['agentload', *{list(RUN)!r}, '--ray', 'local', '-o', {str(tmp_path)!r}]; "
        "runpy.run_module('agentload', run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    line = one_error_line(proc)
    assert "--ray needs Ray, an optional extra: pip install 'agentload[ray]'" in line
    assert list(tmp_path.iterdir()) == []  # said before anything else ran


def _workers(root_pid: int) -> list[int]:
    """Pids of the generate workers among the processes of the Ray cluster at ``root_pid``."""
    children: dict[int, list[int]] = {}
    titles: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            titles[int(entry.name)] = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            todo.append(child)
            # A worker's own child between fork and exec (a tool command starting) still
            # shows the worker's title: only a worker whose parent is not one counts.
            if titles.get(child, "").startswith("ray::GenerateWorker") and pid not in found:
                found.append(child)
    return found


def test_a_killed_worker_fails_its_sessions_and_the_others_go_on(
    ray_cluster: Any, tmp_path: Path
) -> None:
    cmd = [sys.executable, "-m", "agentload", *RUN, "-n", "3", "-p", "2", "--seed", str(SEED)]
    cmd += ["-o", str(tmp_path), "--ray", ray_cluster.address, "--workers", "2"]
    err = tmp_path / "stderr"
    earlier = set(_workers(ray_cluster.pid))  # an earlier run's, maybe still exiting
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, env=ray_cluster.subprocess_env()
        )
        try:
            deadline = time.monotonic() + 120
            while f"s{SEED}-1: started" not in err.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.2)
            time.sleep(1.5)  # the sessions are under way on both workers
            pids = sorted(set(_workers(ray_cluster.pid)) - earlier)
            assert len(pids) == 2, (pids, earlier)
            os.kill(pids[0], signal.SIGKILL)  # a genuine worker death: its process is gone
            out, _ = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, err.read_text()[-3000:]  # not every session failed
    failed = re.findall(rf"^(s{SEED}-\d): error: (Ray worker \d \(.*\) failed: .*)$", out, re.M)
    assert len(failed) == 1, out + err.read_text()[-3000:]
    sid, cause = failed[0]
    assert "Actor" in cause  # Ray's own word for it: the actor died
    trace_path = re.search(r"^trace: (.*)$", out, re.M)
    assert trace_path is not None
    trace = load_trace(trace_path.group(1))
    assert trace.truncated is None
    assert sorted(trace.sessions) == [f"s{SEED}-{i}" for i in range(3)]
    assert trace.sessions[sid].end_reason == "error" and trace.sessions[sid].end_ns is not None
    assert any(e.kind == "error" and e.session_id == sid for e in trace.events)
    others = [s for s in trace.sessions.values() if s.id != sid]
    assert all(s.end_reason not in ("error", None) for s in others)
    validate = agentload("trace", "validate", str(trace_path.group(1)))
    assert validate.returncode == 0, validate.stdout + validate.stderr
