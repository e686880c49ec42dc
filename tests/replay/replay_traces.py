"""Hand-built traces with known timings, written through the real TraceWriter/CallCapture.

``agentic_trace`` writes one session per ``sessions``: an orchestrator whose call 0 runs a
tool (gap ``tool_gap_s``), whose call 1 delegates to two sub-agents that run in parallel
(each: two calls separated by ``child_gap_s``), and whose call 2 depends on both children
(recorded ``post_gap_s`` after the later child finished). All ns offsets are exact.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentload.tokenizer import ChatTokenCounter
from agentload.trace import CallCapture, ObservedCall, TraceWriter, make_header
from agentload.trace.schema import AgentRecord, SessionRecord, Timings, ToolCallRecord

MS = 1_000_000
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_code",
            "description": "search",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


@dataclass
class Shape:
    tool_gap_s: float = 0.3
    child_gap_s: float = 0.2
    post_gap_s: float = 0.1
    spawn_gap_s: float = 0.0
    call_ms: int = 10
    out_tokens: int = 8
    system_words: int = 200
    sub_system_words: int = 0
    """Words added to each sub-agent's system prompt (0: the short one)."""


def _tc(cid: str, name: str, args: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


async def _write(path: Path, sessions: int, shape: Shape, variant: str) -> None:
    header = make_header(model="rec-model", tokenizer="o200k_base")
    async with TraceWriter(path, header) as w:
        cap = CallCapture(w, ChatTokenCounter("o200k_base"))
        base = 1_000_000_000
        for si in range(sessions):
            t = base + si * 100_000 * MS
            sid = f"s{si}"
            await w.write(SessionRecord(id=sid, start_ns=t))
            orch = f"{sid}-orch"
            await w.write(AgentRecord(id=orch, session_id=sid, role="orchestrator", start_ns=t))
            system = {
                "role": "system",
                "content": "[agentload role=orchestrator]\n"
                + " ".join(f"word{i}" for i in range(shape.system_words))
                + variant,
            }
            msgs: list[dict[str, Any]] = [system, {"role": "user", "content": f"task {si}"}]

            async def call(
                cid: str,
                agent: str,
                seq: int,
                messages: list[dict[str, Any]],
                submit: int,
                tool_calls: list[dict[str, Any]] | None,
                deps: list[str],
                content: str | None = None,
                sid: str = sid,
            ) -> int:
                last = submit + shape.call_ms * MS
                body = {
                    "model": "rec-model",
                    "messages": list(messages),
                    "tools": TOOLS,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                    "max_tokens": 1024,
                    "temperature": 0.0,
                }
                await cap.record(
                    ObservedCall(
                        call_id=cid,
                        session_id=sid,
                        agent_id=agent,
                        seq=seq,
                        body=body,
                        content=content,
                        tool_calls=tool_calls,
                        finish_reason="stop",
                        usage={"completion_tokens": shape.out_tokens},
                        timings=Timings(
                            submit_ns=submit, first_token_ns=submit + MS, last_token_ns=last
                        ),
                        depends_on=deps,
                    )
                )
                return last

            # orchestrator call 0 -> search_code tool
            tc0 = _tc(f"{sid}-t0", "search_code", '{"q": "x"}')
            end0 = await call(f"{sid}-c0", orch, 0, msgs, t, [tc0], [])
            tool_end = end0 + int(shape.tool_gap_s * 1e9)
            await w.write(
                ToolCallRecord(
                    id=f"{sid}-t0",
                    session_id=sid,
                    agent_id=orch,
                    llm_call_id=f"{sid}-c0",
                    name="search_code",
                    arguments={"q": "x"},
                    start_ns=end0,
                    end_ns=tool_end,
                )
            )
            msgs = [
                *msgs,
                {"role": "assistant", "content": None, "tool_calls": [tc0]},
                {"role": "tool", "tool_call_id": f"{sid}-t0", "content": "a.py:1: x"},
            ]
            # call 1 -> two delegations
            d1 = _tc(f"{sid}-d1", "delegate", '{"kind": "code_search", "task": "a"}')
            d2 = _tc(f"{sid}-d2", "delegate", '{"kind": "file_reader", "task": "b"}')
            end1 = await call(f"{sid}-c1", orch, 1, msgs, tool_end, [d1, d2], [f"{sid}-t0"])
            child_ends = []
            for k, d in ((1, d1), (2, d2)):
                aid = f"{sid}-sub{k}"
                start = end1 + int(shape.spawn_gap_s * 1e9)
                await w.write(
                    AgentRecord(
                        id=aid,
                        session_id=sid,
                        role="code_search",
                        parent_agent_id=orch,
                        parent_tool_call_id=d["id"],
                        start_ns=start,
                    )
                )
                sm = [
                    {
                        "role": "system",
                        "content": f"[agentload role=code_search]\nsub {k}"
                        + "".join(f" note{i}" for i in range(shape.sub_system_words)),
                    },
                    {"role": "user", "content": f"subtask {k}"},
                ]
                stc = _tc(f"{aid}-t", "search_code", '{"q": "y"}')
                e0 = await call(f"{aid}-c0", aid, 0, sm, start, [stc], [])
                te = e0 + int(shape.child_gap_s * 1e9)
                await w.write(
                    ToolCallRecord(
                        id=f"{aid}-t",
                        session_id=sid,
                        agent_id=aid,
                        llm_call_id=f"{aid}-c0",
                        name="search_code",
                        arguments={"q": "y"},
                        start_ns=e0,
                        end_ns=te,
                    )
                )
                sm = [
                    *sm,
                    {"role": "assistant", "content": None, "tool_calls": [stc]},
                    {"role": "tool", "tool_call_id": f"{aid}-t", "content": "b.py:2: y"},
                ]
                e1 = await call(f"{aid}-c1", aid, 1, sm, te, None, [f"{aid}-t"], "summary")
                child_ends.append(e1)
                await w.write(
                    AgentRecord(
                        id=aid,
                        session_id=sid,
                        role="code_search",
                        parent_agent_id=orch,
                        parent_tool_call_id=d["id"],
                        start_ns=start,
                        end_ns=e1,
                    )
                )
                await w.write(
                    ToolCallRecord(
                        id=d["id"],
                        session_id=sid,
                        agent_id=orch,
                        llm_call_id=f"{sid}-c1",
                        name="delegate",
                        arguments={},
                        start_ns=end1,
                        end_ns=e1,
                        child_agent_id=aid,
                    )
                )
            msgs = [
                *msgs,
                {"role": "assistant", "content": None, "tool_calls": [d1, d2]},
                {"role": "tool", "tool_call_id": d1["id"], "content": "summary"},
                {"role": "tool", "tool_call_id": d2["id"], "content": "summary"},
            ]
            submit2 = max(child_ends) + int(shape.post_gap_s * 1e9)
            end2 = await call(
                f"{sid}-c2", orch, 2, msgs, submit2, None, [f"{sid}-sub1", f"{sid}-sub2"], "done"
            )
            await w.write(SessionRecord(id=sid, start_ns=t, end_ns=end2, end_reason="done"))


def agentic_trace(
    path: Path, sessions: int = 1, shape: Shape | None = None, variant: str = ""
) -> Path:
    """Write the trace described in the module docstring; returns ``path``."""
    asyncio.run(_write(path, sessions, shape or Shape(), variant))
    return path


def linear_trace(path: Path, sessions: int = 2, calls: int = 6, out_tokens: int = 24) -> Path:
    """``sessions`` sessions of one agent each making ``calls`` calls in a row (each carrying
    the history before it, no tools), every reply ``out_tokens`` long: a load whose running
    sequences are the sessions in flight."""
    asyncio.run(_write_linear(path, sessions, calls, out_tokens))
    return path


async def _write_linear(path: Path, sessions: int, calls: int, out_tokens: int) -> None:
    header = make_header(model="rec-model", tokenizer="o200k_base")
    async with TraceWriter(path, header) as w:
        cap = CallCapture(w, ChatTokenCounter("o200k_base"))
        for si in range(sessions):
            t = 1_000_000_000 + si * 100_000 * MS
            sid, aid = f"s{si}", f"s{si}-a"
            await w.write(SessionRecord(id=sid, start_ns=t))
            await w.write(AgentRecord(id=aid, session_id=sid, role="orchestrator", start_ns=t))
            msgs: list[dict[str, Any]] = [
                {"role": "system", "content": "[agentload role=orchestrator]\nwork"},
                {"role": "user", "content": f"task {si}"},
            ]
            for k in range(calls):
                cid = f"{sid}-c{k}"
                body = {"model": "rec-model", "messages": list(msgs), "stream": True,
                        "stream_options": {"include_usage": True}, "max_tokens": 1024}  # fmt: skip
                await cap.record(
                    ObservedCall(
                        call_id=cid, session_id=sid, agent_id=aid, seq=k, body=body,
                        content=f"step {k} done", tool_calls=None, finish_reason="stop",
                        usage={"completion_tokens": out_tokens},
                        timings=Timings(submit_ns=t, first_token_ns=t + MS,
                                        last_token_ns=t + 10 * MS),
                        depends_on=[],
                    )
                )  # fmt: skip
                t += 20 * MS
                msgs += [{"role": "assistant", "content": f"step {k} done"},
                         {"role": "user", "content": f"next {k}"}]  # fmt: skip
            await w.write(SessionRecord(id=sid, start_ns=1_000_000_000 + si * 100_000 * MS,
                                        end_ns=t, end_reason="done"))  # fmt: skip
