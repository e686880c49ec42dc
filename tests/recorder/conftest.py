"""Builders of real trace files (through the real writer) for the recorder tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentload.tokenizer import ChatTokenCounter
from agentload.trace import (
    AgentRecord,
    CallCapture,
    EventRecord,
    LLMCallRecord,
    ObservedCall,
    PrefixInfo,
    RequestParams,
    SessionRecord,
    Timings,
    ToolCallRecord,
    TraceWriter,
    Usage,
    assistant_message,
    make_header,
)

MS = 1_000_000
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_code",
            "description": "search the workspace",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "delegate",
            "description": "hand a task to a sub-agent",
            "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
        },
    },
]


def header(**overrides: Any) -> Any:
    fields: dict[str, Any] = {
        "endpoint": "http://127.0.0.1:8000/v1",
        "model": "agentload-sim",
        "scenario": "unit",
        "scenario_hash": "0" * 32,
        "seed": 7,
        "tokenizer": "o200k_base",
    }
    fields.update(overrides)
    return make_header(**fields)


async def write_session(
    path: Path,
    *,
    orchestrator_calls: int = 4,
    sub_calls: int = 3,
    flush_interval_s: float = 1.0,
    flush_each_call: bool = False,
) -> dict[str, Any]:
    """A two-agent session: an orchestrator that searches, delegates once, and answers.

    Writes every record type. Returns facts the tests check against.
    """
    h = header()
    t = 1_000 * MS  # synthetic monotonic clock
    facts: dict[str, Any] = {"bodies": {}, "tool_calls": [], "events": 0}
    async with TraceWriter(path, h, flush_interval_s=flush_interval_s) as w:
        cap = CallCapture(w, ChatTokenCounter(h.tokenizer))
        await w.write(SessionRecord(id="s1", start_ns=t, workspace="stdlib:email", sandbox="local"))
        await w.write(AgentRecord(id="orch", session_id="s1", role="orchestrator", start_ns=t))
        orch: list[dict[str, Any]] = [
            {"role": "system", "content": "You are the orchestrator.\n" + "repo map line\n" * 40},
            {"role": "user", "content": "Fix the failing test in email/header.py."},
        ]
        for seq in range(orchestrator_calls):
            last = seq == orchestrator_calls - 1
            tcs = (
                []
                if last
                else [
                    {
                        "id": f"tc{seq}",
                        "type": "function",
                        "function": {
                            "name": "delegate" if seq == 1 else "search_code",
                            "arguments": '{"task": "look"}' if seq == 1 else '{"query": "x"}',
                        },
                    }
                ]
            )
            body = {
                "model": h.model,
                "messages": list(orch),
                "tools": TOOLS,
                "stream": True,
                "max_tokens": 512,
                "temperature": 0.0,
            }
            facts["bodies"][f"o{seq}"] = body
            content = "All done." if last else f"Step {seq}: let me look."
            await cap.record(
                ObservedCall(
                    call_id=f"o{seq}",
                    session_id="s1",
                    agent_id="orch",
                    seq=seq,
                    body=body,
                    content=content,
                    tool_calls=tcs or None,
                    finish_reason="stop" if last else "tool_calls",
                    usage={
                        "prompt_tokens": 1000 + 100 * seq,
                        "completion_tokens": 12,
                        "prompt_tokens_details": {"cached_tokens": 900 if seq else 0},
                    },
                    timings=Timings(
                        submit_ns=t,
                        first_token_ns=t + 50 * MS,
                        last_token_ns=t + 90 * MS,
                        chunk_offsets_ns=[50 * MS, 70 * MS, 90 * MS],
                    ),
                    depends_on=[f"tc{seq - 1}"] if seq else [],
                )
            )
            t += 100 * MS
            orch.append(assistant_message(content, tcs or None))
            if last:
                break
            tc = tcs[0]
            start = t
            child = None
            if seq == 1:
                child = "sub1"
                await w.write(
                    AgentRecord(
                        id=child,
                        session_id="s1",
                        parent_agent_id="orch",
                        parent_tool_call_id=tc["id"],
                        role="code_search",
                        start_ns=t,
                    )
                )
                sub: list[dict[str, Any]] = [
                    {"role": "system", "content": "You search code."},
                    {"role": "user", "content": "look"},
                ]
                for sseq in range(sub_calls):
                    body = {"model": h.model, "messages": list(sub), "stream": True}
                    facts["bodies"][f"sub1.{sseq}"] = body
                    await cap.record(
                        ObservedCall(
                            call_id=f"sub1.{sseq}",
                            session_id="s1",
                            agent_id=child,
                            seq=sseq,
                            body=body,
                            content=f"found {sseq}",
                            tool_calls=None,
                            finish_reason="stop",
                            usage=None,
                            timings=Timings(
                                submit_ns=t, first_token_ns=t + 10 * MS, last_token_ns=t + 20 * MS
                            ),
                        )
                    )
                    sub.append(assistant_message(f"found {sseq}", None))
                    sub.append({"role": "user", "content": f"continue {sseq}"})
                    t += 30 * MS
                await w.write(
                    AgentRecord(
                        id=child,
                        session_id="s1",
                        parent_agent_id="orch",
                        parent_tool_call_id=tc["id"],
                        role="code_search",
                        start_ns=start,
                        end_ns=t,
                    )
                )
            t += 200 * MS
            rec = ToolCallRecord(
                id=tc["id"],
                session_id="s1",
                agent_id="orch",
                llm_call_id=f"o{seq}",
                name=tc["function"]["name"],
                arguments={"query": "x"},
                start_ns=start,
                end_ns=t,
                exit_code=0,
                output_bytes=42,
                output_tokens=10,
                sandbox_id="local-1",
                child_agent_id=child,
            )
            await w.write(rec)
            facts["tool_calls"].append(rec)
            orch.append(
                {"role": "tool", "tool_call_id": tc["id"], "content": f"result {seq}\n" * 5}
            )
            if flush_each_call:
                await w.flush()
        await w.write(EventRecord(kind="note", ns=t, session_id="s1", details={"msg": "hi"}))
        facts["events"] += 1
        await w.write(
            AgentRecord(
                id="orch", session_id="s1", role="orchestrator", start_ns=1_000 * MS, end_ns=t
            )
        )
        await w.write(
            SessionRecord(
                id="s1",
                start_ns=1_000 * MS,
                end_ns=t,
                end_reason="done",
                workspace="stdlib:email",
                sandbox="local",
            )
        )
        await w.flush()
    facts["header"] = h
    return facts


S = 1_000_000_000


def llm_call(
    cid: str,
    agent: str,
    seq: int,
    submit: float,
    last: float,
    ours: int,
    blocks: list[str],
    *,
    server: int | None = None,
    completion: int | None = None,
    completion_ours: int = 0,
    base: tuple[str, int] | None = None,
    cached: int | None = None,
    session: str = "s1",
) -> LLMCallRecord:
    """An llm_call record: ``ours`` prompt tokens, ``blocks`` after ``base``'s (times in s)."""
    return LLMCallRecord(
        id=cid,
        session_id=session,
        agent_id=agent,
        seq=seq,
        request=RequestParams(model="m"),
        messages=["b" * 32],
        usage=Usage(
            prompt_tokens=server,
            completion_tokens=completion,
            cached_tokens=cached,
            prompt_tokens_ours=ours,
            completion_tokens_ours=completion_ours,
        ),
        timings=Timings(
            submit_ns=int(submit * S),
            first_token_ns=int(submit * S) + 1,
            last_token_ns=int(last * S),
        ),
        prefix=PrefixInfo(
            base=base[0] if base else None, base_blocks=base[1] if base else 0, blocks=blocks
        ),
    )


def tool_call(
    tid: str,
    agent: str,
    call_id: str,
    name: str,
    start: float,
    end: float,
    child: str | None = None,
    session: str = "s1",
) -> ToolCallRecord:
    """A tool_call record (times in s)."""
    return ToolCallRecord(
        id=tid,
        session_id=session,
        agent_id=agent,
        llm_call_id=call_id,
        name=name,
        arguments={},
        start_ns=int(start * S),
        end_ns=int(end * S),
        child_agent_id=child,
    )
