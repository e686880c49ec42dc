"""Trace statistics: the numbers ``agentload trace stats`` prints (and other checks read).

``compute_stats(trace)`` returns one JSON-ready dict. Its keys and formulas:

``sessions``
    Number of distinct session ids (session, agent and llm_call records together).
``agents``
    One entry per agent, ordered by start time: ``{id, role, parent, session, calls,
    prompt_tokens_first, prompt_tokens_last, completion_tokens_total, tool_calls}``. Prompt
    tokens are the server-reported ``usage.prompt_tokens`` when present, else our own count;
    completion tokens likewise (0 when neither is known). ``tool_calls`` counts the tool_call
    records the agent emitted.
``llm_calls``
    Number of llm_call records.
``tool_calls_by_name``
    ``{name: {count, p50_s, p90_s}}``: tool durations ``(end_ns - start_ns) / 1e9``.
``gaps_s``
    ``{p50, p90, max}`` over every pair of consecutive calls (by ``seq``) of the same agent:
    ``next.submit_ns - prev.last_token_ns`` (``first_token_ns``, then ``submit_ns`` stand in
    when the later timestamps are missing), clamped at 0. This is the time the agent spent
    between calls: running tools, waiting for sub-agents, its own overhead.
``output_tokens_per_call``
    ``{p50, p90}`` of each call's completion tokens (server-reported, else ours).
``appended_tokens_per_call``
    ``{p50, p90}`` over every call that has a previous call in the same agent of
    ``max(0, prompt_tokens(call) - prompt_tokens(previous call))``: the prompt tokens the call
    adds to its agent's context (the previous reply plus tool results). A compaction that
    shrinks the context counts as 0.
``prefix_reuse_ceiling``
    Token-weighted fraction of prompt blocks already seen earlier in the same session: calls
    are taken in submit order; a call's block is *seen* when an earlier call of the session had
    the same chained block hash (which, the hashes being chained, means the same whole prefix).
    ``sum(seen blocks) * block_size / sum(prompt_tokens_ours)``: the share of prompt tokens an
    ideal prefix cache that keeps everything for the session could serve.
``tool_time_share``
    ``sum over sessions(time when at least one tool runs) / sum over sessions(wall time)``.
    Overlapping tool calls are counted once (interval union); ``delegate`` calls (a sub-agent's
    whole run, i.e. LLM time) are not tool time.
``wall_s``
    Seconds from the earliest start (session start, else first record) to the latest end
    (session end, else the latest timestamp recorded) over the whole file.

Extra keys: ``tokenizer``, ``model``, ``truncated`` (why the file ends early, or null),
``records`` (count per record type), ``prompt_tokens_total``, ``completion_tokens_total``,
``cached_tokens_total`` (server-reported; null when the server never reported it),
``roles`` (``{role: {agents, calls, prompt_tokens_max, completion_tokens_total}}``),
``side_calls`` (calls of side agents: a title, a summary, a small-model check beside the
session's main agent, role ``side``), ``unread_requests`` (requests the recording proxy relayed
but did not read as calls: ``unread_request`` events), ``embedding_requests`` (embeddings
requests it relayed: ``embedding`` events, no calls),
``prompt_tokens_server_per_ours`` (``sum(usage.prompt_tokens) / sum(usage.prompt_tokens_ours)``
over the calls whose server reported prompt tokens: how many server tokens one of ours was;
null when no call has both), ``token_calibration`` (the ratio ``generate`` measured before the
sessions, from the header; null in traces without one).
Percentiles use linear interpolation between closest ranks; they are null when there is no
sample.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agentload.quantiles import percentile
from agentload.trace.events import EventKind
from agentload.trace.samples import (
    agent_ids,
    completion_tokens,
    session_spans,
    trace_samples,
)
from agentload.trace.schema import SIDE_ROLE
from agentload.trace.trace import Trace

__all__ = ["STATS_KEYS", "completion_tokens", "compute_stats"]

STATS_KEYS = (
    "sessions",
    "agents",
    "llm_calls",
    "tool_calls_by_name",
    "gaps_s",
    "output_tokens_per_call",
    "appended_tokens_per_call",
    "prefix_reuse_ceiling",
    "tool_time_share",
    "wall_s",
)
"""Keys ``compute_stats`` always returns (other checks read them)."""

_NS = 1e9


def _pct(values: Sequence[float], q: float) -> float | None:
    """``agentload.quantiles.percentile``, or None for no values (stats show ``-``)."""
    return percentile(values, q) if values else None


def _agent_rows(trace: Trace) -> list[dict[str, Any]]:
    ids = agent_ids(trace)
    tools_per_agent: dict[str, int] = defaultdict(int)
    for tc in trace.tool_calls.values():
        tools_per_agent[tc.agent_id] += 1
    rows = []
    for aid in ids:
        a = trace.agents.get(aid)
        calls = trace.calls_of(aid)
        rows.append(
            {
                "id": aid,
                "role": a.role if a else "unknown",
                "parent": a.parent_agent_id if a else None,
                "session": a.session_id if a else (calls[0].session_id if calls else None),
                "calls": len(calls),
                "prompt_tokens_first": trace.prompt_tokens(calls[0]) if calls else None,
                "prompt_tokens_last": trace.prompt_tokens(calls[-1]) if calls else None,
                "completion_tokens_total": sum(completion_tokens(c) for c in calls),
                "tool_calls": tools_per_agent.get(aid, 0),
            }
        )
    return rows


def _roles(trace: Trace, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    roles: dict[str, dict[str, Any]] = {}
    for r in rows:
        d = roles.setdefault(
            r["role"],
            {"agents": 0, "calls": 0, "prompt_tokens_max": 0, "completion_tokens_total": 0},
        )
        d["agents"] += 1
        d["calls"] += r["calls"]
        d["completion_tokens_total"] += r["completion_tokens_total"]
        for c in trace.calls_of(r["id"]):
            d["prompt_tokens_max"] = max(d["prompt_tokens_max"], trace.prompt_tokens(c))
    return roles


def _server_per_ours(trace: Trace) -> float | None:
    pairs = [
        (c.usage.prompt_tokens, c.usage.prompt_tokens_ours)
        for c in trace.calls.values()
        if c.usage.prompt_tokens is not None
    ]
    ours = sum(o for _, o in pairs)
    return sum(s for s, _ in pairs) / ours if ours else None


def compute_stats(trace: Trace) -> dict[str, Any]:
    """The stats object of a loaded trace (formulas in the module docstring)."""
    rows = _agent_rows(trace)
    samples = trace_samples(trace)
    gaps = samples.get("gap_s")
    appended = samples.get("appended_tokens_per_call")
    outputs = samples.get("output_tokens_per_call")

    durations: dict[str, list[float]] = defaultdict(list)
    for tc in trace.tool_calls.values():
        durations[tc.name].append(max(0, tc.end_ns - tc.start_ns) / _NS)
    by_name = {
        name: {"count": len(d), "p50_s": _pct(d, 50), "p90_s": _pct(d, 90)}
        for name, d in sorted(durations.items())
    }

    spans = session_spans(trace)
    tool_busy, session_wall = samples.tool_time_ns
    wall_ns = max(e for _, e in spans.values()) - min(s for s, _ in spans.values()) if spans else 0
    seen, total = samples.reuse_tokens
    cached = [c.usage.cached_tokens for c in trace.calls.values()]
    cal = trace.header.token_calibration
    return {
        "sessions": len(spans),
        "agents": rows,
        "llm_calls": len(trace.calls),
        "tool_calls_by_name": by_name,
        "gaps_s": {
            "p50": _pct(gaps, 50),
            "p90": _pct(gaps, 90),
            "max": max(gaps) if gaps else None,
        },
        "output_tokens_per_call": {"p50": _pct(outputs, 50), "p90": _pct(outputs, 90)},
        "appended_tokens_per_call": {
            "p50": _pct(appended, 50),
            "p90": _pct(appended, 90),
        },
        "prefix_reuse_ceiling": seen / total if total else None,
        "tool_time_share": tool_busy / session_wall if session_wall else None,
        "wall_s": wall_ns / _NS,
        "tokenizer": trace.header.tokenizer,
        "model": trace.header.model,
        "truncated": str(trace.truncated) if trace.truncated else None,
        "records": dict(sorted(trace.counts.items())),
        "prompt_tokens_total": sum(trace.prompt_tokens(c) for c in trace.calls.values()),
        "completion_tokens_total": int(sum(outputs)),
        "cached_tokens_total": (
            sum(x for x in cached if x is not None) if any(x is not None for x in cached) else None
        ),
        "roles": _roles(trace, rows),
        "side_calls": sum(r["calls"] for r in rows if r["role"] == SIDE_ROLE),
        "unread_requests": sum(e.kind == EventKind.UNREAD_REQUEST for e in trace.events),
        "embedding_requests": sum(e.kind == EventKind.EMBEDDING for e in trace.events),
        "prompt_tokens_server_per_ours": _server_per_ours(trace),
        "token_calibration": cal.server_per_ours if cal is not None else None,
        "source": _source(trace),
    }


def _source(trace: Trace) -> dict[str, Any] | None:
    """An imported trace's source: its format, what the import derived, what it accepted."""
    src = trace.header.source
    if src is None:
        return None
    return {
        "format": src.format,
        "files": src.files_total or len(src.files),
        "derived": dict(src.derived),
        "deviations": dict(src.deviations),
    }
