"""``agentload trace export weka``: one Weka (kv-cache-tester) JSON file per session.

A file is ``{id, models, block_size: 64, hash_id_scope: "local", tool_tokens, system_tokens,
requests, totals}`` (``tool_tokens``/``system_tokens``: ``static_tokens``, per sub-agent too).
Times are those of the modeled timeline (``trace.timeline``): ``think_time`` is the measured gap
plus the call's modeled wait where the trace has modeled waits (the summary says so). Its
``requests`` interleave the root agent's calls (``type`` ``"s"`` streamed, ``"n"`` not) with one
``type: "subagent"`` entry per sub-agent, which nests that agent's own calls; both in time order,
each entry right after the parent call that spawned it. Times ``t`` are seconds from the
session's first call (or an earlier sub-agent spawn; sub-agent calls too: one clock per file). Hash ids are 64-token block
numbers, one namespace per file (``hash_id_scope: "local"``), so the conversation and its
sub-agents share ids where their prompts share a prefix. Every field is mapped in
docs/trace-formats.md ("Export: Weka").

Weka nests one level: a sub-agent's own sub-agents become entries of the top-level list too.
AIPerf's Weka loader drops an entry that no parent call precedes, so an entry that would come
before the first root call is placed right after it (it keeps its own ``t``).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import ConfigError
from agentload.interop.blockids import BlockNumbers, group_factor, max_ids
from agentload.interop.import_io import ns
from agentload.interop.weka import FINISH
from agentload.outfile import NewFiles, new_files
from agentload.trace.schema import AgentRecord, LLMCallRecord, TurnKind
from agentload.trace.stats import completion_tokens
from agentload.trace.timeline import GapMode, describe_waits, has_waits, turn_of, with_gaps
from agentload.trace.trace import Trace, load_trace

__all__ = ["BLOCK_SIZE", "export_weka", "session_document", "static_tokens"]

BLOCK_SIZE = 64
_NS = 1e9
_STOP = {finish: stop for stop, finish in FINISH.items()}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass
class _Stats:
    files: int = 0
    requests: int = 0
    subagents: int = 0
    empty_sessions: int = 0
    ids: set[str] = field(default_factory=set)


def _secs(t_ns: int) -> float:
    return round(t_ns / _NS, 6)


def _request(
    trace: Trace,
    call: LLMCallRecord,
    prev: LLMCallRecord | None,
    t0: int,
    numbers: BlockNumbers,
    factor: int,
    scope: str,
) -> dict[str, Any]:
    """One ``type: "s"|"n"`` request of a Weka file."""
    tm = call.timings
    inp = trace.prompt_tokens(call)
    resp = call.response
    out_types = (["text"] if resp.text_len else []) + (["tool_use"] if resp.tool_calls else [])
    req: dict[str, Any] = {
        "t": _secs(tm.submit_ns - t0),
        "type": "s" if call.request.stream else "n",
        "model": call.request.model,
        "in": inp,
        "out": completion_tokens(call),
        "hash_ids": numbers.number(
            trace.blocks(call), factor, max_ids(inp, BLOCK_SIZE), scope=scope
        ),
        "input_types": ["tool_result"] if turn_of(trace, call) is TurnKind.TOOL else ["text"],
        "output_types": out_types,
        "stop": _STOP.get(resp.finish_reason or "", ""),
        "api_time": _secs(tm.last_token_ns - tm.submit_ns) if tm.last_token_ns else None,
        "think_time": None,
    }
    if prev is not None:
        prev_end = prev.timings.last_token_ns or prev.timings.submit_ns
        req["think_time"] = _secs(max(0, tm.submit_ns - prev_end))
    if call.request.stream and tm.first_token_ns is not None:
        req["ttft"] = _secs(tm.first_token_ns - tm.submit_ns)
    return req


def _requests(
    trace: Trace,
    calls: Sequence[LLMCallRecord],
    t0: int,
    numbers: BlockNumbers,
    factor: int,
    scope: str,
) -> list[dict[str, Any]]:
    prev: LLMCallRecord | None = None
    out: list[dict[str, Any]] = []
    for call in calls:
        out.append(_request(trace, call, prev, t0, numbers, factor, scope))
        prev = call
    return out


def _subagent(
    trace: Trace,
    agent: AgentRecord,
    calls: list[LLMCallRecord],
    tools: Counter[str],
    t0: int,
    numbers: BlockNumbers,
    factor: int,
    scope: str,
) -> dict[str, Any]:
    """The ``type: "subagent"`` entry of one sub-agent with its calls nested."""
    spawn = min(agent.start_ns, calls[0].timings.submit_ns)
    end = agent.end_ns
    if end is None:
        end = max(c.timings.last_token_ns or c.timings.submit_ns for c in calls)
    reqs = _requests(trace, calls, t0, numbers, factor, scope)
    tool_tokens, system_tokens = static_tokens(trace, calls[0])
    return {
        "t": _secs(spawn - t0),
        "type": "subagent",
        "agent_id": agent.id,
        "subagent_type": agent.role,
        "duration_ms": max(0, round((end - spawn) / 1e6)),
        "total_tokens": sum(r["in"] + r["out"] for r in reqs),
        "tool_use_count": tools.get(agent.id, 0),
        "status": "completed" if agent.end_ns is not None else "incomplete",
        "requests": reqs,
        "models": list(dict.fromkeys(c.request.model for c in calls)),
        **_known(tool_tokens=tool_tokens, system_tokens=system_tokens),
    }


def _known(**counts: int | None) -> dict[str, int]:
    """The counts that are known (the format's fields are integers, 0 when absent)."""
    return {k: v for k, v in counts.items() if v is not None}


def static_tokens(trace: Trace, first: LLMCallRecord) -> tuple[int | None, int | None]:
    """(tool_tokens, system_tokens) of an agent: our token counts of its first call's tools
    list and of the system (or developer) messages its prompt starts with, as the blobs hold
    them; an imported session's own figures (``session.meta``); None where neither is known."""
    if not first.messages:
        meta = trace.sessions[first.session_id].meta if first.session_id in trace.sessions else {}
        tool, system = meta.get("tool_tokens"), meta.get("system_tokens")
        return (
            tool if isinstance(tool, int) else None,
            system if isinstance(system, int) else None,
        )
    tools = trace.blobs.get(first.request.tools or "")
    system = 0
    for mid in first.messages:
        blob = trace.blobs.get(mid)
        if blob is None or not isinstance(blob.content, dict):
            break
        if blob.content.get("role") not in ("system", "developer"):
            break
        system += blob.tokens or 0
    return (tools.tokens or 0) if tools is not None else 0, system


def _agents(trace: Trace, session_id: str, calls: list[LLMCallRecord]) -> list[AgentRecord]:
    """The session's agents that made calls, an agent record made up for calls without one."""
    agents = {a.id: a for a in trace.agents_of(session_id)}
    for c in calls:
        if c.agent_id not in agents:
            agents[c.agent_id] = AgentRecord(
                id=c.agent_id, session_id=session_id, role="agent", start_ns=c.timings.submit_ns
            )
    return list(agents.values())


def session_document(
    trace: Trace, session_id: str, doc_id: str, factor: int, scope: str = ""
) -> dict[str, Any] | None:
    """The Weka document of one session, or None when it made no calls."""
    calls = sorted(
        (c for c in trace.calls.values() if c.session_id == session_id),
        key=lambda c: (c.timings.submit_ns, c.id),
    )
    if not calls:
        return None
    agents = _agents(trace, session_id, calls)
    by_id = {a.id: a for a in agents}
    own = {a.id: trace.calls_of(a.id) for a in agents}
    roots = [a for a in agents if a.parent_agent_id not in by_id and own[a.id]]
    if not roots:  # no root agent made a call: the agent of the first call leads
        roots = [by_id[calls[0].agent_id]]
    root_ids = {a.id for a in roots}
    subs = [a for a in agents if a.id not in root_ids and own[a.id]]
    # The conversation starts at its first call (or an earlier sub-agent spawn).
    t0 = min([calls[0].timings.submit_ns, *(a.start_ns for a in subs)])
    numbers = BlockNumbers()
    tools = Counter(tc.agent_id for tc in trace.tool_calls.values() if tc.session_id == session_id)
    # (time, order, entry): a call sorts before an entry spawned at the same instant.
    items: list[tuple[int, int, dict[str, Any]]] = []
    for a in roots:
        reqs = _requests(trace, own[a.id], t0, numbers, factor, scope)
        items += [(c.timings.submit_ns, 0, r) for c, r in zip(own[a.id], reqs, strict=True)]
    first_root = min(t for t, _, _ in items)
    for a in subs:
        entry = _subagent(trace, a, own[a.id], tools, t0, numbers, factor, scope)
        items.append((max(t0 + ns(entry["t"]), first_root), 1, entry))
    items.sort(key=lambda it: (it[0], it[1]))
    requests = [entry for _, _, entry in items]
    flat = [r for r in requests if r["type"] != "subagent"]
    flat += [q for r in requests if r["type"] == "subagent" for q in r["requests"]]
    tool_tokens, system_tokens = static_tokens(trace, own[roots[0].id][0])
    return {
        "id": doc_id,
        "models": list(dict.fromkeys(c.request.model for c in calls)),
        "block_size": BLOCK_SIZE,
        "hash_id_scope": "local",
        **_known(tool_tokens=tool_tokens, system_tokens=system_tokens),
        "requests": requests,
        "totals": {
            "requests": len(flat),
            "input_tokens": sum(r["in"] for r in flat),
            "output_tokens": sum(r["out"] for r in flat),
        },
    }


def _check_out(out: Path) -> None:
    old = sorted(p.name for p in out.glob("*.json"))
    if old:
        raise ConfigError(
            f"-o/--out {out}: already holds {len(old)} .json file(s) ({old[0]} ...); Weka "
            "readers load every *.json of the directory, so give a new or empty one"
        )


def _unique_id(session_id: str, stats: _Stats) -> str:
    """The session id, made unique across the export (its file name too)."""
    doc_id, n = session_id, 1
    while _UNSAFE.sub("_", doc_id) in stats.ids:
        n += 1
        doc_id = f"{session_id}-{n}"
    stats.ids.add(_UNSAFE.sub("_", doc_id))
    return doc_id


def _write(files: NewFiles, doc: dict[str, Any]) -> None:
    path = files.add(files.folder / f"{_UNSAFE.sub('_', doc['id'])}.json")
    tmp = files.add(path.with_name(path.name + ".part"))
    tmp.write_bytes(orjson.dumps(doc))
    os.replace(tmp, path)


def _export_all(traces: Sequence[Path], files: NewFiles, stats: _Stats, notes: list[str]) -> None:
    """One Weka file per session of ``traces`` into ``files.folder`` (counted in ``stats``)."""
    for i, path in enumerate(traces):
        trace = load_trace(path)
        if trace.truncated is not None:
            notes.append(f"{path}: {trace.truncated} (exported the records before it)")
        if has_waits(trace):
            notes.append(
                f"{path}: t and think_time include modeled waits, not measured "
                f"({describe_waits(trace)})"
            )
        trace = with_gaps(trace, GapMode.MODELED)
        factor = group_factor(trace, BLOCK_SIZE)
        scope = str(i) if trace.header.source is not None else ""
        session_ids = list(trace.sessions)
        session_ids += sorted({c.session_id for c in trace.calls.values()} - set(session_ids))
        for sid in session_ids:
            doc = session_document(trace, sid, _unique_id(sid, stats), factor, scope)
            if doc is None:
                stats.empty_sessions += 1
                continue
            _write(files, doc)
            stats.files += 1
            stats.requests += doc["totals"]["requests"]
            stats.subagents += sum(1 for r in doc["requests"] if r["type"] == "subagent")


def export_weka(traces: Sequence[Path], out: Path) -> list[str]:
    """Write one Weka file per session of ``traces`` into the directory ``out``; returns the
    summary line. A failure (a full disk) leaves none of them (``outfile.new_files``)."""
    stats = _Stats()
    notes: list[str] = []
    with new_files(out, option="-o/--out") as files:
        _check_out(out)
        _export_all(traces, files, stats, notes)
    empty = (
        f"; {stats.empty_sessions} session(s) without calls skipped" if stats.empty_sessions else ""
    )
    return [
        f"{out}: {stats.files} Weka file(s), {stats.requests} requests, {stats.subagents} "
        f"sub-agent entries, from {len(traces)} trace(s){empty}",
        *notes,
    ]
