"""What the third-party agent tests share: the requests an SDK sent (seen from its own HTTP
client, not from the proxy), and the checks every recorded trace must pass (the real
``agentload trace validate`` and ``agentload replay`` CLIs, the agent tree, the tool calls)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentload.trace.schema import AgentRecord, ToolCallRecord
from agentload.trace.trace import Trace, load_trace


@dataclass
class Sent:
    """One HTTP request an SDK sent: its path, headers (lower-case names) and JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Wire:
    """Every request an SDK's HTTP client sent, in order: counted at the client, so the trace's
    ``llm_call`` count is checked against the agent's own traffic."""

    sent: list[Sent] = field(default_factory=list)

    def note(self, request: Any) -> None:
        """Record one ``httpx.Request`` (or ``httpx2.Request``): an event hook for either."""
        body = json.loads(request.content) if request.content else {}
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.sent.append(Sent(request.url.path, headers, body))

    async def anote(self, request: Any) -> None:
        """``note`` as an ``httpx.AsyncClient`` event hook."""
        self.note(request)

    def hooks(self) -> dict[str, list[Any]]:
        return {"request": [self.note]}

    def ahooks(self) -> dict[str, list[Any]]:
        return {"request": [self.anote]}

    def calls(self, path_suffix: str) -> list[Sent]:
        """The model calls among the requests: those whose path ends with ``path_suffix``."""
        return [s for s in self.sent if s.path.endswith(path_suffix)]


@dataclass(frozen=True)
class ToolRun:
    """A tool call the agent really executed, as its SDK reports it: the model's call id, the
    tool's name and the text the agent sent back as the result."""

    call_id: str
    name: str
    output: str


def cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m agentload ARGV`` in a subprocess: the real command a user runs."""
    return subprocess.run(
        [sys.executable, "-m", "agentload", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def validate(path: Path) -> str:
    """``agentload trace validate PATH`` must exit 0; its stdout."""
    done = cli("trace", "validate", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def replay(path: Path, endpoint: str, model: str, out: Path) -> dict[str, Any]:
    """``agentload replay`` of the trace once, from its first call, with no waits, against
    ``endpoint``; it must exit 0. The parsed results.json."""
    done = cli(
        "replay",
        str(path),
        "--endpoint",
        endpoint,
        "--model",
        model,
        "--sessions",
        "1",
        "--start-at",
        "zero",
        "--gap-scale",
        "0",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results: dict[str, Any] = json.loads((out / "results.json").read_text())
    return results


def replayed_requests(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every request replay sent, over all points."""
    return [r for point in results["points"] for r in point["requests"]]


def roots(trace: Trace) -> list[AgentRecord]:
    """The agents no other agent delegated to, by start time."""
    return sorted(
        (a for a in trace.agents.values() if a.parent_agent_id is None), key=lambda a: a.start_ns
    )


def children(trace: Trace, agent: AgentRecord) -> list[AgentRecord]:
    """The agents ``agent`` delegated to, by start time."""
    return sorted(
        (a for a in trace.agents.values() if a.parent_agent_id == agent.id),
        key=lambda a: a.start_ns,
    )


def tool_call_for(trace: Trace, call_id: str) -> ToolCallRecord:
    """The tool_call record of the model's call id (``id``, or ``model_call_id`` when the
    recorder renamed it)."""
    found = [t for t in trace.tool_calls.values() if call_id in (t.id, t.model_call_id)]
    assert len(found) == 1, f"tool call {call_id}: {len(found)} records in the trace"
    return found[0]


def check_tool_calls(trace: Trace, runs: list[ToolRun]) -> None:
    """The trace holds exactly the tool calls the agent ran: the same names, one record each,
    durations >= 0 and the output's size (bytes of the text the agent sent back)."""
    assert len(trace.tool_calls) == len(runs), (
        sorted(t.name for t in trace.tool_calls.values()),
        sorted(r.name for r in runs),
    )
    for run in runs:
        rec = tool_call_for(trace, run.call_id)
        assert rec.name == run.name
        assert rec.end_ns >= rec.start_ns
        assert rec.output_bytes == len(run.output.encode()) > 0
        assert rec.observed_by == "proxy"
        emitted = [t.id for t in trace.calls[rec.llm_call_id].response.tool_calls]
        assert run.call_id in emitted, (run.call_id, emitted)


def check_bodies(trace: Trace, sent: list[Sent], api: str) -> None:
    """The trace's calls, in the order sent, are the agent's requests: each recorded in its own
    API, a Chat Completions call with the messages as sent, a Responses or Messages call with
    its body as sent (``request.native``)."""
    calls = sorted(trace.calls.values(), key=lambda c: c.timings.submit_ns)
    assert len(calls) == len(sent)
    for call, request in zip(calls, sent, strict=True):
        assert call.request.api == api, call.id
        assert call.request.stream is bool(request.body.get("stream")), call.id
        if api == "chat":
            assert trace.messages(call) == request.body["messages"], call.id
        else:
            assert trace.native_body(call) == request.body, call.id


def check_usage(trace: Trace, agent_id: str, reported: list[tuple[int, int]]) -> None:
    """The agent's calls, in order, carry the (prompt, completion) tokens its SDK read from the
    same answers; a call whose SDK saw no usage (a stream not asked for it) is not compared."""
    calls = trace.calls_of(agent_id)
    assert len(calls) == len(reported)
    for call, (prompt, completion) in zip(calls, reported, strict=True):
        if prompt or completion:
            assert (call.usage.prompt_tokens, call.usage.completion_tokens) == (
                prompt,
                completion,
            ), call.id


def load_checked(path: Path, n_calls: int) -> Trace:
    """The trace at ``path``: ``trace validate`` passes, it loads whole, every session in it
    ended ``done`` (no tool call left waiting), and it holds ``n_calls`` llm_calls (the number
    of model requests the agent sent), none failed."""
    validate(path)
    trace = load_trace(path)
    assert trace.truncated is None
    assert [s.end_reason for s in trace.sessions.values()] == ["done"] * len(trace.sessions)
    assert len(trace.calls) == n_calls, (len(trace.calls), n_calls)
    assert all(c.error is None for c in trace.calls.values())
    return trace


def check_replays(trace_path: Path, trace: Trace, endpoint: str, model: str, out: Path) -> None:
    """Replay of the trace against ``endpoint`` (the simulator, which speaks all three APIs)
    exits 0 and sends every recorded call once, each in the API it was recorded in, each
    answered."""
    results = replay(trace_path, endpoint, model, out)
    sent = replayed_requests(results)
    assert len(sent) == len(trace.calls), (len(sent), len(trace.calls))
    assert all(r["status"] == 200 and r.get("error") is None for r in sent), sent
    apis: dict[str, dict[str, int]] = {}
    for call in trace.calls.values():
        api = call.request.api
        apis.setdefault(api, {api: 0})[api] += 1
    assert results["plan"]["apis"] == apis
