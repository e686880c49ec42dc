"""``--schedule recorded``: open loop at the recorded offsets, scaled by ``--time-scale``; the
options it refuses."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest
from replay_helpers import run_cli
from replay_servers import Behaviour, ChatServer
from replay_traces import agentic_trace
from test_synth import Call, content_free_trace

from agentload.endpoint import SimulatorServer
from agentload.measure.report import text_summary, write_report
from agentload.options.replay import ReplayConfig
from agentload.replay.plan import build_plans
from agentload.replay.run import run_replay
from agentload.trace import load_trace

# one agent's four calls 150 ms apart, and a second session's call in between; each call is
# recorded as taking 20 ms, but the server below takes 800 ms for each
OPEN = [
    Call("a0", "s0", "g0", 0, ["1"], 100, 0),
    Call("a1", "s0", "g0", 1, ["2"], 100, 150, base="a0", base_blocks=1),
    Call("b0", "s1", "h0", 0, ["3"], 100, 220),
    Call("a2", "s0", "g0", 2, ["4"], 100, 300, base="a1", base_blocks=1),
    Call("a3", "s0", "g0", 3, ["5"], 100, 450, base="a2", base_blocks=1),
]
TOL_NS = 150_000_000
"""How late a send may be (2 cores shared with other work); a closed loop would send a1
800 ms after a0."""


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_calls_go_at_their_recorded_offsets_without_waiting(
    make_server: object, tmp_path: Path, scale: float
) -> None:
    srv: ChatServer = make_server(Behaviour(ttft_s=0.8))  # type: ignore[operator]
    trace = content_free_trace(tmp_path / "open.agentload.jsonl", OPEN, call_ms=20)
    cfg = ReplayConfig(
        traces=[str(trace)],
        endpoint=srv.base_url,
        model="test-model",
        schedule="recorded",
        time_scale=scale,
    )
    res = asyncio.run(run_replay(cfg))
    p = res.points[0]
    assert p.schedule == "recorded" and p.load == "recorded" and p.concurrency is None
    reqs = {r.call: r for r in p.requests}
    assert len(reqs) == 5 and all(r.ok for r in reqs.values())
    t0 = reqs["a0"].send_ns
    for c in OPEN:
        # sent at the recorded offset (times the scale), though its predecessor (800 ms on
        # this server) had not completed: a closed loop would send a1 after 800 ms
        assert abs(reqs[c.id].send_ns - t0 - scale * c.at_ms * 1e6) < TOL_NS, c.id
    assert reqs["a1"].send_ns < reqs["a0"].end_ns
    assert all(r.phase == "measured" for r in p.requests)
    assert p.max_inflight_requests >= 3
    assert {s.source for s in p.sessions} == {"s0", "s1"} and all(s.complete for s in p.sessions)


def test_our_own_traces_replay_on_their_recorded_schedule(tmp_path: Path) -> None:
    trace = agentic_trace(tmp_path / "t.agentload.jsonl", sessions=2)
    plans = build_plans([load_trace(trace)])
    offsets = {c.key: c.rel_trace_submit_ns for pl in plans for c in pl.calls.values()}
    # the second session starts 100 s into the recording: scaled to 300 ms; each session's
    # seven calls (under 1 s recorded) go out within 3 ms, a burst a loaded machine may delay.
    # The simulator runs in this process (a thread): a fresh one, not the test session's (whose
    # state grew with every earlier test), and the garbage collector's generations frozen, so
    # that neither a long collection nor the server's work holds the client past its offsets.
    with SimulatorServer(profile="instant", model="agentload-sim", seed=0) as sim:
        cfg = ReplayConfig(
            traces=[str(trace)],
            endpoint=sim.base_url,
            model=sim.model,
            schedule="recorded",
            time_scale=0.003,
        )
        gc.collect()
        gc.freeze()
        try:
            res = asyncio.run(run_replay(cfg))
        finally:
            gc.unfreeze()
    reqs = res.points[0].requests
    assert len(reqs) == 14 and all(r.ok for r in reqs)
    t0 = min(r.send_ns for r in reqs)
    for r in reqs:
        assert abs(r.send_ns - t0 - 0.003 * offsets[r.call]) < TOL_NS
    assert min(r.send_ns for r in reqs if r.source == "s1") - t0 > 0.27e9
    assert res.config.schedule == "recorded" and res.config.time_scale == 0.003
    page = write_report([res], tmp_path / "report")[0].read_text()
    assert "<h3>the recorded schedule (time scale 0.003)</h3>" in page
    assert text_summary(res)[-1].startswith("recorded: 14 measured requests")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "2"], "it cannot be combined with --concurrency/--sweep"),
        (["--sweep", "1,2"], "it cannot be combined with --concurrency/--sweep"),
        (["--arrival-rate", "1"], "it cannot be combined with --arrival-rate"),
        (["--sessions", "3"], "it cannot be combined with --sessions"),
        (["--gap-scale", "2"], "it cannot be combined with --gap-scale (use --time-scale)"),
        (["--time-scale", "0"], "--time-scale 0.0: Input should be greater than 0"),
    ],
)
def test_recorded_schedule_refuses_what_it_cannot_honour(
    chat_server: ChatServer,
    trace_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    argv = ["replay", str(trace_path), "--endpoint", chat_server.base_url, "--model", "m"]
    assert run_cli([*argv, "--schedule", "recorded", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert chat_server.seen == []


def test_time_scale_belongs_to_the_recorded_schedule(
    chat_server: ChatServer, trace_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["replay", str(trace_path), "--endpoint", chat_server.base_url, "--model", "m"]
    assert run_cli([*argv, "--time-scale", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--time-scale scales --schedule recorded; the closed loop has --gap-scale")
    assert run_cli([*argv, "--schedule", "open"]) == 2
    assert "--schedule 'open': choose closed or recorded" in capsys.readouterr().err


def test_duration_stops_the_recorded_schedule(chat_server: ChatServer, tmp_path: Path) -> None:
    trace = content_free_trace(tmp_path / "open.agentload.jsonl", OPEN, call_ms=20)
    cfg = ReplayConfig(
        traces=[str(trace)],
        endpoint=chat_server.base_url,
        model="test-model",
        schedule="recorded",
        duration_s=0.26,
    )
    p = asyncio.run(run_replay(cfg)).points[0]
    # a0, a1, b0 are due before the deadline; a2 (300 ms) and a3 (450 ms) are never sent
    assert sorted(r.call for r in p.requests) == ["a0", "a1", "b0"]
    assert 0.25 < p.window.seconds < 0.4
    s0 = next(s for s in p.sessions if s.source == "s0")
    assert not s0.complete and s0.requests == 2
