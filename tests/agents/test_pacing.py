"""The scenario's pacing reaches the built-in simulator: how often its orchestrator delegates
(``orchestrator.delegate_weight``) and how long its sub-agents work (``subagents.*.max_turns``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentload.generate.options import GenerateOptions
from agentload.generate.run import generate
from agentload.scenarios import load_scenario
from agentload.trace import load_trace


def _agents(tmp_path: Path, *overrides: str) -> tuple[int, list[int]]:
    """Sub-agents of one local ``quick`` session and each one's number of calls."""
    scenario = load_scenario("quick", ["context_target=20000", *overrides])
    opts = GenerateOptions(scenario=scenario, out=tmp_path, sandbox="local")
    trace = load_trace(asyncio.run(generate(opts)).trace_path)
    subs = [a for a in trace.agents.values() if a.parent_agent_id is not None]
    return len(subs), [len(trace.calls_of(a.id)) for a in subs]


def test_delegate_weight_sets_how_often_the_orchestrator_delegates(tmp_path: Path) -> None:
    never, _ = _agents(tmp_path / "never", "orchestrator.delegate_weight=0")
    often, _ = _agents(tmp_path / "often", "orchestrator.delegate_weight=5")
    assert never == 3  # the first round's three, then none
    assert often > never + 3


def test_sub_agents_work_up_to_their_kinds_max_turns(tmp_path: Path) -> None:
    turns = [f"subagents.{k}.max_turns=12" for k in ("code_search", "test_runner", "file_reader")]
    _, short = _agents(tmp_path / "short")
    _, long = _agents(tmp_path / "long", *turns)
    assert max(short) <= 4  # quick: 4, 3, 3
    assert max(long) > 4 and max(long) <= 12
