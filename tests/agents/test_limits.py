"""Every limit ends a session cleanly, with its reason recorded and the trace complete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_runs import run_generate
from fake_endpoint import Fail, Reply, ScriptedEndpoint

from agentload.agents import contract
from agentload.recorder import Trace

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
            tmp_path, overrides=SMALL, sandbox="local", endpoint=ep.base_url
        )
    assert _ended(trace) == "done" and _orch_calls(trace) == 1
    assert trace.header.endpoint == ep.base_url and trace.header.model == "fake"
    assert result.sessions[0].end_reason == "done"


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
