"""Import: TraceLab (one JSONL line per LLM round of real Claude Code / Codex sessions).

A round carries ``session_id``, ``round_index``, ``input_tokens_total`` (= ``prefix_tokens`` +
``newly_append_tokens``, the engine's split of what was already cached), ``output_tokens``,
``reasoning_output_tokens``, ``model``, ``timing_events[]`` (ISO-8601 ``timestamp`` +
``event_type``) and ``tools[]`` (``tool_name``, ``emitted_at``, ``result_at``,
``tool_wall_latency_ms``). Each session becomes one session of one agent; each round a call
submitted at its latest input event (``user_message``, ``tool_result``; else its first output
event) and ending at its last output event (``text``, ``reasoning``, ``tool_call``); each tool a
``tool_call`` the next round depends on.

TraceLab has no content hashes: block ids are built per session at ``BLOCK_SIZE`` tokens a
block from the prefix split: a round keeps the first ``prefix_tokens // BLOCK_SIZE`` blocks of
the session's previous round and gets fresh ids for the rest of its whole blocks. Sub-agents
have no link in the format and stay separate sessions. The rounds are read once, one line at a
time, and held as small tuples until every session is complete (a session's rounds may be
spread over the file).

The schema is the rows TraceLab's extractors write (its README and released rows); fields it
writes null (``reasoning_output_tokens`` of Claude rows, the ``claude_*`` counts of Codex rows,
``tool_internal_latency_ms``, ``is_error``) are nullable. What departs from it without losing
meaning (a key it does not write, a null or missing field with a default, a number as a string)
is accepted and counted (``content_free.Deviations``), one warning line at the end.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentload.errors import TraceFormatError
from agentload.interop.content_free import (
    MISSING,
    NULL,
    At,
    Deviations,
    Progress,
    extra_keys,
    need_int,
    need_str,
    need_tokens,
    opt_str,
    opt_time,
    time_s,
)
from agentload.interop.import_io import (
    ContentFreeCall,
    import_header,
    json_lines,
    need_file,
    ns,
    prefix_of,
    summary,
    write_trace,
)
from agentload.trace.schema import ClockAnchor

__all__ = ["BLOCK_SIZE", "import_tracelab"]

BLOCK_SIZE = 64
"""Tokens per block id built from ``prefix_tokens`` (TraceLab records no block size)."""

_INPUT_EVENTS = frozenset({"user_message", "tool_result"})
_OUTPUT_EVENTS = frozenset({"text", "reasoning", "tool_call"})
_ROW_KEYS = frozenset(
    (
        "provider",
        "project",
        "user",
        "home",
        "cwd",
        "workdir",
        "session_file",
        "store",
        "trace_key",
        "session_id",
        "round_index",
        "round_id",
        "turn_id",
        "model",
        "input_tokens_total",
        "prefix_tokens",
        "newly_append_tokens",
        "claude_uncached_input_tokens",
        "claude_cache_creation_input_tokens",
        "claude_cache_read_input_tokens",
        "output_tokens",
        "reasoning_output_tokens",
        "timing_events",
        "tools",
        "first_input_event_type",
        "current_input_event_count",
        "current_user_message_count",
        "current_tool_result_count",
        "current_user_message_chars",
        "current_tool_result_chars",
        "current_input_chars",
    )
)
_EVENT_KEYS = frozenset(
    (
        "event_type",
        "timestamp",
        "source",
        "content_chars",
        "tool_call_id",
        "tool_name",
        "tool_index",
        "result_chars",
        "is_error",
    )
)
_TOOL_KEYS = frozenset(
    (
        "tool_index",
        "tool_name",
        "tool_call_id",
        "emitted_at",
        "result_at",
        "input",
        "input_chars",
        "result_chars",
        "tool_wall_latency_ms",
        "tool_internal_latency_ms",
        "is_error",
    )
)


@dataclass(frozen=True, slots=True)
class _Tool:
    name: str
    start_s: float | None
    end_s: float | None
    latency_s: float | None


@dataclass(frozen=True, slots=True)
class _Round:
    submit_s: float
    api_s: float | None
    index: int
    line: int
    n_in: int
    prefix: int
    n_out: int
    model: str
    tools: tuple[_Tool, ...]


def _ts(v: Any, at: At, fld: str) -> float:
    if not isinstance(v, str):
        at.fail(fld, f"expected an ISO-8601 timestamp string, got {v!r}")
    try:
        dt = datetime.datetime.fromisoformat(v)
    except ValueError:
        at.fail(fld, f"not an ISO-8601 timestamp: {v!r}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return time_s(dt.timestamp(), fld, at)


def _list(row: dict[str, Any], key: str, at: At) -> list[dict[str, Any]]:
    v = row.get(key)
    if v is None:
        at.deviate(key, NULL if key in row else MISSING)
        return []
    if not isinstance(v, list):
        at.fail(key, "expected a list of objects")
    for i, x in enumerate(v):
        if not isinstance(x, dict):
            at.fail(f"{key}[{i}]", "expected an object")
    return v


def _round(row: dict[str, Any], at: At, lineno: int) -> _Round | None:
    """One round, or None when no event of it has a timestamp (it cannot be placed)."""
    extra_keys(row, _ROW_KEYS, at)
    # fields every TraceLab row has: a null or a missing one takes its default, counted
    index = need_int(row, "round_index", at, default=0, nullable=False, required=True)
    n_in = need_tokens(row, "input_tokens_total", at)
    prefix = need_tokens(row, "prefix_tokens", at, default=0, nullable=False, required=True)
    need_tokens(row, "newly_append_tokens", at, default=0, nullable=False, required=True)
    n_out = need_tokens(row, "output_tokens", at, default=0, nullable=False, required=True)
    n_out += need_tokens(row, "reasoning_output_tokens", at, default=0)
    model = need_str(row, "model", at, default="unknown", nullable=False, required=True)
    opt_str(row, "first_input_event_type", at)
    ins: list[float] = []
    outs: list[float] = []
    for i, ev in enumerate(_list(row, "timing_events", at)):
        eat = at.sub(f"timing_events[{i}]")
        extra_keys(ev, _EVENT_KEYS, eat)
        kind = opt_str(ev, "event_type", eat)
        if ev.get("timestamp") is None:
            continue
        t = _ts(ev["timestamp"], at, f"timing_events[{i}].timestamp")
        if kind in _INPUT_EVENTS:
            ins.append(t)
        elif kind in _OUTPUT_EVENTS:
            outs.append(t)
    tools = []
    for i, tool in enumerate(_list(row, "tools", at)):
        tat = at.sub(f"tools[{i}]")
        extra_keys(tool, _TOOL_KEYS, tat)
        name = need_str(tool, "tool_name", tat, default="tool", nullable=False, required=True)
        latency = opt_time(tool, "tool_wall_latency_ms", tat, unit_s=1e-3)
        start = tool.get("emitted_at")
        end = tool.get("result_at")
        tools.append(
            _Tool(
                name=name,
                start_s=None if start is None else _ts(start, at, f"tools[{i}].emitted_at"),
                end_s=None if end is None else _ts(end, at, f"tools[{i}].result_at"),
                latency_s=None if latency is None else max(0.0, latency),
            )
        )
    if not ins and not outs:
        return None
    submit = max(ins) if ins else min(outs)
    api = max(0.0, max(outs) - submit) if outs else None
    return _Round(submit, api, index, lineno, n_in, min(prefix, n_in), n_out, model, tuple(tools))


def import_tracelab(files: list[Path], out: Path, *, deviations: Deviations | None = None) -> str:
    """Import ``files`` into the trace ``out``; returns the summary line. The deviations from
    the schema that were accepted are counted into ``deviations`` when given (the caller shows
    ``deviations.warning()``), else printed as one warning line on stderr; either way they are
    recorded in the header's ``source.deviations``."""
    paths = [need_file(f) for f in files]
    dev = deviations if deviations is not None else Deviations("tracelab")
    sessions: dict[str, list[_Round]] = {}
    lines = skipped = 0
    progress = Progress("reading tracelab")
    for path in paths:
        for lineno, row in json_lines(path):
            at = At(str(path), f"line {lineno}", dev)
            sid = need_str(row, "session_id", at)
            r = _round(row, at, lineno)
            lines += 1
            progress.done = lines
            progress.show()
            if r is None:
                skipped += 1
                continue
            sessions.setdefault(sid, []).append(r)
    if not sessions:
        what = "no rounds" if not lines else "no round with a timestamp (none can be placed)"
        raise TraceFormatError(f"{paths[0] if len(paths) == 1 else 'the files'}: {what}")
    t0_s = min((r.submit_s for rs in sessions.values() for r in rs), default=0.0)
    model = next((rs[0].model for rs in sessions.values()), None)
    header = import_header("tracelab", paths, BLOCK_SIZE, "local", lines, model)
    mono = header.clock.mono_ns
    header.clock = ClockAnchor(unix_ns=ns(t0_s), mono_ns=mono)  # wall time of the first round
    progress = Progress("importing tracelab", total=len(sessions))
    records = _records(sessions, mono, t0_s, progress)
    counts = write_trace(out, header, records, progress, dev)
    if deviations is None and (line := dev.warning()):
        print(line, file=sys.stderr)
    note = f"; {skipped:,} rounds without timestamps left out" if skipped else ""
    return summary(out, counts, header) + note


@dataclass(frozen=True, slots=True)
class _Clock:
    """The trace clock of an import: ``mono`` ns stands for the first round's wall time
    ``t0_s``."""

    mono: int
    t0_s: float

    def at(self, wall_s: float) -> int:
        """A wall time of the source (seconds since 1970) as trace ns."""
        return self.mono + ns(wall_s - self.t0_s)


def _records(
    sessions: dict[str, list[_Round]], mono: int, t0_s: float, progress: Progress
) -> Iterator[dict[str, Any]]:
    """Each session's records: the session, its one agent, then each call followed by the tool
    calls it emitted."""
    clock = _Clock(mono, t0_s)
    for k, (sid, rounds) in enumerate(sessions.items()):
        rounds.sort(key=lambda r: (r.submit_s, r.index, r.line))
        aid = f"{sid}.main"
        calls, tools = _calls(k, sid, aid, rounds, clock)
        starts = [c["timings"]["submit_ns"] for c in calls]
        ends = [c["timings"].get("last_token_ns", c["timings"]["submit_ns"]) for c in calls]
        ends += [t["end_ns"] for t in tools]
        yield {
            "type": "session",
            "id": sid,
            "start_ns": min(starts),
            "end_ns": max(ends),
            "meta": {"source_id": sid, "models": sorted({r.model for r in rounds})},
        }
        yield {
            "type": "agent",
            "id": aid,
            "session_id": sid,
            "role": "orchestrator",
            "start_ns": min(starts),
            "end_ns": max(ends),
        }
        for c, t in _interleave(calls, tools):
            yield c
            yield from t
        progress.done = k + 1


def _calls(
    k: int, sid: str, aid: str, rounds: list[_Round], clock: _Clock
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``k``-th session's rounds, in order, as its agent ``aid``'s calls, and the tool calls
    they emitted (each call depends on the tool calls of the one before)."""
    calls: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    prev: tuple[str, list[str]] | None = None
    prev_tools: list[str] = []
    fresh = 0
    for seq, r in enumerate(rounds):
        blocks, fresh = _blocks(k, r, prev[1] if prev else [], fresh)
        call_id = f"{aid}.{seq}"
        submit = clock.at(r.submit_s)
        end = submit + ns(r.api_s) if r.api_s is not None else None
        refs, emitted = _tool_calls(r.tools, call_id, sid, aid, clock, end or submit)
        tools.extend(emitted)
        calls.append(
            ContentFreeCall(
                call_id=call_id,
                session_id=sid,
                agent_id=aid,
                seq=seq,
                model=r.model,
                n_in=r.n_in,
                n_out=r.n_out,
                submit_ns=submit,
                last_token_ns=end,
                prefix=prefix_of(prev, blocks),
                depends_on=prev_tools,
                tool_calls=refs,
                finish_reason="tool_calls" if refs else "stop",
            ).record()
        )
        prev = (call_id, blocks)
        prev_tools = [t["id"] for t in refs]
    return calls, tools


def _blocks(k: int, r: _Round, prev: list[str], fresh: int) -> tuple[list[str], int]:
    """The block ids of round ``r`` of the ``k``-th session: as many of the previous round's
    (``prev``) as its prefix covers, then fresh ids for the rest of its whole blocks; returns
    them and the count of fresh ids given out so far."""
    n_blocks = r.n_in // BLOCK_SIZE
    keep = min(r.prefix // BLOCK_SIZE, len(prev), n_blocks)
    blocks = prev[:keep] + [f"{k}:{fresh + j}" for j in range(n_blocks - keep)]
    return blocks, fresh + n_blocks - keep


def _tool_calls(
    tools: tuple[_Tool, ...], call_id: str, sid: str, aid: str, clock: _Clock, after_ns: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The tools a round ran as the call's tool-call references and as ``tool_call`` records (a
    tool without an emit time starts ``after_ns``, the call's end)."""
    refs: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for j, tool in enumerate(tools):
        tid = f"{call_id}.t{j}"
        start = clock.at(tool.start_s) if tool.start_s is not None else after_ns
        end_s, latency_s = tool.end_s, tool.latency_s or 0.0
        stop = clock.at(end_s) if end_s is not None else start + ns(latency_s)
        refs.append({"id": tid, "name": tool.name, "arguments": "{}"})
        records.append(
            {
                "type": "tool_call",
                "id": tid,
                "session_id": sid,
                "agent_id": aid,
                "llm_call_id": call_id,
                "name": tool.name,
                "arguments": {},
                "start_ns": start,
                "end_ns": max(start, stop),
            }
        )
    return refs, records


def _interleave(
    calls: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each call with the tool calls it emitted (written right after it)."""
    by_call: dict[str, list[dict[str, Any]]] = {}
    for t in tools:
        by_call.setdefault(t["llm_call_id"], []).append(t)
    for c in calls:
        yield c, by_call.get(c["id"], [])
