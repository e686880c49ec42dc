"""``agentload replay|report|compare`` end to end: outputs, digests, bad inputs."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import orjson
import pytest
from replay_helpers import run_cli
from replay_servers import Behaviour, ChatServer
from replay_traces import Shape, agentic_trace

from agentload.measure.results import load_results


def _replay(srv: ChatServer, trace: Path, out: Path, *extra: str) -> int:
    return run_cli(
        [
            "replay",
            str(trace),
            "--endpoint",
            srv.base_url,
            "--model",
            "test-model",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_sweep_writes_one_point_per_level_and_every_output(
    chat_server: ChatServer,
    fast_trace: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTLOAD_API_KEY", "sk-test-secret-123456789")
    out = tmp_path / "run"
    rc = _replay(
        chat_server,
        fast_trace,
        out,
        "--sweep",
        "1,2,3",
        "--sessions",
        "4",
        "--gpus",
        "1",
        "--slo",
        "ttft=1s,e2e=10s",
        "--target-tps-user",
        "10",
        "--target-tps-user",
        "1e9",
    )
    assert rc == 0
    res = orjson.loads((out / "results.json").read_bytes())
    assert [p["concurrency"] for p in res["points"]] == [1, 2, 3]
    for p in res["points"]:
        phases = p["aggregates"]["phases"]
        assert sum(phases.values()) == len(p["requests"]) <= 4 * 7
        assert phases["measured"] > 0 and phases["warmup"] > 0  # default --start-at random
        assert len(p["sessions"]) == 4
    assert len(res["digest_manifest"]) == 14
    with (out / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["concurrency"] for r in rows] == ["1", "2", "3"]
    assert float(rows[0]["output_tps_per_gpu"]) > 0
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 4
    for png in ("pareto.png", "latency_cdf.png", "ttft_by_band.png", "session_timeline.png"):
        assert (out / png).stat().st_size > 1000
    text = capsys.readouterr().out
    assert "At 10 tok/s per user the endpoint sustains" in text
    assert "No point reached 1e+09 tok/s per user" in text
    # the key went to the server, and nowhere into the results
    assert chat_server.seen[0].headers["authorization"] == "Bearer sk-test-secret-123456789"
    assert b"sk-test-secret" not in (out / "results.json").read_bytes()
    assert "sk-test-secret" not in html
    # the report rebuilds from results, overlaying runs
    rep = tmp_path / "rep"
    assert run_cli(["report", str(out), str(out / "results.json"), "--out", str(rep)]) == 0
    overlay = (rep / "report.html").read_text()
    assert overlay.count("<h2>") == 3  # the interactive figures, then one section per run
    assert overlay.count('"name": "run') == 2  # both runs are series of the interactive plots


def test_compare_detects_a_changed_trace(
    chat_server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shape = Shape(tool_gap_s=0.01, child_gap_s=0.01, post_gap_s=0.01)
    a = agentic_trace(tmp_path / "a.jsonl", shape=shape)
    b = agentic_trace(tmp_path / "b.jsonl", shape=shape, variant=" changed")
    flags = ["--start-at", "zero", "--sessions", "1"]
    assert _replay(chat_server, a, tmp_path / "ra", *flags) == 0
    assert _replay(chat_server, a, tmp_path / "ra2", *flags) == 0
    assert _replay(chat_server, b, tmp_path / "rb", *flags) == 0
    capsys.readouterr()
    assert run_cli(["compare", str(tmp_path / "ra"), str(tmp_path / "ra2")]) == 0
    same = capsys.readouterr().out
    assert "traffic: IDENTICAL (7 recorded calls" in same and "ttft_p50_ms" in same
    assert run_cli(["compare", str(tmp_path / "ra"), str(tmp_path / "rb")]) == 0
    diff = capsys.readouterr().out
    assert "traffic: DIFFERENT" in diff
    assert "3 call(s) with a different payload: s0-c0, s0-c1, s0-c2" in diff


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "nope"], "model 'nope' not served"),
        (["--slo", "ttft=fast"], "bad duration 'fast'"),
        (["--slo", "latency=2s"], "--slo 'latency=2s': unknown objective 'latency=2s'"),
        (["--engine", "tgi"], "--engine 'tgi': unknown engine; choose one of: vllm,"),
        (
            ["--sweep", "1,x"],
            "--concurrency/--sweep/--parallel '1,x': write the concurrency levels as integers",
        ),
        (["--sweep", "2,0"], "/--parallel '2,0': Input should be greater than or equal to 1"),
        (["--concurrency", "0"], "--parallel '0': Input should be greater than or equal to 1"),
        (["--arrival-rate", "0"], "--arrival-rate 0.0: Input should be greater than 0"),
        (["--gap-scale", "-1"], "--gap-scale -1.0: Input should be greater than or equal to 0"),
        (["--timeout", "0"], "--timeout 0.0: Input should be greater than 0"),
        (["--target-tps-user", "10", "--target-tps-user", "-5"], "--target-tps-user -5.0:"),
        (["--power", "nvml", "--power-watts", "500"], "give --power-watts or --power nvml, not"),
        (["--power", "rapl"], "only 'nvml'"),
        (["--start-at", "middle"], "--start-at 'middle'"),
        (["--salt-at", "nowhere"], "--salt-at 'nowhere': choose start or after-system or off"),
        (["--no-salt", "--salt-at", "start"], "--no-salt is --salt-at off; it contradicts --salt"),
    ],
)
def test_bad_options_fail_before_any_load(
    chat_server: ChatServer,
    trace_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    argv = [
        "replay",
        str(trace_path),
        "--endpoint",
        chat_server.base_url,
        "--model",
        "test-model",
        *args,
    ]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert chat_server.seen == []


def test_power_nvml_without_nvidia_ml_py_fails_before_any_load(
    chat_server: ChatServer,
    trace_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # as on a machine without the package
    argv = ["replay", str(trace_path), "--endpoint", chat_server.base_url]
    assert run_cli([*argv, "--model", "test-model", "--power", "nvml"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--power nvml needs nvidia-ml-py" in err and "\n" not in err
    assert chat_server.seen == []


def test_bad_trace_or_endpoint_fails_before_any_load(
    chat_server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "bad.jsonl"
    garbage.write_text('{"type": "nonsense"}\n')
    cases = [
        ([str(tmp_path / "missing.jsonl")], chat_server.base_url, "no such trace file"),
        ([str(garbage)], chat_server.base_url, "bad.jsonl"),
        ([str(agentic_trace(tmp_path / "ok.jsonl"))], "http://127.0.0.1:9/v1", "unreachable"),
    ]
    for traces, url, message in cases:
        assert run_cli(["replay", *traces, "--endpoint", url, "--model", "test-model"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and err.count("\n") == 0, err
    assert chat_server.seen == []
    assert run_cli(["compare", str(garbage), str(garbage)]) == 2
    assert "not an agentload replay results file" in capsys.readouterr().err


def test_max_context_is_reported_and_sweep_needs_concurrency(
    chat_server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = agentic_trace(tmp_path / "small.jsonl", shape=Shape(system_words=10, tool_gap_s=0.01))
    big = agentic_trace(tmp_path / "big.jsonl", shape=Shape(system_words=3000))
    out = tmp_path / "r"
    argv = ["replay", str(small), str(big), "--endpoint", chat_server.base_url]
    argv += ["--model", "test-model", "--max-context", "1500", "--start-at", "zero"]
    assert run_cli([*argv, "--out", str(out)]) == 0
    res = orjson.loads((out / "results.json").read_bytes())
    assert res["plan"]["excluded_sessions"] == ["1:s0"] and res["plan"]["sessions"] == 1
    line = "--max-context 1500 (--fit cut-session): left out 1 session(s)"
    assert line in (out / "report.html").read_text()
    capsys.readouterr()
    assert run_cli([*argv, "--sweep", "1,2", "--arrival-rate", "2"]) == 2
    assert "cannot be combined with --arrival-rate" in capsys.readouterr().err


async def test_an_interrupted_run_keeps_what_it_measured(
    make_server: object, trace_path: Path
) -> None:
    import asyncio

    from agentload.options.replay import ReplayConfig
    from agentload.replay.run import run_replay

    srv: ChatServer = make_server(Behaviour(chunk_delay_s=0.01))  # type: ignore[operator]
    cfg = ReplayConfig(
        traces=[str(trace_path)],
        endpoint=srv.base_url,
        model="test-model",
        start_at="zero",
        levels=[1, 2],
        sessions=50,
    )
    task = asyncio.create_task(run_replay(cfg))
    # cancelled once the server has answered two requests (a fixed sleep raced a busy machine)
    for _ in range(600):
        await asyncio.sleep(0.05)
        if sum(1 for seen in srv.seen if seen.end_ns) >= 2:
            break
    task.cancel()
    res = await task
    assert res.interrupted is True and len(res.points) == 1
    point = res.points[0]
    assert point.interrupted and point.requests
    assert all(r.error_kind in (None, "client_error") for r in point.requests)


def test_ctrl_c_writes_partial_results(
    make_server: object, trace_path: Path, tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    srv: ChatServer = make_server(Behaviour(chunk_delay_s=0.01))  # type: ignore[operator]
    out = tmp_path / "partial"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentload.cli",
            "replay",
            str(trace_path),
            "--endpoint",
            srv.base_url,
            "--model",
            "test-model",
            "--sessions",
            "50",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not srv.seen and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert b"interrupted" in stdout
    res = orjson.loads((out / "results.json").read_bytes())
    assert res["interrupted"] and res["points"][0]["requests"]


def test_a_directory_stands_for_the_traces_in_it(
    chat_server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "traces"
    d.mkdir()
    fast = Shape(tool_gap_s=0.01, child_gap_s=0.01, post_gap_s=0.01)
    agentic_trace(d / "a.agentload.jsonl.zst", shape=fast)
    agentic_trace(d / "b.agentload.jsonl", shape=fast, variant="b")
    (d / "notes.md").write_text("not a trace\n")
    out = tmp_path / "run"
    assert _replay(chat_server, d, out, "--start-at", "zero", "--concurrency", "2") == 0
    res = orjson.loads((out / "results.json").read_bytes())
    sources = {r["source"] for r in res["points"][0]["requests"]}
    assert len(sources) == 2, sources  # one session from each file
    assert len(res["digest_manifest"]) == 14
    capsys.readouterr()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_cli(["replay", str(empty), "--endpoint", chat_server.base_url, "--model", "m"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no trace files" in err and err.count("\n") == 0


def test_an_endpoint_that_refuses_the_key_is_one_line_before_any_load(
    trace_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentload.endpoint.server import ServeOptions, SimulatorServer

    key = "sk-replay-key-0123456789"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("AGENTLOAD_API_KEY", "sk-not-the-right-one")
    with SimulatorServer("instant", serving=ServeOptions(api_key=key)) as srv:
        argv = ["replay", str(trace_path), "--endpoint", srv.base_url, "--model", srv.model]
        assert run_cli(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "HTTP 401: Incorrect API key provided" in err, err
        assert "AGENTLOAD_API_KEY or OPENAI_API_KEY; set)" in err
        assert srv.simulator.engine.stats.prompt_tokens == 0
        monkeypatch.setenv("AGENTLOAD_API_KEY", key)
        out = tmp_path / "run"
        assert run_cli([*argv, "--start-at", "zero", "--out", str(out)]) == 0
    res = (out / "results.json").read_bytes()
    assert all(r["status"] == 200 for r in orjson.loads(res)["points"][0]["requests"])
    assert key.encode() not in res


def test_a_truncated_trace_is_replayed_with_one_warning_line(
    chat_server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = agentic_trace(
        tmp_path / "whole.agentload.jsonl", shape=Shape(tool_gap_s=0.01, child_gap_s=0.01)
    )
    lines = whole.read_bytes().splitlines(keepends=True)
    cut = tmp_path / "killed.agentload.jsonl"
    cut.write_bytes(b"".join(lines[: len(lines) * 3 // 4]))  # a run killed part-way
    out = tmp_path / "run"
    assert _replay(chat_server, cut, out, "--start-at", "zero") == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("agentload: warning:")]
    assert len(warnings) == 1 and "killed.agentload.jsonl: truncated after record" in warnings[0]
    res = orjson.loads((out / "results.json").read_bytes())
    [info] = res["plan"]["truncated_traces"]
    assert info["file"] == str(cut) and info["detail"].startswith("truncated after record")
    assert 0 < len(res["points"][0]["requests"]) < 7  # the complete calls, not all seven
    assert "killed.agentload.jsonl is truncated" in (out / "report.html").read_text()


def test_a_single_session_at_a_random_start_says_so_in_one_line(
    chat_server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 29, 9c: `--sessions 1` with the default `--start-at random` silently skipped the
    # start of the recorded session.
    trace = agentic_trace(tmp_path / "t.agentload.jsonl", shape=Shape(tool_gap_s=0.01))
    assert _replay(chat_server, trace, tmp_path / "a", "--sessions", "1") == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "--start-at" in line]
    assert len(notes) == 1 and "--start-at zero replays from the first call" in notes[0]
    assert notes[0].startswith("agentload: note: --start-at random (the default): the session")
    for given in ("zero", "random"):  # chosen, not defaulted: no note
        assert (
            _replay(chat_server, trace, tmp_path / given, "--sessions", "1", "--start-at", given)
            == 0
        )
        assert "--start-at" not in capsys.readouterr().err


def test_a_replay_against_agentload_serve_says_its_timings_are_simulated(
    trace_path: Path,
    tmp_path: Path,
    chat_server: ChatServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """agentload's own simulator lists its model as ``owned_by: agentload`` and names its
    profile at /health: results.json and the summary say the timings are that profile's;
    another server gets no such line."""
    from agentload.endpoint.server import SimulatorServer

    with SimulatorServer("instant") as srv:
        sim = tmp_path / "sim"
        argv = ["replay", str(trace_path), "--endpoint", srv.base_url, "--model", srv.model]
        assert run_cli([*argv, "--start-at", "zero", "--out", str(sim)]) == 0
    printed = capsys.readouterr().out
    assert load_results(sim / "results.json").simulator == "instant"
    assert (
        "SIMULATED target: agentload's built-in simulator (profile instant) served this "
        "replay (agentload serve); the timings below are that profile's model of a server"
    ) in printed
    real = tmp_path / "real"
    argv = ["replay", str(trace_path), "--endpoint", chat_server.base_url, "--model", "test-model"]
    assert run_cli([*argv, "--start-at", "zero", "--out", str(real)]) == 0
    assert load_results(real / "results.json").simulator is None
    assert "SIMULATED" not in capsys.readouterr().out
