"""Every limit ends a session cleanly, with its reason recorded and the trace complete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_runs import run_generate
from fake_endpoint import Fail, Reply, ScriptedEndpoint

from agentload import contract
from agentload.trace import Trace

SMALL = ["orchestrator.initial_context_tokens=3000", "context_target=40000"]


def _ended(trace: Trace) -> str:
    (s,) = trace.sessions.values()
    assert s.end_ns is not None
    for a in trace.agents.values():
        assert a.end_ns is not None, f"agent {a.id} has no end record"
    return str(s.end_reason)


def _orch_calls(trace: Trace) -> int:
    return sum(1 for c in trace.calls.values() if c.agent_id.endswith(".orch"))


def test_answer_without_tools_is_done(tmp_path: Path) -> None:
    with ScriptedEndpoint(lambda b: Reply("All fixed.", [], 3000)) as ep:
        result, trace = run_generate(
            tmp_path, overrides=[*SMALL, "follow_ups=[]"], sandbox="local", endpoint=ep.base_url
        )
    assert _ended(trace) == "done" and _orch_calls(trace) == 1
    assert trace.header.endpoint == ep.base_url and trace.header.model == "fake"
    assert result.sessions[0].end_reason == "done"


def test_an_early_answer_gets_the_next_follow_up(tmp_path: Path) -> None:
    """A model that answers before the target is sent the scenario's follow-ups one by one,
    as user messages; after the last one, its answer ends the session."""

    def handler(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "user" and last["content"].startswith("Now"):
            call = {"id": f"lf{len(body['messages'])}", "name": "list_files", "arguments": "{}"}
            return Reply("on it", [call], 3000)  # works on the follow-up, then answers
        return Reply("Done with that.", [], 3000)

    follow = 'follow_ups=["Now check the docs.", "Now tidy up."]'
    with ScriptedEndpoint(handler) as ep:
        _, trace = run_generate(
            tmp_path, overrides=[*SMALL, follow], sandbox="local", endpoint=ep.base_url
        )
        sent = ep.requests
    assert _ended(trace) == "done" and _orch_calls(trace) == 5
    # answer, follow-up 1 -> tool call, answer, follow-up 2 -> tool call, answer
    users = [m["content"] for m in sent[-1]["messages"] if m["role"] == "user"]
    assert users[1:] == ["Now check the docs.", "Now tidy up."]
    assert [m["role"] for m in sent[1]["messages"][-2:]] == ["assistant", "user"]
    events = [e for e in trace.events if e.kind == "follow_up"]
    assert [e.details["index"] for e in events] == [0, 1]
    orch = [
        c for c in sorted(trace.calls.values(), key=lambda c: c.seq) if c.agent_id.endswith(".orch")
    ]
    assert orch[1].depends_on == [] and orch[2].depends_on  # after a follow-up: no tool waited on


def test_follow_ups_stop_at_the_context_target(tmp_path: Path) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        return Reply("Answered.", [], 15_000 * len(body["messages"]))  # 30K, 60K: the target

    with ScriptedEndpoint(handler) as ep:
        _, trace = run_generate(tmp_path, overrides=SMALL, sandbox="local", endpoint=ep.base_url)
    assert _ended(trace) == "context_target" and _orch_calls(trace) == 2
    assert [e.details["index"] for e in trace.events if e.kind == "follow_up"] == [0]


def test_context_target_reached(tmp_path: Path) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        n = len(body["messages"])  # grows by 2 per round: 2, 4, 6 ...
        call = {"id": "x", "name": "list_files", "arguments": "{}"}
        return Reply("looking", [call], 10_000 * n)

    with ScriptedEndpoint(handler) as ep:
        _, trace = run_generate(tmp_path, overrides=SMALL, sandbox="local", endpoint=ep.base_url)
    assert _ended(trace) == "context_target"
    assert [trace.prompt_tokens(c) for c in trace.calls.values()] == [20_000, 40_000]


def test_max_rounds(tmp_path: Path) -> None:
    _, trace = run_generate(
        tmp_path, overrides=[*SMALL, "orchestrator.max_rounds=3"], sandbox="local"
    )
    assert _ended(trace) == "max_rounds" and _orch_calls(trace) == 3


def test_wall_budget(tmp_path: Path) -> None:
    _, trace = run_generate(
        tmp_path, overrides=["wall_budget_s=1.5", "context_target=1000000"], sandbox="local"
    )
    assert _ended(trace) == "wall_budget"
    (s,) = trace.sessions.values()
    calls = list(trace.calls.values())
    assert calls and max(c.timings.submit_ns for c in calls) < s.start_ns + 3 * 10**9


def test_endpoint_errors_after_retries(tmp_path: Path) -> None:
    with ScriptedEndpoint(lambda b: Fail(503, "the server is overloaded")) as ep:
        _, trace = run_generate(
            tmp_path, overrides=SMALL, sandbox="local", endpoint=ep.base_url, retries=2,
            retry_backoff_s=0.01,
        )  # fmt: skip
        assert len(ep.requests) == 3
    assert _ended(trace) == "endpoint_error"
    events = [e for e in trace.events if e.session_id is not None]
    assert [e.kind for e in events] == ["retry", "retry", "error"]
    assert [e.details["attempt"] for e in events[:2]] == [1, 2]
    assert "overloaded" in events[-1].details["error"]


def test_endpoint_context_limit(tmp_path: Path) -> None:
    def handler(body: dict[str, Any]) -> Reply | Fail:
        if len(body["messages"]) > 2:
            return Fail(400, "This model's maximum context length is 4096 tokens.")
        args = json.dumps({"path": "email/__init__.py"})
        return Reply("reading", [{"id": "r", "name": contract.READ_FILE, "arguments": args}])

    with ScriptedEndpoint(handler) as ep:
        _, trace = run_generate(tmp_path, overrides=SMALL, sandbox="local", endpoint=ep.base_url)
        assert len(ep.requests) == 2  # not retried
    assert _ended(trace) == "context_limit"
    (tool,) = trace.tool_calls.values()
    assert tool.name == contract.READ_FILE and tool.output_bytes > 0 and tool.error is None
    (error,) = [e for e in trace.events if e.kind == "error"]
    assert error.details["reason"] == "context_limit" and "4096" in error.details["error"]
