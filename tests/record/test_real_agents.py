"""The real agents people run, recorded by ``agentload record``: Claude Code and Codex CLI
(npm; today's release and an older one) and mini-swe-agent (PyPI), each installed and pinned by
``scripts/agents.sh`` and driven by a scripted model (``real_agents``) through the proxy.

Each test checks what a user would check of the trace: every model request the upstream served
is an ``llm_call``; one session per agent run; every call of the main agent in one agent (also
when the client fills in tool arguments or drops a reply and asks again); the sub-agents are
children of the calls that spawned them; the tool calls the agent ran are there; replay with
``--start-at zero`` sends every call; the API key is nowhere in the trace; and the logs the
agent wrote meanwhile (Claude Code's session log, Codex's rollouts) import as the proxy recorded
the run (``log_imports``). The agents skip where
``scripts/agents.sh install`` has not run, and fail instead under AGENTLOAD_REQUIRE_AGENTS=1."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # scripted_upstream, real_agents, agents_helpers

from agents_helpers import check_replays, validate
from log_imports import check_claude_code_log, check_codex_rollouts
from real_agents import (
    CLAUDE_CODE,
    CODEX,
    MINI_SWE_AGENT,
    Ran,
    agent_exe,
    claude_code_script,
    codex_script,
    fixed,
    mini_swe_agent_script,
    run_claude_code,
    run_codex,
    run_mini_swe_agent,
    scratch_repo,
)
from scripted_upstream import Asked, ScriptedUpstream, Turn

from agentload.trace.schema import AgentRecord, LLMCallRecord
from agentload.trace.trace import Trace, load_trace

KEY = "sk-real-agent-test-0123456789"


def _dispatch(asked: Asked) -> Turn:
    """One upstream for every agent at once: each request to its agent's script."""
    if asked.api == "messages":
        return claude_code_script(asked)
    if asked.api == "responses":
        return codex_script(asked)
    return mini_swe_agent_script(asked)


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    up = ScriptedUpstream(_dispatch).start()
    yield up
    up.stop()


def _trace(path: Path, upstream: ScriptedUpstream) -> Trace:
    """The trace: it validates, loads whole, holds one ``llm_call`` per model request the
    upstream served (none failed) and not the API key."""
    validate(path)
    assert KEY.encode() not in path.read_bytes()
    trace = load_trace(path)
    assert trace.truncated is None
    assert len(trace.calls) == len(upstream.asked), (len(trace.calls), len(upstream.asked))
    errors = [(c.id, c.error) for c in trace.calls.values() if c.error is not None]
    assert not errors, errors
    return trace


def _main_agent(trace: Trace, session_id: str, first_tool: str) -> AgentRecord:
    """The session's agent whose first call made ``first_tool`` calls (the main agent)."""
    found = [
        a
        for a in trace.agents.values()
        if a.session_id == session_id
        and a.parent_agent_id is None
        and (calls := trace.calls_of(a.id))
        and [t.name for t in calls[0].response.tool_calls][:1] == [first_tool]
    ]
    assert len(found) == 1, [(a.id, a.role) for a in trace.agents.values()]
    return found[0]


def _tools(calls: list[LLMCallRecord]) -> list[list[str]]:
    return [[t.name for t in c.response.tool_calls] for c in calls]


def _check_children(
    trace: Trace, parent: AgentRecord, spawn_tool: str, role: str | None, n_calls: int
) -> list[AgentRecord]:
    """The agent's sub-agents: one per ``spawn_tool`` call its calls made, each the child of
    that call (``parent_tool_call_id``, and the call's ``tool_call`` record names it), in the
    same session, each with ``n_calls`` calls."""
    spawns = [
        t for c in trace.calls_of(parent.id) for t in c.response.tool_calls if t.name == spawn_tool
    ]
    kids = [a for a in trace.agents.values() if a.parent_agent_id == parent.id]
    assert len(kids) == len(spawns) > 0, ([t.id for t in spawns], [(a.id, a.role) for a in kids])
    assert sorted(str(a.parent_tool_call_id) for a in kids) == sorted(t.id for t in spawns)
    for kid in kids:
        assert kid.session_id == parent.session_id
        if role is not None:
            assert kid.role == role
        assert len(trace.calls_of(kid.id)) == n_calls, (kid.id, _tools(trace.calls_of(kid.id)))
        records = [r for r in trace.tool_calls.values() if r.child_agent_id == kid.id]
        assert [r.id for r in records] == [kid.parent_tool_call_id]
    return kids


def _no_cross_session(trace: Trace) -> None:
    """Every agent's parent, every call's dependency, in its own session."""
    for a in trace.agents.values():
        if a.parent_agent_id is not None:
            assert trace.agents[a.parent_agent_id].session_id == a.session_id, a.id
    for c in trace.calls.values():
        for dep in c.depends_on:
            owner = trace.calls.get(dep) or trace.tool_calls.get(dep) or trace.agents.get(dep)
            if owner is not None:
                assert owner.session_id == c.session_id, (c.id, dep)


def _one_run_checked(
    proxy: Any,
    upstream: ScriptedUpstream,
    simulator: Any,
    tmp_path: Path,
    tree: Callable[[Trace, str], None],
) -> None:
    """After one agent run through ``proxy``: the trace (``_trace``) holds one session whose
    tree ``tree`` checks, and it replays against the simulator."""
    path = proxy.stop()
    trace = _trace(path, upstream)
    assert len(trace.sessions) == 1, list(trace.sessions)
    tree(trace, next(iter(trace.sessions)))
    check_replays(path, trace, simulator.base_url, "agentload-sim", tmp_path / "replay")


# -- each agent on its own ----------------------------------------------------------------------
def _claude_code(trace: Trace, session_id: str) -> None:
    """Claude Code's tree: the main agent's five calls in one agent (Agent ×2; Read; Edit, which
    Claude Code carries on with ``replace_all: false`` filled in; Bash; the answer), and two
    ``general-purpose`` sub-agents of two calls each under the two ``Agent`` calls."""
    main = _main_agent(trace, session_id, "Agent")
    calls = trace.calls_of(main.id)
    assert _tools(calls) == [["Agent", "Agent"], ["Read"], ["Edit"], ["Bash"], []]
    assert not [a for a in trace.agents.values() if a.role == "Edit"]
    _check_children(trace, main, "Agent", "general-purpose", 2)
    # The answer after the sub-agents depends on both of them.
    kids = {a.id for a in trace.agents.values() if a.parent_agent_id == main.id}
    assert kids <= set(calls[1].depends_on), (kids, calls[1].depends_on)


@pytest.mark.parametrize("spec", CLAUDE_CODE)
def test_claude_code_is_recorded_whole(
    spec: str, upstream: ScriptedUpstream, record_proxy: Any, simulator: Any, tmp_path: Path
) -> None:
    exe = agent_exe(spec)
    proxy = record_proxy(upstream=upstream.url)
    work = scratch_repo(tmp_path / "repo")
    home = tmp_path / "home"
    run_claude_code(exe, proxy.url, work, home, KEY, "cc").check()
    assert fixed(work)
    _one_run_checked(proxy, upstream, simulator, tmp_path, _claude_code)
    # The session log Claude Code wrote meanwhile imports as the proxy recorded the run.
    recorded = load_trace(proxy.stop())
    exact = spec == CLAUDE_CODE[0]  # 2.1.332 logs its requests (api-request records)
    check_claude_code_log(home, recorded, upstream, exact, simulator, tmp_path, KEY)


@pytest.mark.parametrize("spec", CLAUDE_CODE)
def test_claude_code_works_against_the_simulator_through_the_proxy(
    spec: str, record_proxy: Any, simulator: Any, tmp_path: Path
) -> None:
    """The built-in simulator serves today's Claude Code (the default target of a recording
    with no GPU and no key): it exits 0, every request it sent is a recorded call and none
    failed. The simulator's model picks the one tool it is offered (``Read``) with made-up
    arguments, then answers in text."""
    exe = agent_exe(spec)
    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    work = scratch_repo(tmp_path / "repo")
    ran = run_claude_code(exe, proxy.url, work, tmp_path / "home", KEY, "sim", model="agentload-sim", tools="Read")  # fmt: skip
    ran.check()
    path = proxy.stop()
    validate(path)
    trace = load_trace(path)
    assert len(trace.sessions) == 1 and len(trace.calls) >= 1
    assert [c.error for c in trace.calls.values()] == [None] * len(trace.calls)
    assert all(c.request.api == "messages" for c in trace.calls.values())
    assert KEY.encode() not in path.read_bytes()


def _codex(trace: Trace, session_id: str) -> None:
    """Codex's tree: the root thread's calls in one agent (spawn_agent ×2; wait_agent until
    both are done; exec_command; the answer, again when a sub-agent's answer comes in after
    it), and two sub-agents of two calls each under the two ``spawn_agent`` calls (one forked
    with the root's history, one fresh)."""
    main = _main_agent(trace, session_id, "spawn_agent")
    tools = _tools(trace.calls_of(main.id))
    waits = tools.count(["wait_agent"])
    answers = len(tools) - 2 - waits
    assert 1 <= waits <= 4 and 1 <= answers <= 3, tools
    expected = [["spawn_agent", "spawn_agent"], *[["wait_agent"]] * waits, ["exec_command"]]
    assert tools == [*expected, *[[]] * answers], tools
    _check_children(trace, main, "spawn_agent", None, 2)


@pytest.mark.parametrize(
    ("spec", "features", "provider"),
    [(CODEX[0], (), False), (CODEX[0], ("multi_agent_v2",), True), (CODEX[1], (), True)],
    ids=[f"{CODEX[0]}-openai_base_url", f"{CODEX[0]}-multi_agent_v2", CODEX[1]],
)
def test_codex_subagents_are_children_of_their_spawn_calls(
    spec: str,
    features: tuple[str, ...],
    provider: bool,
    upstream: ScriptedUpstream,
    record_proxy: Any,
    simulator: Any,
    tmp_path: Path,
) -> None:
    """Codex answers ``spawn_agent`` at once: the sub-agent's first request comes after the
    call's result, with the root's history (forked) or without it; with multi_agent_v2 the
    task and the answer travel as ``agent_message`` items. Pointed at the proxy both ways
    docs/record.md gives: ``openai_base_url`` and a ``model_providers`` entry."""
    exe = agent_exe(spec)
    proxy = record_proxy(upstream=upstream.url)
    work = scratch_repo(tmp_path / "repo")
    home = tmp_path / "home"
    run_codex(exe, proxy.base_url, work, home, KEY, "cx", features, provider).check()
    assert fixed(work)
    upgrades = [r for r in upstream.refused if r == "GET /v1/responses (upgrade: websocket)"]
    if provider:  # a provider of its own: plain HTTP, no WebSocket tried
        assert not upstream.refused, upstream.refused
    else:
        # Through openai_base_url, Codex asks for Responses over a WebSocket first: the upgrade
        # reached the upstream as an upgrade (the proxy used to strip it), which has no
        # WebSockets, so Codex fell back on HTTP by itself.
        assert upgrades, upstream.refused
    _one_run_checked(proxy, upstream, simulator, tmp_path, _codex)
    # The rollouts Codex wrote meanwhile import with the same tree.
    check_codex_rollouts(home, upstream, tmp_path, KEY)


def _mini(trace: Trace, session_id: str) -> None:
    """mini-swe-agent's three calls in one agent: the answer without a tool call it dropped
    (a format error), the fix, the submit."""
    agents = [a for a in trace.agents.values() if a.session_id == session_id]
    assert len(agents) == 1, [(a.id, a.role) for a in agents]
    calls = trace.calls_of(agents[0].id)
    assert _tools(calls) == [[], ["bash"], ["bash"]]
    assert [c.seq for c in calls] == [0, 1, 2]


def test_mini_swe_agent_retry_after_a_format_error_is_one_agent(
    upstream: ScriptedUpstream, record_proxy: Any, simulator: Any, tmp_path: Path
) -> None:
    exe = agent_exe(MINI_SWE_AGENT)
    proxy = record_proxy(upstream=upstream.url)
    work = scratch_repo(tmp_path / "repo")
    run_mini_swe_agent(exe, proxy.base_url, work, tmp_path / "home", KEY, "mini").check()
    assert fixed(work)
    _one_run_checked(proxy, upstream, simulator, tmp_path, _mini)


# -- all at once through one proxy -------------------------------------------------------------
def test_agents_at_once_through_one_proxy_keep_their_trees_apart(
    upstream: ScriptedUpstream, record_proxy: Any, tmp_path: Path
) -> None:
    """Two Claude Code runs, a Codex run and a mini-swe-agent run at the same time through one
    proxy: four sessions, each with its own agent's tree, nothing attached across sessions."""
    proxy = record_proxy(upstream=upstream.url)
    runs: list[tuple[str, Callable[[], Ran], Path]] = []
    for i, spec in enumerate((CLAUDE_CODE[0], CLAUDE_CODE[0], CODEX[0], MINI_SWE_AGENT)):
        exe, work, home = (
            agent_exe(spec),
            scratch_repo(tmp_path / f"repo{i}"),
            tmp_path / f"home{i}",
        )
        tag = f"r{i}"
        if spec.startswith("claude-code"):
            fn = partial(run_claude_code, exe, proxy.url, work, home, KEY, tag)
        elif spec.startswith("codex"):
            fn = partial(run_codex, exe, proxy.base_url, work, home, KEY, tag)
        else:
            fn = partial(run_mini_swe_agent, exe, proxy.base_url, work, home, KEY, tag)
        runs.append((spec, fn, work))
    results: dict[int, Ran] = {}
    threads = [
        threading.Thread(target=lambda i=i, fn=fn: results.__setitem__(i, fn()))
        for i, (_, fn, _) in enumerate(runs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for i, (spec, _, work) in enumerate(runs):
        results[i].check()
        assert fixed(work), spec
    trace = _trace(proxy.stop(), upstream)
    _no_cross_session(trace)
    assert len(trace.sessions) == 4, list(trace.sessions)
    kinds: dict[str, str] = {}
    for sid in trace.sessions:
        apis = {c.request.api for c in trace.calls.values() if c.session_id == sid}
        assert len(apis) == 1, (sid, apis)
        kinds[sid] = apis.pop()
    assert sorted(kinds.values()) == ["chat", "messages", "messages", "responses"]
    for sid, api in kinds.items():
        {"messages": _claude_code, "responses": _codex, "chat": _mini}[api](trace, sid)
