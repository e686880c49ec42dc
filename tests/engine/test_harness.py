"""``generate``'s agent harness against the real engine (llama.cpp's llama-server serving Gemma 3
270M, a tiny model that calls tools badly): a short ``quick`` session with small ``max_tokens``
ends for a reason of its own, not ``endpoint_error``, and its trace validates; the engine's
refusal of a history with cut-off tool-call arguments is what the harness prevents, and its
overflow text is recognised; one task of the eval suite runs end to end (whether the tiny model
fixes the bug is its business; no session may end in an error of ours)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentload.agents.limits import SessionEnd
from agentload.agents.llm import ChatClient
from agentload.evals.results import load_eval
from agentload.tools.arguments import read_arguments
from agentload.trace import load_trace

pytestmark = pytest.mark.engine

# Replies of at most 48 tokens: a tool call of a tiny model is often cut inside its arguments,
# and a session of a few calls stays within a minute on CPU.
SMALL = [
    "-c", "orchestrator.max_tokens=48",
    "-c", "subagents.code_search.max_tokens=48",
    "-c", "subagents.test_runner.max_tokens=48",
    "-c", "subagents.file_reader.max_tokens=48",
    "-c", "orchestrator.initial_context_tokens=1500",
    "-c", "orchestrator.max_rounds=6",
    "-c", "orchestrator.max_parallel_delegations=1",
    "-c", "subagents.code_search.max_turns=2",
    "-c", "subagents.test_runner.max_turns=2",
    "-c", "subagents.file_reader.max_turns=2",
    "-c", "wall_budget_s=75",
]  # fmt: skip

CUT = '{"path": "email/__init__.py", "start_line": 1, "end_li'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "start_line": {"type": "integer"},
                    "end_line": {"type": "integer"},
                },
                "required": ["path"],
            },
        },
    }
]


def _history(arguments: str) -> dict[str, Any]:
    """A request whose history holds one assistant tool call with these arguments."""
    return {
        "model": "gemma",
        "max_tokens": 8,
        "tools": TOOLS,
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Read email/__init__.py."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "error: the call was cut"},
        ],
    }


def test_a_quick_session_with_small_max_tokens_ends_for_its_own_reason(
    engine: Any, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentload", "generate", "-s", "quick", *SMALL,
         "--endpoint", engine.url, "--model", engine.model, "--sandbox", "local",
         "--call-timeout", "60", "--retries", "1", "--json", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (row,) = orjson.loads(proc.stdout)["sessions"]
    assert row["end_reason"] not in ("endpoint_error", "error"), row
    assert row["calls"] >= 1
    (path,) = tmp_path.glob("*.agentload.jsonl.zst")
    check = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "validate", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert check.returncode == 0 and "OK: whole file" in check.stdout, check.stdout
    trace = load_trace(path)
    assert {c.request.max_tokens for c in trace.calls.values()} == {48}
    # every request after the first carried a history the engine accepted: each call got a
    # reply, and no tool call went onward with arguments that are not a JSON object
    for call in trace.calls.values():
        for tc in call.response.tool_calls:
            assert isinstance(orjson.loads(tc.arguments), dict)


async def test_a_malformed_tool_call_is_survived(engine: Any) -> None:
    """The engine refuses a history that carries cut-off arguments verbatim (HTTP 500, not
    retried: it would repeat); the same history with the arguments as the harness carries
    them onward is answered."""
    client = ChatClient(engine.url, model=engine.model, retries=3, backoff_s=0.01)
    try:
        with pytest.raises(SessionEnd) as info:
            await client.complete(_history(CUT))
        assert info.value.reason == "endpoint_error"
        assert info.value.cause == "request_error"
        assert "Failed to parse tool call arguments as JSON" in info.value.detail
        sent = read_arguments(CUT)
        assert sent.problem is not None
        result = await client.complete(_history(sent.sent))
        assert result.finish_reason in ("stop", "length", "tool_calls")
        assert result.completion_tokens >= 1
    finally:
        await client.aclose()


async def test_the_engines_overflow_is_a_context_limit(engine: Any) -> None:
    body = {
        "model": engine.model,
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "word " * (engine.ctx + 2000)}],
    }
    client = ChatClient(engine.url, model=engine.model, retries=3, backoff_s=0.01)
    try:
        with pytest.raises(SessionEnd) as info:
            await client.complete(body)
    finally:
        await client.aclose()
    assert info.value.reason == "context_limit", info.value.detail
    assert "exceeds the available context size" in info.value.detail


TASK = "textwrap-dedent-margin"


def test_one_task_runs_end_to_end_against_the_engine(engine: Any, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentload", "eval", "-s", "quick", *SMALL, "--tasks", TASK,
         "-k", "1", "--endpoint", engine.url, "--model", engine.model, "--sandbox", "local",
         "--call-timeout", "60", "--retries", "1", "--json", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    payload = orjson.loads(proc.stdout)
    doc = load_eval(payload["eval"])
    assert doc.mode == "model" and doc.model == engine.model and doc.k == 1
    (attempt,) = doc.attempts
    assert attempt.task == TASK and attempt.end_reason not in ("error", "endpoint_error")
    assert attempt.calls >= 1
    # the success check ran the task's whole suite after the session, whatever the model did
    assert attempt.suite is not None and attempt.suite["ran"] > 0
    assert attempt.passed == (attempt.suite["failed_count"] == 0)
    (session,) = load_trace(doc.trace).sessions.values()
    assert session.meta["task"] == TASK and session.eval_passed is attempt.passed
