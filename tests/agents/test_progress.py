"""Progress displays rendered into a capture console, with an injected clock."""

from __future__ import annotations

import io

from rich.console import Console

from agentload.agents.tracing import SessionStats
from agentload.generate.display import LiveProgress, PlainProgress, make_progress, summary_table


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _stats(sid: str, **kw: object) -> SessionStats:
    s = SessionStats(session_id=sid, start_ns=0)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def test_live_table_shows_context_calls_and_rate() -> None:
    clock = Clock()
    console = Console(file=io.StringIO(), width=120, record=True)
    p = LiveProgress(console, context_target=400_000, clock=clock)
    p.session_started(
        _stats("s0-0", status="running", orch_last_prompt=200_000, calls=42, agents=5,
               tool_ns=3_500_000_000, prompt_tokens=900_000, completion_tokens=100_000)
    )  # fmt: skip
    p.session_started(_stats("s0-1", status="sandbox"))
    clock.now = 10 * 10**9
    console.print(p.render())
    text = console.export_text()
    assert "200.0K (50%)" in text and "42" in text and "3.5" in text
    assert "sandbox" in text
    assert "1.00M tokens (100,000 tok/s, output 10,000 tok/s)" in text


def test_plain_lines_without_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200)
    p = make_progress(console, context_target=40_000)
    assert isinstance(p, PlainProgress)
    s = _stats("s1-0", status="running", orch_last_prompt=12_000, calls=7)
    p.session_started(s)
    assert p.status_lines()[0] == "s1-0: running · context 12.0K · 7 calls · tools 0.0s"
    s.end_reason, s.end_ns, s.orch_first_prompt = "context_target", 2 * 10**9, 8_000
    p.session_ended(s)
    lines = out.getvalue().splitlines()
    assert lines[0] == "s1-0: started"
    assert lines[1].startswith("s1-0: ended (context_target) after 2.0s: 7 calls")
    assert "8.0K -> 12.0K" in lines[1]


def test_summary_table_totals_and_eval_column() -> None:
    rows = [
        {"session": f"s0-{i}", "end_reason": "context_target", "agents": 3, "calls": 10,
         "prompt_tokens": 1000, "completion_tokens": 100, "orchestrator_prompt_first": 8000,
         "orchestrator_prompt_last": 40500, "tool_time_share": 0.25, "wall_s": 2.0 + i,
         "eval_passed": i == 0}
        for i in range(2)
    ]  # fmt: skip
    console = Console(file=io.StringIO(), width=200, record=True)
    console.print(summary_table(rows, evaluate=True))
    text = console.export_text()
    assert "8.0K→40.5K" in text and "25%" in text
    assert "pass" in text and "FAIL" in text and "1/2" in text
    assert "2.0K/200" in text and "3.0" in text  # totals: tokens summed, wall = the longest


def test_calls_in_flight_show_their_streamed_chunks_and_age() -> None:
    from agentload.agents.tracing import LiveCall

    clock = Clock()
    s = _stats("s0-0", status="running", calls=3)
    s.live["s0-0.orch.3"] = LiveCall(start_ns=0, chunks=1234)
    clock.now = 200 * 10**9
    plain = PlainProgress(Console(file=io.StringIO(), width=200), 40_000, clock=clock)
    plain.session_started(s)
    assert plain.status_lines()[0] == (
        "s0-0: running · context - · 3 calls · tools 0.0s · streaming 1 call: 1,234 chunks, 200s"
    )
    s.live["s0-0.orch.3.code_search1.0"] = LiveCall(start_ns=150 * 10**9, chunks=6)
    assert plain.status_lines()[0].endswith("streaming 2 calls: 1,240 chunks, 200s")
    console = Console(file=io.StringIO(), width=160, record=True)
    live = LiveProgress(console, context_target=40_000, clock=clock)
    live.session_started(s)
    console.print(live.render())
    assert "2 calls: 1,240 chunks, 200s" in console.export_text()
    s.live.clear()
    assert plain.status_lines()[0] == "s0-0: running · context - · 3 calls · tools 0.0s"
