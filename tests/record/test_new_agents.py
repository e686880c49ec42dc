"""The agent CLIs no earlier test named, recorded by ``agentload record`` (issue 48): Qwen Code
0.15.10 and opencode 1.18.33 (npm, pinned by ``scripts/agents.sh``), each driven headless by a
scripted model (``new_agents``) that makes it delegate, through the proxy.

What a user checks of the recording: every model request the upstream served is an
``llm_call`` (none failed, none unread); one session per run; the main agent's calls in one
agent; each sub-agent the child of the call that spawned it: Qwen's ``general-purpose``
sub-agent and its headerless background *fork* (an ``agent`` call without ``subagent_type``,
whose first request may come before its parent's next one), opencode's ``task`` sub-agent;
opencode's title generator a side agent of the same session; ``trace validate`` passes; replay
sends every call; the key is nowhere in the trace. Gemini CLI 0.61.0 (``gemini_agent``) the
same way in Google's Gemini API, its function calls with and without ids: its ``invoke_agent``
sub-agent the child of that call, its next-speaker check a side agent. The agents skip where
``scripts/agents.sh install`` has not run, and fail instead under AGENTLOAD_REQUIRE_AGENTS=1."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))  # scripted_upstream, real_agents, new_agents

import pytest
from agents_helpers import check_replays, validate
from gemini_agent import GEMINI_CLI, gemini_script, run_gemini_cli
from new_agents import (
    OPENCODE,
    QWEN_CODE,
    opencode_script,
    qwen_script,
    run_opencode,
    run_qwen_code,
)
from real_agents import Ran, agent_exe, fixed, scratch_repo
from scripted_upstream import ScriptedUpstream

from agentload.trace.schema import SIDE_ROLE, AgentRecord
from agentload.trace.stats import compute_stats
from agentload.trace.trace import Trace, load_trace

KEY = "sk-new-agent-test-0123456789"


def _recorded(proxy: Any, upstream: ScriptedUpstream, simulator: Any, tmp_path: Path) -> Trace:
    """The trace of one run: valid, one call per model request served (none failed), no key,
    no unread request, one session; it replays against the simulator."""
    path = proxy.stop()
    validate(path)
    assert KEY.encode() not in path.read_bytes()
    trace = load_trace(path)
    assert len(trace.calls) == len(upstream.asked), (len(trace.calls), len(upstream.asked))
    assert [c.id for c in trace.calls.values() if c.error] == []
    stats = compute_stats(trace)
    assert stats["unread_requests"] == 0 and proxy.server.stats.unread == 0
    assert len(trace.sessions) == 1, list(trace.sessions)
    check_replays(path, trace, simulator.base_url, "agentload-sim", tmp_path / "replay")
    return trace


def _tools(trace: Trace, agent: AgentRecord) -> list[list[str]]:
    return [[t.name for t in c.response.tool_calls] for c in trace.calls_of(agent.id)]


def _main(trace: Trace, first: list[str]) -> AgentRecord:
    [main] = [a for a in trace.agents.values()
              if a.parent_agent_id is None and _tools(trace, a)[:1] == [first]]  # fmt: skip
    return main


def _kids(trace: Trace, parent: AgentRecord, spawn: str) -> dict[str, AgentRecord]:
    """The sub-agents of ``parent``, each the child of one of its ``spawn`` calls (by its
    ``parent_tool_call_id`` and the call's ``tool_call`` record), by role. A call's id is the
    one the agent carried it on with (its ``tool_call`` record's ``id``): Gemini CLI numbers
    the calls the API sent without one."""
    carried = {(r.llm_call_id, r.model_call_id or r.id): r.id for r in trace.tool_calls.values()}
    spawns = [carried.get((c.id, t.id), t.id) for c in trace.calls_of(parent.id)
              for t in c.response.tool_calls if t.name == spawn]  # fmt: skip
    kids = [a for a in trace.agents.values() if a.parent_agent_id == parent.id]
    assert sorted(str(a.parent_tool_call_id) for a in kids) == sorted(spawns)
    for kid in kids:
        assert kid.session_id == parent.session_id
        linked = [r.id for r in trace.tool_calls.values() if r.child_agent_id == kid.id]
        assert linked == [kid.parent_tool_call_id], (kid.id, linked)
    return {a.role: a for a in kids}


def _record(
    upstream: ScriptedUpstream,
    fixtures: tuple[Any, Any, Path],
    run: Callable[[str, Path, Path], Ran],
) -> Trace:
    """One agent run (``run(proxy_url, work, home)``) through the proxy in front of ``upstream``
    (``fixtures``: ``record_proxy``, ``simulator``, ``tmp_path``): it fixes ``calc.py`` and its
    trace passes ``_recorded``."""
    record_proxy, simulator, tmp_path = fixtures
    try:
        proxy = record_proxy(upstream=upstream.url)
        work = scratch_repo(tmp_path / "repo")
        run(proxy.url, work, tmp_path / "home").check()
        assert fixed(work)
        return _recorded(proxy, upstream, simulator, tmp_path)
    finally:
        upstream.stop()


def _qwen(tag: str) -> Callable[[str, Path, Path], Ran]:
    exe = agent_exe(QWEN_CODE)
    return lambda url, work, home: run_qwen_code(exe, url + "/v1", work, home, KEY, tag)


def test_qwen_code_with_a_sub_agent_and_a_fork_is_recorded_whole(
    record_proxy: Any, simulator: Any, tmp_path: Path
) -> None:
    run = _qwen("qw")
    trace = _record(ScriptedUpstream(qwen_script).start(), (record_proxy, simulator, tmp_path), run)
    main = _main(trace, ["agent", "agent"])
    tools = _tools(trace, main)
    assert tools[:4] == [["agent", "agent"], ["read_file"], ["edit"], ["run_shell_command"]], tools
    kids = _kids(trace, main, "agent")
    assert set(kids) == {"general-purpose", "agent"}, kids
    assert _tools(trace, kids["general-purpose"]) == [["read_file"], []]
    fork = kids["agent"]
    assert fork.context_policy == "forked" and _tools(trace, fork) == [["read_file"], []]
    # the main agent's call after the spawns waited for the foreground sub-agent, not the fork
    after = trace.calls_of(main.id)[1]
    assert kids["general-purpose"].id in after.depends_on and fork.id not in after.depends_on


def test_opencode_with_a_task_and_its_title_call_is_one_session(
    record_proxy: Any, simulator: Any, tmp_path: Path
) -> None:
    exe = agent_exe(OPENCODE)
    upstream = ScriptedUpstream(opencode_script).start()
    trace = _record(upstream, (record_proxy, simulator, tmp_path),
                    lambda url, work, home: run_opencode(exe, url + "/v1", work, home, KEY, "oc"))  # fmt: skip
    main = _main(trace, ["task"])
    assert _tools(trace, main) == [["task"], ["read"], ["edit"], ["bash"], []]
    kids = _kids(trace, main, "task")
    assert list(kids) == ["general"] and _tools(trace, kids["general"]) == [["read"], []]
    [side] = [a for a in trace.agents.values() if a.role == SIDE_ROLE]
    assert side.parent_agent_id is None and side.session_id == main.session_id
    assert len(trace.calls_of(side.id)) == 1 and compute_stats(trace)["side_calls"] == 1


def test_qwen_code_with_a_fork_alone_is_recorded_whole(
    record_proxy: Any, simulator: Any, tmp_path: Path
) -> None:
    """A fork alone: its first request and its parent's next one race (the fork came first in
    the runs issue 48 reported); either way the fork is the spawn's child."""
    run = _qwen("fork1")
    trace = _record(ScriptedUpstream(qwen_script).start(), (record_proxy, simulator, tmp_path), run)
    main = _main(trace, ["agent"])
    assert _tools(trace, main)[:4] == [["agent"], ["read_file"], ["edit"], ["run_shell_command"]]
    [fork] = _kids(trace, main, "agent").values()
    assert fork.context_policy == "forked" and _tools(trace, fork) == [["read_file"], []]
    assert fork.id not in trace.calls_of(main.id)[1].depends_on


def _gemini_run(record_proxy: Any, simulator: Any, tmp_path: Path, ids: bool) -> Trace:
    """Gemini CLI through the proxy against ``gemini_script``, function calls with an ``id``
    or (as the real service sends them) without: the checks of ``_recorded``, every call in
    the Gemini API."""
    exe = agent_exe(GEMINI_CLI)
    upstream = ScriptedUpstream(gemini_script, gemini_call_ids=ids).start()
    trace = _record(upstream, (record_proxy, simulator, tmp_path),
                    lambda url, work, home: run_gemini_cli(exe, url, work, home, KEY, "gm"))  # fmt: skip
    assert {c.request.api for c in trace.calls.values()} == {"gemini"}
    return trace


@pytest.mark.parametrize("ids", [False, True], ids=["no-call-ids", "call-ids"])
def test_gemini_cli_with_a_sub_agent_and_its_next_speaker_check_is_one_session(
    record_proxy: Any, simulator: Any, tmp_path: Path, ids: bool
) -> None:
    """Gemini CLI's ``invoke_agent`` runs the ``generalist`` in the foreground: its child
    (which ends with ``complete_task``); the next-speaker check after the final answer (the
    main history, no system instruction, another model) is a side agent of the session."""
    trace = _gemini_run(record_proxy, simulator, tmp_path, ids)
    main = _main(trace, ["invoke_agent"])
    tools = _tools(trace, main)
    assert tools == [["invoke_agent"], ["read_file"], ["replace"], ["run_shell_command"], []]
    kids = _kids(trace, main, "invoke_agent")
    assert list(kids) == ["generalist"], kids  # its ``agent_name``
    [sub] = kids.values()
    assert _tools(trace, sub) == [["read_file"], ["complete_task"]]
    assert sub.context_policy == "fresh" and sub.id in trace.calls_of(main.id)[1].depends_on
    # every call answered is a tool_call record, the sub-agent's ``read_file`` too (Gemini CLI
    # answers an id-less call with an id of its own); ``complete_task`` is never answered
    emitted = {c.id: c.agent_id for c in trace.calls.values()}
    records = [(emitted[r.llm_call_id], r.name) for r in trace.tool_calls.values()]
    assert sorted(records) == sorted([(main.id, n[0]) for n in tools[:4]] + [(sub.id, "read_file")])
    [side] = [a for a in trace.agents.values() if a.role == SIDE_ROLE]
    assert side.parent_agent_id is None and side.session_id == main.session_id
    [check] = trace.calls_of(side.id)
    assert check.request.model == "gemini-3-flash-preview" and not check.request.stream
    assert compute_stats(trace)["side_calls"] == 1
    # the unanswered complete_task is the ended sub-agent's: the session is done, not cut
    assert [s.end_reason for s in trace.sessions.values()] == ["done"]
