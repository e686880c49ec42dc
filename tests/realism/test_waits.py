"""Modeled waits end to end: recorded by `generate` without sleeping (or slept with `--pace
real`), honoured by `replay` (or left out with `--gaps measured`), written into the Weka export's
`think_time`, and said wherever a result used them. Small `quick` sessions on the built-in
simulator with a fixed wait model (no spread), so every figure is known."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from agent_runs import agentload, run_generate

from agentload.endpoint import SimulatorServer
from agentload.measure.results import load_results
from agentload.trace.schema import TurnKind
from agentload.trace.timeline import GapMode, turn_of, with_gaps
from agentload.trace.trace import Trace, load_trace

WAIT_S = 0.4
WAITS = (
    "waits={source: 'a fixed test model', "
    f"after_tool: {{median_s: {WAIT_S}, session_sigma: 0, call_sigma: 0}}, "
    "before_user: {median_s: 30, session_sigma: 0, call_sigma: 0}}"
)
SMALL = ["context_target=14000", WAITS]
SOLO = [*SMALL, "context_target=32000", "orchestrator.tools=[search_code, read_file, run_tests]"]
"""One agent: every wait is on the session's one path."""


def _waits(trace: Trace) -> list[int]:
    return [c.wait_ns or 0 for c in trace.calls.values()]


@pytest.fixture(scope="module")
def fast(tmp_path_factory: pytest.TempPathFactory) -> tuple[float, Trace]:
    t0 = time.monotonic()
    _, trace = run_generate(tmp_path_factory.mktemp("fast"), overrides=SMALL, sandbox="local")
    return time.monotonic() - t0, trace


@pytest.fixture(scope="module")
def solo(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return run_generate(tmp_path_factory.mktemp("solo"), overrides=SOLO, sandbox="local")[1]


def test_generate_records_the_modeled_waits_without_sleeping(fast: tuple[float, Trace]) -> None:
    wall, trace = fast
    info = trace.header.waits
    assert info is not None and not info.slept and info.model.source == "a fixed test model"
    assert trace.header.schema_ == "agentload.trace/1.3"
    calls = sorted(trace.calls.values(), key=lambda c: c.timings.submit_ns)
    tools = [c for c in calls if c.turn is TurnKind.TOOL]
    assert len(tools) >= 5 and all(c.wait_ns is not None for c in tools)
    assert sum(1 for c in tools if c.wait_ns) > len(tools) / 2
    # each wait is the drawn gap less the measured one (never below 0): the gap the trace
    # describes is the larger of the two
    for c in tools:
        prev = trace.calls_of(c.agent_id)[c.seq - 1]
        measured = c.timings.submit_ns - (prev.timings.last_token_ns or prev.timings.submit_ns)
        want = max(measured, WAIT_S * 1e9)
        assert abs(measured + (c.wait_ns or 0) - want) < 0.06e9, (c.id, measured)
    firsts = [c for c in calls if c.seq == 0]
    assert all(c.wait_ns is None and c.turn in (TurnKind.USER, TurnKind.BRIEF) for c in firsts)
    assert wall < sum(_waits(trace)) / 1e9 + 60  # not slept (the run itself takes seconds)
    # the modeled timeline moves each call by the waits on its path; the measured one is as run
    modeled = with_gaps(trace, GapMode.MODELED)
    assert with_gaps(trace, GapMode.MEASURED) is trace
    orch = trace.calls_of(next(a for a in trace.agents if a.endswith(".orch")))
    after = next(c for c in orch if any(d in trace.agents for d in c.depends_on) or any(
        (t := trace.tool_call(c.session_id, d)) is not None and t.child_agent_id
        for d in c.depends_on))  # fmt: skip
    children = [a for a in trace.agents.values() if a.parent_agent_id == after.agent_id]
    longest = max(sum(c.wait_ns or 0 for c in trace.calls_of(a.id)) for a in children)
    moved = modeled.calls[after.id].timings.submit_ns - after.timings.submit_ns
    assert moved >= longest > 0  # the call after the sub-agents waits for their waits too


def test_pace_real_sleeps_through_them(tmp_path: Path) -> None:
    t0 = time.monotonic()
    _, trace = run_generate(tmp_path, overrides=SOLO, sandbox="local", pace="real")
    wall = time.monotonic() - t0
    assert trace.header.waits is not None and trace.header.waits.slept
    orch = [c for c in trace.calls.values() if c.agent_id.endswith(".orch")]
    slept = sum(c.wait_ns or 0 for c in orch) / 1e9
    assert slept > 2 and wall > slept  # the orchestrator's waits alone are sequential
    # on a slept trace the modeled timeline is the recorded one; --gaps measured takes them out
    assert with_gaps(trace, GapMode.MODELED) is trace
    measured = with_gaps(trace, GapMode.MEASURED)
    last = max(orch, key=lambda c: c.seq)
    assert trace.calls[last.id].timings.submit_ns - measured.calls[last.id].timings.submit_ns > 1e9


def _replay(sim: SimulatorServer, trace: Path, out: Path, *extra: str) -> Any:
    r = agentload(
        "replay", str(trace), "--endpoint", sim.base_url, "--model", sim.model, "--out", str(out),
        "--concurrency", "1", "--sessions", "1", "--start-at", "zero", *extra, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r, load_results(out)


def test_replay_honours_them_and_says_so(solo: Trace, tmp_path: Path) -> None:
    trace = solo
    path = Path(trace.path)
    with SimulatorServer(profile="instant", model="agentload-sim", seed=0) as sim:
        r1, modeled = _replay(sim, path, tmp_path / "modeled")
        r2, measured = _replay(sim, path, tmp_path / "measured", "--gaps", "measured")
    assert "MODELED WAITS" in r1.stdout and "MODELED WAITS" not in r2.stdout
    assert modeled.plan.gaps == "modeled" and "a fixed test model" in (
        modeled.plan.modeled_waits or ""
    )
    assert measured.plan.gaps == "measured" and measured.plan.modeled_waits is None
    assert modeled.config.gaps == "modeled" and measured.config.gaps == "measured"

    def span(doc: Any) -> float:
        (s,) = [s for p in doc.points for s in p.sessions if s.complete]
        return (s.end_ns - s.start_ns) / 1e9

    # the session's first call waits for nothing; every later call of its one agent waits its
    # modeled wait on top of the measured gap
    session = next(iter(trace.sessions))
    waits = sum(c.wait_ns or 0 for c in trace.calls.values() if c.session_id == session) / 1e9
    assert waits > 2
    assert span(modeled) - span(measured) == pytest.approx(waits, abs=1.0)
    assert modeled.digest_manifest == measured.digest_manifest  # the same traffic, other gaps
    report = (tmp_path / "modeled" / "report.html").read_text()
    assert "MODELED WAITS" in report


def test_the_weka_export_writes_them_as_think_time(solo: Trace, tmp_path: Path) -> None:
    trace = solo
    r = agentload("trace", "export", "weka", trace.path, "-o", str(tmp_path / "w"))
    assert r.returncode == 0, r.stderr
    assert "think_time include modeled waits" in r.stdout + r.stderr
    docs = [json.loads(p.read_text()) for p in sorted((tmp_path / "w").glob("*.json"))]
    for doc in docs:
        assert doc["tool_tokens"] > 0 and doc["system_tokens"] > 0
        thinks = [
            q["think_time"] for q in doc["requests"] if q.get("input_types") == ["tool_result"]
        ]
        assert thinks and min(thinks) >= WAIT_S - 0.03  # a tool that ran longer keeps its time
        assert statistics.median(thinks) == pytest.approx(WAIT_S, abs=0.03)
    # and the realism of the trace reads the same gaps
    r = agentload("realism", trace.path, "--against", trace.path, "--json")
    rows = {row["key"]: row for row in json.loads(r.stdout.splitlines()[-1])["rows"]}
    assert rows["gap_after_tool_s"]["ours"]["p50"] == pytest.approx(WAIT_S, abs=0.03)
    r = agentload("realism", trace.path, "--against", trace.path, "--json", "--gaps", "measured")
    rows = {row["key"]: row for row in json.loads(r.stdout.splitlines()[-1])["rows"]}
    assert rows["gap_after_tool_s"]["ours"]["p50"] < WAIT_S / 2
    # a redacted copy keeps them: they are the trace's shape, not its content
    red = tmp_path / "red.agentload.jsonl.zst"
    r = agentload("trace", "redact", trace.path, "-o", str(red))
    assert r.returncode == 0, r.stderr
    copy = load_trace(red)
    assert copy.header.waits == trace.header.waits
    assert {c.id: (c.turn, c.wait_ns) for c in copy.calls.values()} == {
        c.id: (c.turn, c.wait_ns) for c in trace.calls.values()
    }


def test_the_mooncake_export_times_them_too(solo: Trace, tmp_path: Path) -> None:
    out = tmp_path / "m.jsonl"
    r = agentload("trace", "export", "mooncake", solo.path, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "timestamps include modeled waits" in r.stdout + r.stderr
    stamps = [json.loads(line)["timestamp"] for line in out.read_text().splitlines()]
    calls = sorted(solo.calls.values(), key=lambda c: c.timings.submit_ns)
    measured_ms = (calls[-1].timings.submit_ns - calls[0].timings.submit_ns) / 1e6
    waited_ms = sum(c.wait_ns or 0 for c in calls) / 1e6
    assert max(stamps) == pytest.approx(measured_ms + waited_ms, abs=5)


def test_files_of_the_earlier_schemas_still_load(solo: Trace, tmp_path: Path) -> None:
    """A trace of agentload.trace/1 (no turn, no wait, no header.waits) and a results.json of
    agentload.replay-results/1 (no plan.gaps) read as before: turns from the messages, the
    measured timeline, gaps 'measured'."""
    import zstandard

    with Path(solo.path).open("rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as z:
        raw = z.read()
    lines = []
    for line in raw.decode().splitlines():
        rec = json.loads(line)
        if rec["type"] == "header":
            rec["schema"] = "agentload.trace/1"
            rec.pop("waits", None)
        rec.pop("turn", None)
        rec.pop("wait_ns", None)
        lines.append(json.dumps(rec))
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(lines) + "\n")
    trace = load_trace(old)
    assert trace.header.waits is None and with_gaps(trace, GapMode.MODELED) is trace
    assert [turn_of(trace, c) for c in trace.calls.values()] == [
        c.turn for c in solo.calls.values()
    ]
    with SimulatorServer(profile="instant", model="agentload-sim", seed=0) as sim:
        _, doc = _replay(sim, old, tmp_path / "r")
    assert doc.plan.gaps == "modeled" and doc.plan.modeled_waits is None  # nothing to add
    data = json.loads((tmp_path / "r" / "results.json").read_text())
    data["schema"] = "agentload.replay-results/1"
    del data["plan"]["gaps"], data["plan"]["modeled_waits"]
    (tmp_path / "r" / "results.json").write_text(json.dumps(data))
    assert load_results(tmp_path / "r").plan.gaps == "measured"
