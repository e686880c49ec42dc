"""`generate` end to end on the built-in simulator: the recorded trace reads back whole.

The agent tree, the depends_on edges, the tool facts, determinism, and (marked ``docker``) the
same session with run_tests executed in a real container, which is gone afterwards.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from agent_runs import fingerprint, run_generate

from agentload import contract
from agentload.endpoint.policy.roles import infer_role
from agentload.generate.run import RunResult
from agentload.scenarios.models import Scenario
from agentload.trace import Trace, load_trace


def check_trace(result: RunResult, trace: Trace, *, sandbox: str) -> None:
    """Structure every generated trace must have (see docs/generate.md)."""
    assert trace.truncated is None
    assert trace.header.scenario == "quick" and trace.header.seed == 0
    assert trace.header.scenario_config is not None
    scenario = Scenario.model_validate(trace.header.scenario_config)
    (session,) = trace.sessions.values()
    assert session.end_reason == "context_target"
    assert session.sandbox == sandbox and session.end_ns is not None

    orch = [a for a in trace.agents.values() if a.role == contract.ORCHESTRATOR]
    assert len(orch) == 1 and orch[0].parent_agent_id is None
    orch_id = orch[0].id
    subs = [a for a in trace.agents.values() if a.role != contract.ORCHESTRATOR]
    assert subs and {a.role for a in subs} <= set(contract.SUBAGENT_ROLES)
    for a in subs:
        # Every sub-agent hangs off a delegate call of the orchestrator that names it back.
        assert a.parent_agent_id == orch_id
        tc = trace.tool_calls[a.parent_tool_call_id or ""]
        assert tc.name == contract.DELEGATE and tc.child_agent_id == a.id
        assert tc.agent_id == orch_id and tc.arguments["kind"] == a.role
        assert a.end_ns is not None and tc.start_ns <= a.start_ns <= a.end_ns <= tc.end_ns
        first = trace.calls_of(a.id)[0]
        msgs = trace.messages(first)
        assert [m["role"] for m in msgs] == ["system", "user"]  # a fresh context
        # Its system message is the scenario's own words: no control text of ours.
        assert msgs[0]["content"] == scenario.subagents[a.role].system_prompt.strip() + "\n"
        assert msgs[1]["content"] == tc.arguments["task"]

    calls = trace.calls_of(orch_id)
    first_msgs = trace.messages(calls[0])
    # the system message is the scenario's instructions alone (the static prefix); the
    # repository context comes first in the user message, the task after it
    assert first_msgs[0]["content"] == scenario.orchestrator.system_prompt.strip() + "\n"
    assert first_msgs[1]["content"].startswith("## Repository map\n")
    assert first_msgs[1]["content"].endswith(f"\n\n## Task\n{scenario.task}")
    prompts = [trace.prompt_tokens(c) for c in calls]
    assert prompts == sorted(prompts)  # the whole history is carried forward
    assert prompts[-1] >= 40_000 > prompts[-2]  # stopped at the context target
    assert 7_000 <= prompts[0] <= 9_000
    for prev, cur in itertools.pairwise(calls):
        # Each prompt extends the previous one by its reply and the results it depends on.
        assert trace.messages(cur)[: len(prev.messages)] == trace.messages(prev)
        expected = [
            next(
                (t.child_agent_id or t.id)
                for t in trace.tool_calls.values()
                if t.id == ref.id and t.llm_call_id == prev.id
            )
            for ref in prev.response.tool_calls
        ]
        assert cur.depends_on == expected
        appended = trace.messages(cur)[len(prev.messages) + 1 :]
        assert [m["tool_call_id"] for m in appended] == [r.id for r in prev.response.tool_calls]
    for c in trace.calls.values():
        assert (
            c.timings.submit_ns < (c.timings.first_token_ns or 0) <= (c.timings.last_token_ns or 0)
        )
        assert c.usage.prompt_tokens is not None and c.usage.completion_tokens
        for dep in c.depends_on:
            assert dep in trace.tool_calls or dep in trace.agents

    runs = [t for t in trace.tool_calls.values() if t.name == contract.RUN_TESTS]
    assert runs, "the session never ran the tests"
    assert all(t.exit_code is not None and t.output_bytes > 0 for t in runs)
    assert any(t.exit_code != 0 for t in runs), "the injected fault should fail some tests"
    text = [
        m["content"]
        for c in trace.calls.values()
        for m in trace.messages(c)
        if m["role"] == "tool" and "exit code:" in str(m.get("content"))
    ]
    assert any("quoprimime.py" in t for t in text)  # real tracebacks into the faulty module
    if sandbox == "docker":
        assert all(t.sandbox_id for t in runs)

    (row,) = result.sessions
    assert row.orch_first_prompt == prompts[0] and row.orch_last_prompt == prompts[-1]
    assert row.calls == len(trace.calls) and row.agents == len(trace.agents)


def test_quick_generate_local_reads_back(quick_local: tuple[RunResult, Trace]) -> None:
    check_trace(*quick_local, sandbox="local")


def test_the_simulator_plays_each_request_as_the_agent_that_sent_it(
    quick_local: tuple[RunResult, Trace],
) -> None:
    """Nothing of ours is in a request, yet every recorded request (first ones included) is
    recognised as its agent's role from what a real server sees: tools and messages."""
    _, trace = quick_local
    roles = {a.id: a.role for a in trace.agents.values()}
    seen = set()
    for c in trace.calls.values():
        msgs = trace.messages(c)
        names = [t["function"]["name"] for t in trace.tools(c) or ()]
        assert infer_role(msgs, names) == roles[c.agent_id], (c.id, names)
        assert not any("[agentload" in str(m.get("content")) for m in msgs if m["role"] != "tool")
        seen.add(roles[c.agent_id])
    assert contract.ORCHESTRATOR in seen and seen & set(contract.SUBAGENT_ROLES)


def test_every_call_sends_its_roles_max_tokens(quick_local: tuple[RunResult, Trace]) -> None:
    """The scenario's orchestrator.max_tokens (4096) and subagents.KIND.max_tokens (2048)."""
    _, trace = quick_local
    sent = {(trace.agents[c.agent_id].role, c.request.max_tokens) for c in trace.calls.values()}
    roles = {role for role, _ in sent}
    assert contract.ORCHESTRATOR in roles and len(roles) > 1
    assert sent == {(r, 4096 if r == contract.ORCHESTRATOR else 2048) for r in roles}


def test_same_seed_same_trace_content_other_seed_other_content(tmp_path: Path) -> None:
    small = ["context_target=16000"]
    _, one = run_generate(tmp_path, overrides=small, sandbox="local")
    _, two = run_generate(tmp_path, overrides=small, sandbox="local")
    a, b = fingerprint(one), fingerprint(two)
    assert len(a["calls"]) > 5 and len(a["agents"]) > 1
    assert a == b
    # ... while the timings are the run's own.
    t1 = sorted(c.timings.submit_ns for c in one.calls.values())
    t2 = sorted(c.timings.submit_ns for c in two.calls.values())
    assert t1 != t2
    _, other = run_generate(tmp_path, overrides=small, sandbox="local", seed=7)
    (s,) = other.sessions.values()
    assert s.id == "s7-0" and s.meta["seed"] == 7 and other.header.seed == 7
    assert fingerprint(other)["calls"] != a["calls"]


def _agentload_containers(client: Any, pid: int) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": f"agentload.pid={pid}"}))


@pytest.mark.docker
def test_quick_generate_docker(docker_client: Any, tmp_path: Path) -> None:
    result, trace = run_generate(tmp_path, sandbox="docker")
    check_trace(result, trace, sandbox="docker")
    assert _agentload_containers(docker_client, os.getpid()) == []


@pytest.mark.docker
def test_parallel_sessions_each_get_a_sandbox(docker_client: Any, tmp_path: Path) -> None:
    _, trace = run_generate(
        tmp_path, overrides=["context_target=12000"], sandbox="docker", sessions=3, levels=[2]
    )
    assert sorted(trace.sessions) == ["s0-0", "s0-1", "s0-2"]
    assert [s.meta["seed"] for s in sorted(trace.sessions.values(), key=lambda s: s.id)] == [
        0,
        1,
        2,
    ]
    ids = {s.meta["sandbox_id"] for s in trace.sessions.values()}
    assert len(ids) == 3
    assert len({a.session_id for a in trace.agents.values()}) == 3
    assert _agentload_containers(docker_client, os.getpid()) == []


@pytest.mark.docker
def test_an_exception_mid_session_leaves_no_container(
    docker_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentload.agents.session as session_mod

    def broken(**kw: Any) -> Any:  # fails after the sandbox is up
        raise RuntimeError("injected failure")

    monkeypatch.setattr(session_mod, "build_orchestrator_prompt", broken)
    with pytest.raises(RuntimeError, match="injected failure"):
        run_generate(tmp_path, sandbox="docker")
    assert _agentload_containers(docker_client, os.getpid()) == []
    (path,) = tmp_path.glob("*.zst")
    assert load_trace(path).truncated is None  # the trace was still closed
