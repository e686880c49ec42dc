"""Graph shape snapshots: a change to the orchestration shows up in review as a diff here.

Regenerate after an intended change with ``AGENTLOAD_UPDATE_SNAPSHOTS=1 pytest tests/agents``.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentload import contract
from agentload.agents.graphs import (
    _merge_results,
    build_orchestrator_graph,
    collect,
    route_orchestrator,
)
from agentload.agents.steps import ToolOutcome
from agentload.agents.subagents import build_subagent_graph

SNAP = Path(__file__).parent / "snapshots"


def _check(name: str, mermaid: str) -> None:
    path = SNAP / f"{name}.mmd"
    if os.environ.get("AGENTLOAD_UPDATE_SNAPSHOTS"):
        path.write_text(mermaid)
    assert mermaid == path.read_text(), f"graph {name} changed; see {path}"


def test_orchestrator_graph_shape() -> None:
    mermaid = build_orchestrator_graph().get_graph().draw_mermaid()
    _check("orchestrator", mermaid)
    for kind in contract.SUBAGENT_ROLES:
        assert f"agent -.-> {kind};" in mermaid and f"{kind} --> collect;" in mermaid
    assert "collect --> agent;" in mermaid and "agent -.-> __end__;" in mermaid
    assert "agent -.-> follow_up;" in mermaid and "follow_up --> agent;" in mermaid


@pytest.mark.parametrize("kind", contract.SUBAGENT_ROLES)
def test_subagent_graph_shape(kind: str) -> None:
    mermaid = build_subagent_graph(kind).get_graph().draw_mermaid()
    _check(kind, mermaid)
    assert "agent -.-> tools;" in mermaid and "tools --> agent;" in mermaid


def test_unknown_subagent_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown sub-agent kind"):
        build_subagent_graph("planner")


def _tc(i: int, name: str, args: str) -> dict[str, object]:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}


def test_route_sends_one_task_per_delegation_and_one_for_direct_tools() -> None:
    calls = [
        _tc(0, "delegate", '{"kind": "code_search", "task": "find x"}'),
        _tc(1, "read_file", '{"path": "a.py"}'),
        _tc(2, "delegate", '{"kind": "test_runner", "task": "run"}'),
        _tc(3, "delegate", '{"kind": "nope", "task": "?"}'),  # invalid: answered by `tools`
        _tc(4, "run_tests", "{}"),
    ]
    rt: Any = SimpleNamespace(context=SimpleNamespace(settings=SimpleNamespace(follow_ups=("go",))))
    sends = route_orchestrator({"call_id": "s.orch.0", "tool_calls": calls}, runtime=rt)
    assert isinstance(sends, list)
    assert [s.node for s in sends] == ["tools", "code_search", "test_runner"]
    assert [i for i, _ in sends[0].arg["calls"]] == [1, 3, 4]
    assert [s.arg["index"] for s in sends[1:]] == [0, 2]
    # an answer without tool calls: the next follow-up while one is left, then the end (done)
    assert route_orchestrator({"call_id": "x", "tool_calls": []}, runtime=rt) == "follow_up"
    done = {"call_id": "x", "tool_calls": [], "follow_ups_sent": 1}
    assert route_orchestrator(done, runtime=rt) == "__end__"  # type: ignore[arg-type]


def test_collect_appends_results_in_tool_call_order() -> None:
    calls = [_tc(i, "read_file", "{}") for i in range(3)]
    # Results arrive in completion order 2, 0, 1; the messages must follow tool-call order.
    results: dict[int, ToolOutcome] = {}
    for i in (2, 0, 1):
        results = _merge_results(results, {i: ToolOutcome(i, f"c{i}", f"out{i}", f"dep{i}")})
    update = collect({"tool_calls": calls, "results": results})
    assert [m["tool_call_id"] for m in update["messages"]] == ["c0", "c1", "c2"]
    assert [m["content"] for m in update["messages"]] == ["out0", "out1", "out2"]
    assert update["depends_on"] == ["dep0", "dep1", "dep2"]
    assert _merge_results(results, update["results"]) == {}
