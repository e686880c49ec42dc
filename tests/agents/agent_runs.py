"""Helpers of the agents' tests: a generate run read back, and a trace's content fingerprint."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentload.errors import TraceFormatError
from agentload.generate.options import GenerateOptions
from agentload.generate.run import RunResult, generate
from agentload.scenarios import load_scenario
from agentload.trace import Trace, load_trace


def run_generate(
    out: Path, scenario: str = "quick", overrides: Sequence[str] = (), **kw: Any
) -> tuple[RunResult, Trace]:
    """One ``generate`` run (its own event loop) and its trace, read back."""
    opts = GenerateOptions(scenario=load_scenario(scenario, overrides), out=out, **kw)
    result = asyncio.run(generate(opts))
    return result, load_trace(result.trace_path)


def fingerprint(trace: Trace) -> dict[str, Any]:
    """Everything about a trace's content and structure, nothing about its timings."""
    return {
        "blobs": sorted(trace.blobs),
        "calls": sorted(
            (
                c.id,
                c.agent_id,
                c.seq,
                tuple(c.messages),
                c.request.tools,
                c.response.content,
                tuple((t.id, t.name, t.arguments) for t in c.response.tool_calls),
                tuple(c.depends_on),
                c.usage.prompt_tokens,
                c.usage.completion_tokens,
                c.usage.prompt_tokens_ours,
            )
            for c in trace.calls.values()
        ),
        "tools": sorted(
            (
                t.id,
                t.agent_id,
                t.llm_call_id,
                t.name,
                repr(t.arguments),
                t.exit_code,
                t.output_bytes,
                t.truncated,
                t.child_agent_id,
            )
            for t in trace.tool_calls.values()
        ),
        "agents": sorted(
            (a.id, a.parent_agent_id, a.parent_tool_call_id, a.role) for a in trace.agents.values()
        ),
        "sessions": sorted((s.id, s.end_reason) for s in trace.sessions.values()),
    }


def agentload(
    *args: str, timeout: float = 120, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``agentload ARGS`` in a subprocess, output captured (``env``: its whole environment)."""
    return subprocess.run(
        [sys.executable, "-m", "agentload", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one ``agentload: error: ...`` line of a run that exited with code 2."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentload: error: "), proc.stderr
    return lines[0]


def recorded_calls(folder: Path) -> int:
    """The calls the trace a running ``generate`` writes in ``folder`` holds so far: 0 while
    there is no file, or the file does not hold its header yet (created, not yet written)."""
    files = list(folder.glob("*.zst"))
    if not files:
        return 0
    try:
        return len(load_trace(files[0]).calls)
    except TraceFormatError:
        return 0
