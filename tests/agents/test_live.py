"""The live benchmark of ``generate``/``eval``: results.json, summary.csv and report.html from
the recorded timings, checked against the trace's own records (computed here, independently)."""

from __future__ import annotations

import csv
import json
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from agent_runs import agentload, one_error_line, recorded_calls

from agentload.measure.results import SCHEMA, ResultsDocument, load_results
from agentload.options.live import LiveConfig
from agentload.options.replay import ReplayConfig
from agentload.trace import Trace, load_trace

SMALL = ["-s", "quick", "-c", "context_target=10000", "--sandbox", "local"]


@dataclass
class LiveRun:
    stdout: str
    folder: Path
    doc: ResultsDocument
    traces: list[Trace]


def _live(out: Path, *args: str, command: str = "generate") -> LiveRun:
    proc = agentload(command, *SMALL, "--out", str(out), *args, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    (results,) = [ln for ln in lines if ln.startswith("results: ")]
    folder = Path(results.removeprefix("results: ").split(" (")[0])
    traces = [load_trace(ln.removeprefix("trace: ")) for ln in lines if ln.startswith("trace: ")]
    return LiveRun(proc.stdout, folder, load_results(folder), traces)


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> LiveRun:
    """Two sessions one at a time on the built-in simulator: every call is measured."""
    return _live(tmp_path_factory.mktemp("live-serial"), "-n", "2", "-p", "1")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> LiveRun:
    """``eval --sweep 1,2`` with GPUs, power, an SLO and a headline target (the measurement
    options replay takes too), on a workspace without the fault."""
    return _live(
        tmp_path_factory.mktemp("live-sweep"),
        "-n", "2", "--sweep", "1,2", "--gpus", "2", "--power-watts", "500",
        "--slo", "ttft=1ms,e2e=600s", "--target-tps-user", "50",
        "-c", "workspace.fault=null", command="eval",
    )  # fmt: skip


def _header(folder: Path) -> list[str]:
    with (folder / "summary.csv").open() as f:
        return next(csv.reader(f))


def _ttfts_ms(trace: Trace, before_ns: float = float("inf")) -> list[float]:
    t0 = min(s.start_ns for s in trace.sessions.values())
    return [
        (c.timings.first_token_ns - c.timings.submit_ns) / 1e6
        for c in trace.calls.values()
        if c.timings.first_token_ns is not None and c.timings.submit_ns - t0 <= before_ns
    ]


def test_a_serial_run_measures_every_recorded_call(serial: LiveRun) -> None:
    doc, (trace,) = serial.doc, serial.traces
    assert doc.mode == "live" and doc.live is not None and doc.live.command == "generate"
    assert serial.folder.parent == Path(trace.path).parent
    assert serial.folder.name + ".agentload.jsonl.zst" == Path(trace.path).name
    assert serial.stdout.index("LIVE benchmark") < serial.stdout.index("results: ")
    # the built-in simulator was the target: said so, with its profile, and not as hardware
    assert doc.simulator == "instant"
    sim_line = next(ln for ln in serial.stdout.splitlines() if ln.startswith("SIMULATED target"))
    assert "(profile instant)" in sim_line and "not a measurement of hardware" in sim_line
    (p,) = doc.points
    a = p.aggregates
    assert p.concurrency == 1 and a.phases.measured == len(trace.calls)
    ttfts = _ttfts_ms(trace)
    assert a.ttft_ms is not None and a.ttft_ms.n == len(ttfts)
    assert a.ttft_ms.p50 == pytest.approx(statistics.median(ttfts))
    assert a.ttft_ms.max == pytest.approx(max(ttfts))
    out = sum(c.usage.completion_tokens or 0 for c in trace.calls.values())
    assert sum(r.output_tokens for r in p.requests) == out
    assert {r.call for r in p.requests} == set(trace.calls)
    # Sessions: both complete jobs; latency from the session records.
    lat = sorted((s.end_ns - s.start_ns) / 1e9 for s in trace.sessions.values() if s.end_ns)
    assert a.session_latency_s is not None and a.session_latency_s.n == 2
    assert a.session_latency_s.p50 == pytest.approx(statistics.median(lat))
    assert a.jobs_per_hour == pytest.approx(2 / p.window.seconds * 3600)
    # Tokens/s per user exclude the time between calls (tools): above output / session wall.
    per_wall = []
    for sid, srec in trace.sessions.items():
        n = sum(c.usage.completion_tokens or 0 for c in trace.calls.values() if c.session_id == sid)
        per_wall.append(n / ((srec.end_ns or 0) - srec.start_ns) * 1e9)
    assert a.tps_user is not None and a.tps_user.n == 2
    assert a.tps_user.min > min(per_wall)
    # Gaps: the agent's previous call end to this call's submit.
    by_agent = sorted(p.requests, key=lambda r: (r.agent, r.seq))
    firsts = {r.agent for r in by_agent if r.seq == 0}
    assert all((r.gap_ns is None) == (r.seq == 0) for r in by_agent) and firsts
    assert all(r.gap_ns is None or r.gap_ns >= 0 for r in by_agent)
    # No eval: no pass-rate metric anywhere; the simulator run draws no report by default.
    assert a.value("pass_rate") is None and "pass_rate" not in a.model_dump()
    header = _header(serial.folder)
    assert "ttft_p50_ms" in header and "pass_rate" not in header
    assert not (serial.folder / "report.html").exists()
    assert f"agentload report {serial.folder}" in serial.stdout


def test_a_sweep_gives_one_point_per_level_with_per_gpu_and_per_mw(sweep: LiveRun) -> None:
    doc = sweep.doc
    assert [p.concurrency for p in doc.points] == [1, 2] and len(sweep.traces) == 2
    assert doc.live is not None and doc.live.command == "eval"
    assert [lp.parallel for lp in doc.live.points] == [1, 2]
    assert doc.config.levels == [1, 2] and doc.config.sessions == 2 and doc.config.gpus == 2
    slo = {"ttft_ns": 1_000_000, "tpot_ns": None, "e2e_ns": 600_000_000_000, "tps_user": None,
           "session_ns": None}  # fmt: skip
    assert doc.config.slo == slo
    assert doc.config.target_tps_user == [50.0]
    for p, trace in zip(doc.points, sweep.traces, strict=True):
        a = p.aggregates
        # --slo: the share of measured requests whose TTFT was at most 1 ms (and e2e 600 s).
        measured = [r for r in p.requests if r.phase == "measured"]
        met = [r for r in measured if r.ok and r.ttft_ns is not None and r.ttft_ns <= 1_000_000]
        assert measured and a.slo_attainment == pytest.approx(len(met) / len(measured))
        assert {s.source for s in p.sessions} == set(trace.sessions)
        assert a.output_tps is not None and a.output_tps > 0 and p.power_watts == 500
        assert a.output_tps_per_gpu == pytest.approx(a.output_tps / 2)
        assert a.output_tps_per_mw == pytest.approx(a.output_tps / 500e-6)
        # The window ends when the first lane finds no session left.
        ends = sorted(s.end_ns for s in p.sessions)
        assert p.window.end_ns == ends[len(ends) - p.concurrency]
        ttfts = _ttfts_ms(trace, p.window.end_ns)
        assert a.ttft_ms is not None and a.ttft_ms.p50 == pytest.approx(statistics.median(ttfts))
        # eval: every session checked; without the fault the tests pass.
        passed = [s.eval_passed for s in trace.sessions.values()]
        assert a.value("pass_rate") == pytest.approx(sum(map(bool, passed)) / len(passed))
        solved = a.value("solved_per_hour")
        assert solved is not None and solved > 0
        assert a.value("solved_per_hour_per_gpu") == pytest.approx(solved / 2)
        assert a.value("solved_per_hour_per_mw") == pytest.approx(solved / 500e-6)
    header = _header(sweep.folder)
    assert {"pass_rate", "solved_per_hour", "solved_per_hour_per_mw"} <= set(header)
    html = (sweep.folder / "report.html").read_text()
    assert "agentload live benchmark report" in html and "LIVE benchmark" in html
    assert "pass rate" in html and "50 tok/s per user" in html


def test_report_and_compare_read_live_results(
    serial: LiveRun, sweep: LiveRun, tmp_path: Path
) -> None:
    proc = agentload("report", str(serial.folder), "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "r" / "report.html").read_text()
    assert "LIVE benchmark" in html and "LIVE · generate -s quick" in html
    assert "SIMULATED target: agentload&#x27;s built-in simulator (profile instant)" in html
    proc = agentload("compare", str(serial.folder), str(sweep.folder))
    assert proc.returncode == 0, proc.stderr
    assert "traffic: not compared (A live, B live)" in proc.stdout
    assert "point 1:" in proc.stdout and "ttft_p50_ms" in proc.stdout


def test_a_results_file_without_mode_is_a_replay(serial: LiveRun, tmp_path: Path) -> None:
    data = orjson.loads((serial.folder / "results.json").read_bytes())
    del data["mode"], data["live"]
    for p in data["points"]:
        for s in p["sessions"]:
            del s["eval_passed"]
    (tmp_path / "results.json").write_bytes(orjson.dumps(data))
    doc = load_results(tmp_path)
    assert doc.mode == "replay" and doc.live is None


def test_a_live_runs_config_is_its_own_and_a_1_2_live_file_still_reads(
    serial: LiveRun, tmp_path: Path
) -> None:
    """Since 1.3 a live run's ``config`` says ``source: live`` and holds what the run was
    given, none of replay's options; a live file of 1.2 (its config written as a replay's,
    with invented values) still loads, and ``compare`` reads it beside a 1.3 one."""
    raw = orjson.loads((serial.folder / "results.json").read_bytes())
    cfg = raw["config"]
    assert raw["schema"] == SCHEMA and cfg["source"] == "live"
    assert cfg["call_timeout_s"] > 0 and cfg["levels"] == [1] and cfg["sessions"] == 2
    assert not {"extras", "salt_at", "start_at", "gap_scale", "schedule"} & cfg.keys()
    assert isinstance(serial.doc.config, LiveConfig) and serial.doc.salt_at == "off"
    old = dict(raw, schema="agentload.replay-results/1.2")
    old["config"] = {  # what 1.2 wrote: a replay config with the live run's values
        "traces": cfg["traces"],
        "endpoint": cfg["endpoint"],
        "model": cfg["model"],
        "engine": "openai",
        "extras": False,
        "levels": cfg["levels"],
        "sessions": cfg["sessions"],
        "salt_at": "off",
        "start_at": "zero",
        "gaps": cfg["gaps"],
        "timeout_s": cfg["call_timeout_s"],
        "seed": cfg["seed"],
    }
    (tmp_path / "results.json").write_bytes(orjson.dumps(old))
    doc = load_results(tmp_path)
    assert doc.mode == "live" and isinstance(doc.config, ReplayConfig)
    assert doc.config.engine == "openai" and doc.salt_at == "off"
    proc = agentload("compare", str(tmp_path), str(serial.folder))
    assert proc.returncode == 0, proc.stderr
    assert "traffic: not compared (A live, B live)" in proc.stdout and "point 1:" in proc.stdout
    proc = agentload("report", str(tmp_path), "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "LIVE · generate -s quick" in (tmp_path / "r" / "report.html").read_text()


def test_a_live_run_against_agentload_serve_says_its_timings_are_simulated(
    tmp_path: Path,
) -> None:
    """``--endpoint`` pointed at agentload's own simulator is told apart by its models list
    (``owned_by: agentload``) and its /health (the profile): labelled as without --endpoint."""
    from agentload.endpoint.server import SimulatorServer

    with SimulatorServer("instant") as srv:
        run = _live(tmp_path, "-n", "1", "--endpoint", srv.base_url, "--model", srv.model)
    assert run.doc.simulator == "instant" and run.doc.config.endpoint == srv.base_url
    sim_line = next(ln for ln in run.stdout.splitlines() if ln.startswith("SIMULATED target"))
    assert "(profile instant) answered every call" in sim_line


def test_json_output_names_the_results(tmp_path: Path) -> None:
    proc = agentload("generate", *SMALL, "-c", "context_target=9000", "--json",
                     "--out", str(tmp_path), timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    doc = load_results(payload["results"])
    assert doc.mode == "live" and doc.config.traces == [payload["trace"]]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--sweep", "1,x"], "--sweep/--parallel '1,x': write the concurrency levels"),
        (
            ["--sweep", "0,2"],
            "--concurrency/--sweep/--parallel '0,2': Input should be greater than or equal to 1",
        ),
        (["--power", "rapl"], "--power 'rapl': only 'nvml'"),
        (["--power", "nvml", "--power-watts", "300"], "not both"),
    ],
)
def test_bad_benchmark_options_are_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    line = one_error_line(agentload("generate", *SMALL, "--out", str(tmp_path), *args))
    assert says in line, line
    assert not list(tmp_path.iterdir())


def test_sigterm_mid_run_writes_the_results_of_what_ran(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentload", "generate", "-s", "quick", "--sandbox", "local",
         "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if recorded_calls(tmp_path) >= 3:
                break
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    (path,) = tmp_path.glob("*.zst")
    folder = tmp_path / path.name.removesuffix(".agentload.jsonl.zst")
    assert f"the live results of what ran: {folder}" in err
    doc = load_results(folder)
    (point,) = doc.points
    assert doc.interrupted and point.interrupted
    assert [s.complete for s in point.sessions] == [False]
    assert {r.call for r in point.requests if r.ok} == set(load_trace(path).calls)


def test_generate_capacity_searches_live_with_rounds_and_answers(tmp_path: Path) -> None:
    """``generate --capacity`` on the built-in simulator: replay's search over parallelism,
    each probe rounds of live runs judged over all its rounds; an SLO the simulator meets
    gives "at least" the top, one it cannot meet gives "No level met the SLO"."""
    run = _live(
        tmp_path / "met", "--capacity", "--slo", "ttft=30s,session=10m", "--capacity-max", "2"
    )
    cap = run.doc.capacity
    assert cap is not None and cap.max_concurrency == 2 and cap.bracket == (2, None)
    assert [p.concurrency for p in cap.probes] == [1, 2]
    assert run.stdout.splitlines()[0] == cap.answer
    assert cap.answer.startswith(
        "Serves at least 2 agents at p90 TTFT ≤ 30 s, session latency ≤ 600 s"
    )
    # every probe's points are the doc's points, in order, one live run (trace) each
    indexes = [i for p in cap.probes for i in p.points]
    assert indexes == list(range(len(run.doc.points))) == list(range(len(run.traces)))
    for p in cap.probes:
        assert 1 <= len(p.points) <= 3 and p.stops[-1] in ("decided", "precise", "cap")
        # the session objective is judged over the probe's complete sessions
        _ttft, session = p.checks
        assert session.objective == "session" and session.n == sum(
            len(run.traces[i].sessions) for i in p.points
        )
        assert all(run.doc.points[i].concurrency == p.concurrency for i in p.points)
        # each round ran max(--sessions, 2P) sessions with P at a time
        assert all(len(run.traces[i].sessions) == 2 * p.concurrency for i in p.points)
    assert [lp.parallel for lp in run.doc.live.points] == [  # type: ignore[union-attr]
        run.doc.points[i].concurrency for i in indexes
    ]
    none = _live(tmp_path / "none", "--capacity", "--slo", "ttft=1us")
    nc = none.doc.capacity
    assert nc is not None and nc.max_concurrency is None and len(nc.probes) == 1
    assert nc.answer.startswith("No level met the SLO (p90 TTFT ≤ 0.001 ms): at 1 session, ttft")
    assert nc.probes[0].verdict == "fail"
