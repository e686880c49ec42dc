"""``replay --ray`` on a real Ray cluster on 127.0.0.1 (``ray_cluster``), driven through the CLI:
the same request set with 1 and 2 workers as on one machine, metrics computed once over the
merged records, totals that mean what they mean on one machine, a worker killed mid-point,
Ctrl-C, ``--repeat`` and the ``--capacity`` search on the cluster, and the one-line errors."""

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
from replay_helpers import run_cli
from replay_servers import Behaviour, ChatServer, timed_serve
from replay_traces import linear_trace

from agentload.measure.metrics import MetricContext, aggregate
from agentload.measure.results import load_results
from agentload.quantiles import percentile

pytestmark = pytest.mark.ray


def _replay(
    srv: ChatServer, trace: Path, out: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentload", "replay", str(trace), "--endpoint", srv.base_url,
         "--model", "test-model", "--out", str(out), *args],
        capture_output=True, text=True, timeout=240, env=env, check=False,
    )  # fmt: skip


def _request_set(results: dict[str, Any]) -> list[tuple[int, str, str]]:
    return sorted((r["session"], r["call"], r["digest"]) for r in results["points"][0]["requests"])


def test_one_and_two_workers_send_what_one_machine_sends_and_merge_exactly(
    ray_cluster: Any, chat_server: ChatServer, fast_trace: Path, tmp_path: Path
) -> None:
    env = ray_cluster.subprocess_env()
    common = ("--concurrency", "3", "--sessions", "7", "--seed", "5")
    runs: dict[str, dict[str, Any]] = {}
    for name, extra in (
        ("one", ()),
        ("ray1", ("--ray", ray_cluster.address, "--workers", "1")),
        ("ray2", ("--ray", ray_cluster.address, "--workers", "2")),
    ):
        proc = _replay(chat_server, fast_trace, tmp_path / name, *common, *extra, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[name] = orjson.loads((tmp_path / name / "results.json").read_bytes())
        if extra:
            assert re.search(r"ray: worker 0 \(.+, pid \d+\): clock offset [+-]", proc.stderr)
            assert f"Ray cluster {ray_cluster.address}: 1 node(s), 2 CPU(s)" in proc.stderr
            assert "Traceback" not in proc.stderr

    # The same 7 session instances (a session's join point and salt do not depend on which
    # worker runs it): the same requests, digest for digest.
    one = _request_set(runs["one"])
    assert len({s for s, _, _ in one}) == 7
    assert _request_set(runs["ray1"]) == one
    assert _request_set(runs["ray2"]) == one
    assert runs["one"]["digest_manifest"] == runs["ray2"]["digest_manifest"]
    assert runs["one"].get("cluster") is None and runs["one"]["points"][0].get("workers") is None

    doc = load_results(tmp_path / "ray2" / "results.json")
    assert doc.cluster is not None and doc.cluster.workers == 2 and doc.cluster.nodes == 1
    assert doc.config.ray == ray_cluster.address and doc.config.workers == 2
    assert doc.simulator is None  # a server not agentload's own: measured, not simulated
    (point,) = doc.points
    assert point.workers is not None and [w.lanes for w in point.workers] == [2, 1]
    assert sum(w.requests for w in point.workers) == len(point.requests)
    assert sum(w.sessions for w in point.workers) == len(point.sessions) == 7
    assert len({w.pid for w in point.workers}) == 2
    for w in point.workers:
        assert w.lost is None and w.clock_uncertainty_ns <= doc.cluster.residual_skew_ns
        assert abs(w.start_skew_ns) < 2_000_000_000
        # at the priority of the process that started the cluster, not Ray's worker default 15
        assert w.nice == os.getpriority(os.PRIO_PROCESS, 0)
    # every record on the driver's one time line
    assert all(0 <= r.send_ns <= r.end_ns <= point.wall_s * 1e9 + 1e9 for r in point.requests)
    # Exact merge: the point's metrics are the metric definitions applied to the union of the
    # workers' records, and its percentiles are those of all requests (not of the workers').
    ctx = MetricContext(point.requests, point.sessions, point.window, None, None, None)
    again = aggregate(ctx)
    stored = point.aggregates.model_dump(mode="json")
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "output_tps", "goodput", "kv_survival", "errors"):
        assert orjson.loads(orjson.dumps(again[key])) == stored[key], key
    measured = [r.ttft_ns / 1e6 for r in point.requests if r.phase == "measured" and r.ok]
    assert measured and stored["ttft_ms"]["n"] == len(measured)
    assert stored["ttft_ms"]["p90"] == pytest.approx(percentile(measured, 90))
    assert point.max_active_sessions <= 3


def test_rate_and_duration_are_totals(
    ray_cluster: Any, chat_server: ChatServer, fast_trace: Path, tmp_path: Path
) -> None:
    env = ray_cluster.subprocess_env()
    ray = ("--ray", ray_cluster.address, "--workers", "2")
    proc = _replay(
        chat_server, fast_trace, tmp_path / "rate", "--arrival-rate", "8", "--duration", "2",
        *ray, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = load_results(tmp_path / "rate" / "results.json")
    (point,) = doc.points
    assert point.workers is not None
    assert [w.arrival_rate for w in point.workers] == [4.0, 4.0]
    # the deadline is common: the window lasts --duration, not per worker
    assert point.window.seconds == pytest.approx(2.0, abs=0.35)
    started = len(point.sessions)
    assert 4 <= started <= 40, started  # ~16 at 8/s over 2 s, both workers together
    assert {w.sessions > 0 for w in point.workers} == {True}


def test_the_recorded_schedule_runs_each_session_once(
    ray_cluster: Any, chat_server: ChatServer, fast_trace: Path, tmp_path: Path
) -> None:
    env = ray_cluster.subprocess_env()
    ray = ("--ray", ray_cluster.address, "--workers", "2")
    proc = _replay(
        chat_server, fast_trace, tmp_path / "rec", "--schedule", "recorded", "--time-scale",
        "0.02", *ray, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = load_results(tmp_path / "rec" / "results.json")
    (point,) = rec.points
    assert sorted(s.session for s in point.sessions) == [0, 1]  # every recorded session once
    assert {r.call for r in point.requests} == set(rec.digest_manifest)
    # the window runs to the last scheduled send of either worker, as on one machine
    assert {r.phase for r in point.requests} == {"measured"}


def test_repeat_runs_every_point_again_on_the_cluster(
    ray_cluster: Any, chat_server: ChatServer, fast_trace: Path, tmp_path: Path
) -> None:
    env = ray_cluster.subprocess_env()
    ray = ("--ray", ray_cluster.address, "--workers", "2")
    args = ("--sweep", "1,2", "--sessions", "4", "--repeat", "2", "--seed", "3")
    proc = _replay(chat_server, fast_trace, tmp_path / "rep", *args, *ray, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = load_results(tmp_path / "rep" / "results.json")
    assert [(p.concurrency, p.repeat) for p in doc.points] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    for p in doc.points:
        assert p.workers is not None and sum(w.requests for w in p.workers) == len(p.requests)
        assert len(p.sessions) == 4 and not p.interrupted
    # level 1 has one lane: one worker sits it out; level 2 gives each worker one
    assert [len(p.workers or []) for p in doc.points] == [1, 1, 2, 2]
    # a repeat runs the same traffic again: the same requests, digest for digest
    sets = [sorted((r.session, r.call, r.digest) for r in p.requests) for p in doc.points]
    assert sets[0] == sets[1] and sets[2] == sets[3]
    assert doc.repeats is not None
    assert [(g.load, g.points) for g in doc.repeats] == [("c=1", [0, 1]), ("c=2", [2, 3])]


def test_the_capacity_search_runs_on_the_cluster(ray_cluster: Any, tmp_path: Path) -> None:
    """``--capacity`` with ``--ray``: every probe a sharded point whose window the steady-state
    rule ends on the merged records; the answer is the profile's capacity (see
    test_capacity: at most 14 sessions keep 90 tokens/s per user)."""
    trace = linear_trace(tmp_path / "lin.agentload.jsonl.zst", sessions=4, calls=8)
    out = tmp_path / "cap"
    with timed_serve(tmp_path, 400.0, 0.25) as url:
        proc = subprocess.run(
            [sys.executable, "-m", "agentload", "replay", str(trace), "--endpoint", url,
             "--model", "agentload-sim", "--capacity", "--slo", "tps_user=90",
             "--capacity-resolution", "1", "--gap-scale", "0", "--ray", ray_cluster.address,
             "--workers", "2", "--out", str(out)],
            capture_output=True, text=True, timeout=600, env=ray_cluster.subprocess_env(),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = load_results(out / "results.json")
    cap = doc.capacity
    assert cap is not None and cap.max_concurrency is not None, proc.stderr[-2000:]
    assert abs(cap.max_concurrency - 14) <= 1, cap.answer
    assert doc.cluster is not None and doc.cluster.workers == 2
    assert proc.stdout.splitlines()[0] == cap.answer
    for probe in cap.probes:
        (i,) = probe.points
        point = doc.points[i]
        assert point.concurrency == probe.concurrency and point.workers is not None
        assert sum(w.lanes or 0 for w in point.workers) == probe.concurrency
        # the steady-state rule ended the window long before the 300 s cap
        assert probe.stops and all(s.value in ("decided", "precise") for s in probe.stops)
        assert point.wall_s < 60, (probe.concurrency, point.wall_s)


def _start(srv: ChatServer, trace: Path, out: Path, env: dict[str, str], *args: str) -> Any:
    return subprocess.Popen(
        [sys.executable, "-m", "agentload", "replay", str(trace), "--endpoint", srv.base_url,
         "--model", "test-model", "--out", str(out), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def _worker_pids(proc: Any, deadline_s: float = 90) -> dict[int, int]:
    """Worker number → pid, from the driver's start lines (read until all are up)."""
    pids: dict[int, int] = {}
    deadline = time.monotonic() + deadline_s
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.match(r"ray: worker (\d+) \(.+, pid (\d+)\): clock offset", line)
        if m:
            pids[int(m.group(1))] = int(m.group(2))
        if "replay worker(s)" in line:
            return pids
    raise AssertionError(f"the workers did not start: {pids}")


def test_a_worker_killed_mid_point_is_accounted_and_the_others_finish(
    ray_cluster: Any, make_server: Any, trace_path: Path, tmp_path: Path
) -> None:
    srv: ChatServer = make_server(Behaviour(chunk_delay_s=0.02))  # every request streams a while
    out = tmp_path / "killed"
    proc = _start(
        srv, trace_path, out, ray_cluster.subprocess_env(), "--ray", ray_cluster.address,
        "--workers", "2", "--concurrency", "4", "--duration", "4", "--gap-scale", "0",
        "--start-at", "zero",
    )  # fmt: skip
    try:
        pids = _worker_pids(proc)
        time.sleep(2.0)  # mid-point: both workers have requests in flight
        import os

        os.kill(pids[1], signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr
    assert re.search(r"ray: worker 1 \(.+\) lost .*request\(s\) in flight count as failed", stderr)
    doc = load_results(out / "results.json")
    (point,) = doc.points
    assert point.workers is not None
    dead, alive = point.workers[1], point.workers[0]
    assert dead.lost is not None and "worker 1" in dead.lost and alive.lost is None
    lost = [r for r in point.requests if r.error_kind == "worker_lost"]
    assert len(lost) == dead.lost_inflight >= 1  # it always had a request in flight
    assert all(r.error == dead.lost for r in lost)
    assert any(not s.complete for s in point.sessions)  # its running sessions: cut
    # nothing measured before the loss is gone, and the survivor ran to the deadline
    lost_at = min(r.end_ns for r in lost)
    assert sum(1 for r in point.requests if r.ok and r.end_ns < lost_at) >= 4
    assert max(r.send_ns for r in point.requests if r.ok) > lost_at + 1_000_000_000
    assert point.window.end_ns <= lost_at + 1_000_000_000  # the window ends at the loss
    assert point.aggregates.errors.get("worker_lost") == len(lost)
    report = (out / "report.html").read_text()
    assert "worker 1" in report and "lost" in report


def test_ctrl_c_stops_every_worker_and_writes_partial_results(
    ray_cluster: Any, make_server: Any, trace_path: Path, tmp_path: Path
) -> None:
    srv: ChatServer = make_server(Behaviour(chunk_delay_s=0.01))
    out = tmp_path / "partial"
    proc = _start(
        srv, trace_path, out, ray_cluster.subprocess_env(), "--ray", ray_cluster.address,
        "--workers", "2", "--concurrency", "2", "--sessions", "200",
    )  # fmt: skip
    try:
        _worker_pids(proc)
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-2000:]
    assert "interrupted" in stdout
    doc = load_results(out / "results.json")
    assert doc.interrupted
    (point,) = doc.points
    assert point.interrupted and point.workers is not None
    assert {w.requests > 0 for w in point.workers} == {True}  # both workers' records kept


def test_bad_ray_options_are_one_line(
    chat_server: ChatServer,
    fast_trace: Path,
    capsys: pytest.CaptureFixture[str],
    ray_installed: None,
) -> None:
    base = ["replay", str(fast_trace), "--endpoint", chat_server.base_url, "--model", "test-model"]
    for extra, expected in (
        (["--workers", "2"], "--workers counts Ray workers: give --ray [ADDRESS] too"),
        (["--ray", "127.0.0.1:1"], "--ray 127.0.0.1:1: cannot start or join a Ray cluster"),
        (["--ray", "nowhere"], "--ray nowhere: not a Ray address"),
        (["--ray", "--power", "nvml"], "with --ray give --power-watts"),
        (["--ray", "--workers", "0"], "--workers 0:"),
    ):
        assert run_cli([*base, *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert expected in err and err.count("\n") == 0, (extra, err)
