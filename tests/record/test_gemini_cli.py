"""Gemini CLI (npm ``@google/gemini-cli``, pinned by ``scripts/agents.sh``), recorded by
``agentload record`` in front of the built-in simulator, which speaks Google's Gemini API.

Gemini CLI runs headless (``-p``, ``--yolo``) with a HOME of its own: the API-key auth chosen
in its settings, telemetry, usage statistics and update checks off, the workspace trusted
(``GEMINI_CLI_TRUST_WORKSPACE``), its core tools limited to local ones (no web fetch, no
sub-agents). Pointed at the proxy with ``GOOGLE_GEMINI_BASE_URL``, it POSTs
``/v1beta/models/{model}:streamGenerateContent?alt=sse``. The prompt's tag does not matter to the simulator. The trace must hold every request
as a ``gemini`` call with its body as sent, the tool runs as ``tool_call`` records, one
session; it passes ``trace validate`` and ``replay --start-at zero`` sends every call in the
Gemini API. Skips where the agent is not installed, fails instead under
AGENTLOAD_REQUIRE_AGENTS=1 (``real_agents.agent_exe``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))  # real_agents, agents_helpers

from agents_helpers import check_replays, validate
from gemini_agent import GEMINI_CLI, run_gemini_cli
from gemini_agent import SETTINGS as GEMINI_SETTINGS
from real_agents import agent_exe, scratch_repo

from agentload.trace.trace import Trace, load_trace

KEY = "gemini-real-agent-test-0123456789"
MODEL = "agentload-sim"
TOOLS = ["list_directory", "read_file", "grep_search", "glob", "run_shell_command"]
SETTINGS = {**GEMINI_SETTINGS, "model": {}, "tools": {"core": TOOLS}}
"""The recording test's settings, the simulator's tools only (the next-speaker check off)."""


def _check_tools(trace: Trace) -> None:
    """Every tool call a reply asked for and a later request answered is a ``tool_call``
    record of that reply (observed by the proxy); only the last reply asks for none."""
    calls = sorted(trace.calls.values(), key=lambda c: c.timings.submit_ns)
    asked = [(c.id, t.id, t.name) for c in calls[:-1] for t in c.response.tool_calls]
    assert asked and not calls[-1].response.tool_calls, [c.response for c in calls]
    records = {(t.llm_call_id, t.model_call_id or t.id, t.name) for t in trace.tool_calls.values()}
    assert records == set(asked), (records, asked)
    assert all(t.observed_by == "proxy" for t in trace.tool_calls.values())


def test_gemini_cli_against_the_simulator_through_the_proxy(
    record_proxy: Any, simulator: Any, tmp_path: Path
) -> None:
    exe = agent_exe(GEMINI_CLI)
    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    work = scratch_repo(tmp_path / "repo")
    run_gemini_cli(exe, proxy.url, work, tmp_path / "home", KEY, "sim", settings=SETTINGS).check()
    path = proxy.stop()
    validate(path)
    assert KEY.encode() not in path.read_bytes()
    trace = load_trace(path)
    assert trace.truncated is None
    assert len(trace.sessions) == 1 and len(trace.calls) >= 2, (trace.sessions, trace.calls)
    assert [c.error for c in trace.calls.values()] == [None] * len(trace.calls)
    for call in trace.calls.values():
        assert call.request.api == "gemini" and call.request.model == MODEL, call.id
        assert call.request.stream, call.id  # streamGenerateContent, said by the path
        body = trace.native_body(call)
        assert body is not None and set(body) >= {"contents", "systemInstruction", "tools"}
        assert call.usage.prompt_tokens and call.usage.completion_tokens, call.usage
    [root] = [a for a in trace.agents.values() if a.parent_agent_id is None]
    assert len(trace.calls_of(root.id)) == len(trace.calls)  # one agent, call after call
    _check_tools(trace)
    check_replays(path, trace, simulator.base_url, MODEL, tmp_path / "replay")
