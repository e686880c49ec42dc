"""The work inside the graphs' nodes: one recorded model call, one recorded tool call.

Both are plain async functions of the ``AgentRuntime`` so the graphs stay short and every
agent (orchestrator or sub-agent) records the same way.

Every call sends the agent's ``max_tokens``. A reply's tool calls are read once here
(``agentload.tools.arguments``): a malformed one (arguments not valid JSON, or not an object,
as a reply cut at ``max_tokens`` leaves them) is carried onward with its arguments repaired or
``{}``, so the history stays valid for the server, is never run, and gets a tool error that
says what was wrong; the model's own text is kept on its ``tool_call`` record
(``raw_arguments``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

from agentload import contract
from agentload.agents.limits import EndReason, SessionEnd
from agentload.agents.llm import AgentSession, LLMResult
from agentload.agents.runtime import AgentRuntime, AgentSettings, agent_call_id, tool_call_id
from agentload.agents.tracing import Follows, LiveCall, ToolFacts
from agentload.fitted import WaitKind
from agentload.options.engines import agent_session_id
from agentload.tools.arguments import read_arguments
from agentload.trace.capture import assistant_message
from agentload.trace.events import Error, Retry
from agentload.trace.schema import TurnKind
from agentload.trace.timeline import appended_turn

__all__ = [
    "ModelTurn",
    "ToolOutcome",
    "call_model",
    "modeled_wait",
    "run_tool",
    "run_tools",
    "tool_message",
    "turn_of_messages",
]


@dataclass(frozen=True)
class ModelTurn:
    """One recorded model call: its id, the reply as the next request carries it, usage.

    ``tool_calls`` carry the agents' own ids (``tool_call_id``) plus, not sent (``message``
    holds the clean calls), the server's id under ``model_id`` and, for a malformed call, the
    model's own arguments under ``raw_arguments`` and what is wrong under ``problem``.
    """

    call_id: str
    message: dict[str, Any]
    tool_calls: list[dict[str, Any]]
    prompt_tokens: int
    result: LLMResult

    @property
    def cut(self) -> bool:
        """The reply was cut at the length limit (``finish_reason: length``)."""
        return self.result.finish_reason == "length"


@dataclass(frozen=True)
class ToolOutcome:
    """A tool call's result as the next prompt appends it."""

    index: int
    tool_call_id: str
    text: str
    depends_id: str


def tool_message(tool_call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": tool_call_id, "content": text}


async def call_model(
    rt: AgentRuntime,
    *,
    agent_id: str,
    role: str,
    seq: int,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    depends_on: list[str],
    max_tokens: int | None = None,
) -> ModelTurn:
    """Send the agent's whole history; record the call; raise ``SessionEnd`` on limits.

    Before it, the call's modeled wait (``modeled_wait``) is drawn, and slept through with
    ``--pace real``; the record carries it and what the prompt appends (``turn_of_messages``)."""
    rt.deadline.check()
    body = _request_body(rt.settings, messages, tools, max_tokens)
    call_id = agent_call_id(agent_id, seq)
    turn = turn_of_messages(messages, sub=role != contract.ORCHESTRATOR)
    root = role == contract.ORCHESTRATOR
    wait_ns = await modeled_wait(rt, agent_id, turn, root=root)
    sid = rt.session_id
    who = AgentSession(
        sid, agent_session_id(sid, None if root else agent_id), None if root else sid
    )
    result = await _complete(rt, body, agent_id=agent_id, call_id=call_id, who=who)
    rt.last_end_ns[agent_id] = result.timings.end_ns  # as the trace records it: the next gap
    # starts there
    read = [_read_call(tc, call_id, i, result) for i, tc in enumerate(result.tool_calls)]
    calls = [sent for sent, _ in read]
    rec = await rt.recorder.llm_call(
        call_id=call_id,
        agent_id=agent_id,
        role=role,
        seq=seq,
        body=body,
        result=result,
        tool_calls=calls,
        follows=Follows(depends_on, turn, wait_ns),
    )
    prompt = result.prompt_tokens
    return ModelTurn(
        call_id=call_id,
        message=assistant_message(result.content, calls),
        tool_calls=[{**sent, **notes} for sent, notes in read],
        prompt_tokens=prompt if prompt is not None else rec.usage.prompt_tokens_ours,
        result=result,
    )


def turn_of_messages(messages: list[dict[str, Any]], *, sub: bool) -> TurnKind:
    """What a request appends after its agent's previous reply (``trace.timeline``'s reading):
    tool results, a user message, or a sub-agent's brief (its first request)."""
    first = sub and not any(m.get("role") == "assistant" for m in messages)
    return appended_turn(messages, first_of_sub=first) or TurnKind.USER


async def modeled_wait(
    rt: AgentRuntime, agent_id: str, turn: TurnKind, *, root: bool
) -> int | None:
    """The modeled wait (ns) before the agent's next call (``agentload.fitted``): drawn for
    the gap ``turn`` follows, less the time measured since the agent's previous call; slept with
    ``--pace real`` (never past the session's wall budget). None without modeled waits or for
    an agent's first call."""
    prev = rt.last_end_ns.get(agent_id)
    if rt.waits is None or prev is None:
        return None
    if turn is TurnKind.TOOL:
        kind = WaitKind.TOOL if root else WaitKind.SUBAGENT_TOOL
    elif turn is TurnKind.USER and root:
        kind = WaitKind.USER
    else:
        return None
    wait = rt.waits.wait_ns(kind, agent_id, rt.clock() - prev)
    if wait and rt.pace_real:
        left = rt.deadline.remaining_s()
        await asyncio.sleep(wait / 1e9 if left is None else min(wait / 1e9, left))
        rt.deadline.check()
    return wait


def _request_body(
    s: AgentSettings,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    max_tokens: int | None,
) -> dict[str, Any]:
    """The request body: the history, the tools, and the parameters the agent sends."""
    body: dict[str, Any] = {"model": s.model, "messages": messages}
    if tools:
        body["tools"] = tools
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if s.temperature is not None:
        body["temperature"] = s.temperature
    if s.seed is not None:
        body["seed"] = s.seed
    return body


async def _complete(
    rt: AgentRuntime, body: dict[str, Any], *, agent_id: str, call_id: str, who: AgentSession
) -> LLMResult:
    """The call's reply, its streamed chunks shown live while in flight; each failed attempt
    is an event (``retry``, or ``error`` for the one that ends the session or is cancelled)."""
    failed = 0  # attempts that gave no reply: each is one event (retry, or the last: error)
    start = rt.clock()

    async def on_retry(attempt: int, error: str) -> None:
        nonlocal failed
        failed = attempt
        await rt.recorder.event(
            Retry(call_id=call_id, attempt=attempt, error=error), agent_id=agent_id
        )

    async def failure(reason: str, error: str, cause: str | None = None) -> None:
        failed_at = Error(
            call_id=call_id,
            attempt=failed + 1,
            reason=reason,
            error=error,
            elapsed_s=round((rt.clock() - start) / 1e9, 3),
            cause=cause or None,
        )
        await rt.recorder.event(failed_at, agent_id=agent_id)

    live = rt.recorder.stats.live[call_id] = LiveCall(start)
    try:
        return await rt.client.complete(
            body, on_retry=on_retry, deadline=rt.deadline, on_chunk=live.streamed, who=who
        )
    except SessionEnd as end:
        await failure(end.reason, end.detail, end.cause)
        raise
    except asyncio.CancelledError:  # Ctrl-C, SIGTERM, or a sibling's end cancels the call
        await failure("cancelled", "the call was cancelled while in flight")
        raise
    finally:
        rt.recorder.stats.live.pop(call_id, None)


def _read_call(
    tc: dict[str, Any], call_id: str, index: int, result: LLMResult
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One tool call of a reply: as the history carries it (the agents' id, arguments valid
    JSON), and the notes the graph keeps beside it (the server's id; for a malformed call the
    model's text and what is wrong with it)."""
    fn = tc.get("function") or {}
    raw = str(fn.get("arguments") or "")
    args = read_arguments(raw)
    sent = {
        **tc,
        "id": tool_call_id(call_id, index),
        "function": {**fn, "name": str(fn.get("name") or ""), "arguments": args.sent},
    }
    notes: dict[str, Any] = {"model_id": str(tc.get("id", ""))}
    if args.sent != raw:
        notes["raw_arguments"] = raw
    if args.problem is not None:
        problem = args.problem
        if result.finish_reason == "length":
            problem = (
                f"the reply was cut at the length limit (max_tokens) inside this call, so {problem}"
            )
        notes["problem"] = f"{problem}; the call was not run: send it again, complete"
    return sent, notes


async def run_tool(
    rt: AgentRuntime,
    *,
    agent_id: str,
    call_id: str,
    index: int,
    tool_call: dict[str, Any],
    allowed: tuple[str, ...],
) -> ToolOutcome:
    """Run one (non-delegate) tool call through the toolbox and record it."""
    fn = tool_call.get("function") or {}
    name = str(fn.get("name", ""))
    raw = str(fn.get("arguments", ""))
    rid = str(tool_call["id"])
    model_id = str(tool_call.get("model_id", ""))
    args = read_arguments(raw).value
    problem = tool_call.get("problem")
    if problem or name not in allowed or name == contract.DELEGATE:
        now = rt.clock()
        if problem:
            error = f"{name or 'tool call'}: {problem}"
        elif name == contract.DELEGATE:
            error = _delegate_error(args)
        else:
            error = f"unknown tool {name!r}; available: {', '.join(allowed)}"
        facts = ToolFacts(start_ns=now, end_ns=now, error=error)
        text = f"error: {error}"
    else:
        res = await rt.toolbox.call(name, raw)
        text = str(res.text)
        facts = ToolFacts(
            start_ns=res.start_ns,
            end_ns=res.end_ns,
            exit_code=res.exit_code,
            timed_out=bool(res.timed_out),
            output_bytes=int(res.output_bytes),
            output_tokens=getattr(res, "output_tokens", None),
            truncated=bool(res.truncated),
            sandbox_id=res.sandbox_id,
            error=res.error,
        )
    await rt.recorder.tool_call(
        record_id=rid,
        agent_id=agent_id,
        llm_call_id=call_id,
        name=name,
        arguments=args if args is not None else {},
        facts=replace(facts, raw_arguments=tool_call.get("raw_arguments")),
        model_call_id=model_id or None,
    )
    over = rt.toolbox.over_limit
    if over is not None:  # the sandbox killed the command past its disk quota
        raise SessionEnd(EndReason.DISK_QUOTA, over)
    return ToolOutcome(index=index, tool_call_id=rid, text=text, depends_id=rid)


async def run_tools(
    rt: AgentRuntime,
    *,
    agent_id: str,
    call_id: str,
    calls: list[tuple[int, dict[str, Any]]],
    allowed: tuple[str, ...],
) -> list[ToolOutcome]:
    """Run one reply's tool calls: concurrently when none of them edits the workspace (as a
    coding agent runs its read-only tools), one after the other in order otherwise. The
    outcomes come back in tool-call order either way."""
    names = {str((tc.get("function") or {}).get("name", "")) for _, tc in calls}

    def one(index: int, tc: dict[str, Any]) -> Any:
        return run_tool(
            rt, agent_id=agent_id, call_id=call_id, index=index, tool_call=tc, allowed=allowed
        )

    if len(calls) > 1 and contract.EDIT_FILE not in names:
        return list(await asyncio.gather(*(one(i, tc) for i, tc in calls)))
    return [await one(i, tc) for i, tc in calls]


def _delegate_error(args: dict[str, Any] | None) -> str:
    kinds = ", ".join(contract.SUBAGENT_ROLES)
    if not isinstance(args, dict):
        return f"delegate: arguments must be a JSON object with 'kind' ({kinds}) and 'task'"
    kind = args.get("kind")
    if kind not in contract.SUBAGENT_ROLES:
        return f"delegate: unknown kind {kind!r}; valid: {kinds}"
    return "delegate: 'task' must be a non-empty string"


def valid_delegation(tool_call: dict[str, Any], kinds: tuple[str, ...]) -> tuple[str, str] | None:
    """``(kind, task)`` of a well-formed ``delegate`` call to a configured kind, else None (a
    malformed one, even repaired, is never run)."""
    fn = tool_call.get("function") or {}
    if fn.get("name") != contract.DELEGATE or tool_call.get("problem"):
        return None
    args = read_arguments(str(fn.get("arguments", ""))).value
    if args is None:
        return None
    kind, task = args.get("kind"), args.get("task")
    if kind in kinds and isinstance(task, str) and task.strip():
        return str(kind), task
    return None
