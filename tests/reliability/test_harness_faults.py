"""``generate``'s agent harness against what real models and servers do (issue 10): replies cut
at ``max_tokens``, tool calls whose arguments are cut mid-JSON, a server that refuses a history
it cannot parse (as llama.cpp does), errors that will repeat, error texts of any length.

Each case runs the real CLI (``-s quick --sandbox local``) against the fault server, whose
``strict`` fault parses the history's tool-call arguments the way llama.cpp does.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from faultserver import CUT_ARGUMENTS, FaultServer
from genrun import FAST, attempts, generate, validate_cli
from rich.console import Console

from agentload.agents.subagents import MAX_CUT_REPLIES
from agentload.generate.display import PlainProgress
from agentload.generate.options import GenerateOptions
from agentload.generate.run import generate as run_generate
from agentload.scenarios import load_scenario

QUICK_ANSWERS = 6  # quick on a model that only answers: the first answer and 5 follow-ups


def _args(srv: FaultServer, retries: int = 1) -> list[str]:
    return ["--endpoint", srv.base_url, "--call-timeout", "5", "--retries", str(retries)]


def _bodies(srv: FaultServer) -> list[dict[str, object]]:
    return [orjson.loads(b) for b in srv.bodies]


def test_every_call_sends_the_scenarios_max_tokens(
    fault_server: Callable[..., FaultServer], tmp_path: Path
) -> None:
    srv = fault_server(chat=["ok"])
    run = generate(tmp_path / "default", *_args(srv), "--json")
    assert run.proc.returncode == 0, run.proc.stderr
    assert [b["max_tokens"] for b in _bodies(srv)] == [4096] * QUICK_ANSWERS
    srv2 = fault_server(chat=["ok"])
    run = generate(tmp_path / "small", *_args(srv2), "-c", "orchestrator.max_tokens=256")
    assert run.proc.returncode == 0, run.proc.stderr
    assert {b["max_tokens"] for b in _bodies(srv2)} == {256}
    assert {c.request.max_tokens for c in run.trace().calls.values()} == {256}


def test_a_tool_call_cut_mid_json_gets_a_tool_error_and_the_history_stays_valid(
    fault_server: Callable[..., FaultServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reply is cut inside a tool call's arguments; the next request (to a server that
    parses the history as llama.cpp does) carries them repaired, and the tool result says
    what happened. Before: the cut text went back verbatim and every later request was a 500."""
    srv = fault_server(chat=["cutcall", "strict"])
    run = generate(tmp_path, *_args(srv), "--json")
    assert run.proc.returncode == 0, run.proc.stderr
    assert srv.counts["strict_refused"] == 0
    validate_cli(run.trace_path, capsys)
    trace = run.trace()
    (session,) = trace.sessions.values()
    assert session.end_reason == "done"
    # the history sent onward: the call repaired (its last, cut-off member dropped)
    second = _bodies(srv)[1]
    messages = second["messages"]
    assert isinstance(messages, list)
    (call,) = messages[-2]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {
        "path": "email/__init__.py",
        "start_line": 1,
    }
    tool_msg = messages[-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == call["id"]
    assert tool_msg["content"].startswith("error: read_file: the reply was cut at the length")
    assert "not valid JSON" in tool_msg["content"] and "was not run" in tool_msg["content"]
    # the trace keeps the model's own text
    cut = [t for t in trace.tool_calls.values() if t.raw_arguments is not None]
    assert [t.raw_arguments for t in cut] == [CUT_ARGUMENTS] * QUICK_ANSWERS
    assert all(t.error and "not valid JSON" in t.error for t in cut)
    assert all(t.arguments == {"path": "email/__init__.py", "start_line": 1} for t in cut)


def test_replies_cut_at_the_length_limit_are_continued_then_end_the_session_length(
    fault_server: Callable[..., FaultServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: each cut reply counted as an answer; six of them ended the session ``done``."""
    srv = fault_server(chat=["length"])
    run = generate(tmp_path, *_args(srv), "--json")
    assert run.proc.returncode == 0, run.proc.stderr  # the model's limit, not an error of ours
    validate_cli(run.trace_path, capsys)
    trace = run.trace()
    (session,) = trace.sessions.values()
    assert session.end_reason == "length"
    assert len(trace.calls) == srv.chat_requests == MAX_CUT_REPLIES
    for body in _bodies(srv)[1:]:
        last = body["messages"][-1]  # type: ignore[index]
        assert last["role"] == "user" and "cut off at the output limit of 4096" in last["content"]
    assert sum(1 for e in trace.events if e.kind == "continue") == MAX_CUT_REPLIES - 1
    assert orjson.loads(run.proc.stdout)["sessions"][0]["end_reason"] == "length"


def test_a_cut_reply_then_a_complete_one_goes_on(
    fault_server: Callable[..., FaultServer], tmp_path: Path
) -> None:
    srv = fault_server(chat=["length", "ok"])
    run = generate(tmp_path, *_args(srv), "--json")
    assert run.proc.returncode == 0, run.proc.stderr
    trace = run.trace()
    assert trace.sessions["s0-0"].end_reason == "done"
    assert len(trace.calls) == 2 * QUICK_ANSWERS  # each answer after one continuation
    assert sum(1 for e in trace.events if e.kind == "continue") == QUICK_ANSWERS
    assert sum(1 for e in trace.events if e.kind == "follow_up") == QUICK_ANSWERS - 1


@pytest.mark.parametrize(
    ("fault", "requests", "cause"),
    [
        ("500parse", 1, "request_error"),  # llama.cpp: the history cannot be parsed
        ("500", 2, "repeated"),  # the same text on the retry: it will repeat
        ("401", 1, "bad_request"),
    ],
)
def test_errors_that_will_repeat_are_not_retried(
    fault_server: Callable[..., FaultServer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fault: str,
    requests: int,
    cause: str,
) -> None:
    srv = fault_server(chat=[fault])
    run = generate(tmp_path, *_args(srv, retries=3), "--json")
    assert run.proc.returncode == 1, run.proc.stderr
    validate_cli(run.trace_path, capsys)
    trace = run.trace()
    assert trace.sessions["s0-0"].end_reason == "endpoint_error"
    assert srv.chat_requests == requests == attempts(trace).total
    (err,) = [e for e in trace.events if e.kind == "error"]
    assert err.details["reason"] == "endpoint_error" and err.details["cause"] == cause
    assert "not retried" in err.details["error"]


def test_a_long_server_error_is_clipped_where_it_is_shown(
    fault_server: Callable[..., FaultServer], tmp_path: Path
) -> None:
    srv = fault_server(chat=["500long"])
    run = generate(tmp_path, *_args(srv, retries=0))
    assert run.proc.returncode == 1, run.proc.stderr
    (line,) = [ln for ln in run.proc.stdout.splitlines() if ln.startswith("s0-0: endpoint_error")]
    assert "overloaded: xxx" in line and "more characters]" in line
    assert len(line) < 500  # the server's text was 1,100 characters
    (err,) = [e for e in run.trace().events if e.kind == "error"]
    assert len(err.details["error"]) < 500 and "more characters]" in err.details["error"]


def test_the_progress_line_shows_a_running_calls_streamed_chunks(
    fault_server: Callable[..., FaultServer], tmp_path: Path
) -> None:
    """A reply that streams on and on is visible while it runs (before: ``0 calls`` only)."""
    srv = fault_server(chat=["endless"])
    out = io.StringIO()
    progress = PlainProgress(Console(file=out, width=300), 40_000, interval_s=0.3)
    opts = GenerateOptions(
        scenario=load_scenario(FAST[1], ["wall_budget_s=3"]),
        endpoint=srv.base_url,
        out=tmp_path,
        sandbox="local",
        retries=0,
        call_timeout_s=2.5,
    )

    async def main() -> None:
        async with progress:
            await run_generate(opts, progress)

    asyncio.run(main())
    streaming = [ln for ln in out.getvalue().splitlines() if "· streaming 1 call: " in ln]
    assert streaming, out.getvalue()
    chunks = [
        int(ln.split("streaming 1 call: ")[1].split(" chunks")[0].replace(",", ""))
        for ln in streaming
    ]
    assert chunks[-1] > 10 and chunks == sorted(chunks)
