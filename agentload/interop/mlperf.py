"""``agentload trace import mlperf``: MLPerf agentic-inference datasets (MLCommons Endpoints'
flat-row JSONL) → a full-content trace.

One row a message: ``conversation_id``, ``turn`` (1..N within it), ``role`` (``user``,
``assistant``, ``tool``) and the message's own keys. The harness sends the client turns (the
``user`` and ``tool`` rows), each with the system prompt and every earlier row before it; the
``assistant`` rows are the answers it expects. A directory is walked for ``*.jsonl``.

| rows | trace |
|---|---|
| a ``conversation_id`` (its rows in ``turn`` order) | one session (``x-agentload-session``: the id) of one agent |
| the first ``user`` row's ``system`` | the first message, ``role: system`` (as the harness's loader prepends it) |
| ``user`` row ``content`` (``name``) | a ``user`` message |
| ``assistant`` row | one model call: its request the messages before it, its answer ``content`` (``null``
  when absent), ``reasoning_content`` and ``tool_calls`` (``arguments`` an object or a JSON
  string: sent as a string); in later requests the assistant message as the harness replays it,
  ``reasoning_content`` included (the official rules replay it: ``preserve_thinking``) |
| ``tool`` row ``tool_results[]`` (``tool_call_id``, ``content``) | one ``role: tool`` message each |
| ``tool`` row ``delay_seconds`` | the gap before the next call (the recorded tool time; the sum
  of the tool rows between two answers; ≤ 0: none) |
| the first ``user`` row's ``tools``, ``model``, ``max_new_tokens`` / ``max_completion_tokens``,
  ``stream`` | every request's ``tools``, ``model``, ``max_tokens`` / ``max_completion_tokens``,
  ``stream`` (the loader copies them to every client turn) |
| ``_type: "dataset_metadata"`` rows | skipped (the loader drops them) |

Derived (``header.source.derived``): the times (``exchanges.Pacer`` from the file's modification
time, the recorded tool delays between calls; a call's output length for its duration is its
answer's characters / 4), the usage (none: the trace's own token counts stand), and where the
rows lack them the model (``unknown``), ``stream: true`` and the tools (the functions called,
empty schemas). A conversation that ends on a client turn (no recorded answer after it) has that
turn dropped, counted. Rows are read a file at a time (memory: one file's rows).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import TraceFormatError
from agentload.interop.chat_rows import (
    clean_tools,
    conversation,
    first_row,
    mtime_ns,
    named_tools,
    rows,
    source_files,
    tool_call,
    unique,
)
from agentload.interop.content_free import (
    EXTRA_KEY,
    MISSING,
    At,
    Progress,
    need_int,
    need_str,
    opt_num,
    show,
)
from agentload.interop.exchanges import Exchange, Pacer, Tally, full_header, write_sessions
from agentload.outfile import check_output

__all__ = ["import_mlperf", "looks_like_mlperf"]

FORMAT = "mlperf"
_KEYS = frozenset(
    {
        "conversation_id",
        "turn",
        "role",
        "content",
        "system",
        "tools",
        "reasoning_content",
        "tool_calls",
        "tool_results",
        "delay_seconds",
        "model",
        "max_new_tokens",
        "max_completion_tokens",
        "stream",
        "name",
    }
)
_ROLES = ("user", "assistant", "tool")
_DERIVED = {
    "usage": "not in the rows: none (the trace's own token counts stand)",
    "output_tokens": "for the derived times: the answer's characters / 4",
    "start": "the file's modification time (every conversation of a file starts there)",
}


def looks_like_mlperf(first: dict[str, Any]) -> bool:
    """Whether a JSONL file's first row is an MLPerf agentic-inference row (or the dataset's
    metadata row)."""
    return first.get("_type") == "dataset_metadata" or (
        "conversation_id" in first and "turn" in first and "role" in first
    )


def _listed(row: dict[str, Any], key: str, at: At, tally: Tally) -> list[Any] | None:
    """``row[key]``: a list (a JSON string of one accepted, counted), or None when absent."""
    v = row.get(key)
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = orjson.loads(v)
        except orjson.JSONDecodeError:
            at.fail(key, f"expected a list, got {show(v)}")
        tally.note(key, "list as a JSON string")
    if not isinstance(v, list):
        at.fail(key, f"expected a list, got {show(v)}")
    return v


def _conversation(
    conv: str, rows_: list[tuple[At, dict[str, Any]]], tally: Tally, start_ns: int, session: str
) -> list[Exchange]:
    """One conversation's calls (see the module docstring)."""
    by_turn: list[tuple[int, At, dict[str, Any]]] = []
    seen: dict[int, At] = {}
    for at, row in rows_:
        turn = need_int(row, "turn", at, lo=1)
        if turn in seen:
            at.fail("turn", f"turn {turn} of {conv!r} repeated (first at {seen[turn].record})")
        seen[turn] = at
        by_turn.append((turn, at, row))
    by_turn.sort(key=lambda x: x[0])
    if [t for t, _, _ in by_turn] != list(range(1, len(by_turn) + 1)):
        tally.note("turn", "not consecutive from 1")
    first_at, first = next(((a, r) for _, a, r in by_turn if r.get("role") == "user"), (None, {}))
    messages: list[dict[str, Any]] = []
    places: list[At] = []
    system = need_str(first, "system", first_at, "") if first_at is not None else ""
    if system:
        messages.append({"role": "system", "content": system})
        places.append(first_at or by_turn[0][1])
    tools = clean_tools(first.get("tools"), first_at or by_turn[0][1], "tools", tally)
    gaps: dict[int, float] = {}
    gap: float | None = None
    names: list[str] = []
    for _, at, row in by_turn:
        role = row.get("role")
        if role not in _ROLES:
            at.fail("role", f"expected user, assistant or tool, got {show(role)}")
        for k in row:
            if k not in _KEYS:
                tally.note(k, EXTRA_KEY)
        if role == "user":
            msg: dict[str, Any] = {
                "role": "user",
                "content": need_str(row, "content", at, "", required=True),
            }
            if isinstance(row.get("name"), str):
                msg["name"] = row["name"]
            messages.append(msg)
            places.append(at)
        elif role == "tool":
            results = _listed(row, "tool_results", at, tally)
            if not results:
                at.fail("tool_results", "missing (a tool row carries results)")
            for j, r in enumerate(results):
                if not isinstance(r, dict) or not isinstance(r.get("tool_call_id"), str):
                    at.fail(
                        f"tool_results[{j}].tool_call_id",
                        "missing (a result answers a call by its id)",
                    )
                content = r.get("content")
                if content is None:
                    tally.note("tool_results[].content", MISSING if "content" not in r else "null")
                    content = ""
                elif not isinstance(content, str | list):
                    tally.note("tool_results[].content", "not a string (JSON-encoded)")
                    content = orjson.dumps(content).decode()
                messages.append(
                    {"role": "tool", "tool_call_id": r["tool_call_id"], "content": content}
                )
                places.append(at)
            delay = opt_num(row, "delay_seconds", at)
            if delay is not None:
                gap = (gap or 0.0) + max(delay, 0.0)
        else:
            if messages and messages[-1]["role"] == "assistant":
                tally.note("role", "assistant after assistant (no client turn between)")
            answer: dict[str, Any] = {"role": "assistant", "content": None}
            content = row.get("content")
            if isinstance(content, str) and content:
                answer["content"] = content
            elif content is not None and not isinstance(content, str):
                at.fail("content", f"expected a string, got {show(content)}")
            if isinstance(row.get("reasoning_content"), str):
                answer["reasoning_content"] = row["reasoning_content"]
            calls = _listed(row, "tool_calls", at, tally)
            if calls:
                answer["tool_calls"] = [
                    tool_call(
                        c,
                        at,
                        f"tool_calls[{j}]",
                        tally,
                        objects_ok=True,
                        fallback_id=f"call_{len(messages)}_{j}",
                    )
                    for j, c in enumerate(calls)
                ]
                for c in answer["tool_calls"]:
                    if c["function"]["name"] not in names:
                        names.append(c["function"]["name"])
            if answer["content"] is None and "tool_calls" not in answer:
                tally.note("assistant", "neither content nor tool_calls (an empty answer)")
                answer["content"] = ""
            if gap is not None:
                gaps[len(messages)] = gap
            gap = None
            messages.append(answer)
            places.append(at)
    if messages and messages[-1]["role"] != "assistant":
        tally.note("conversation", "ends on a client turn with no recorded answer (not sent)")
    if tools is None and names:
        tools = named_tools(names)
        tally.derived["tools"] = "not in the rows: the functions called, with empty schemas"
    model = first.get("model")
    if not isinstance(model, str) or not model:
        model = "unknown"
        tally.derived["model"] = "not in the rows: unknown"
    params: dict[str, Any] = {}
    for src, dst in (
        ("max_new_tokens", "max_tokens"),
        ("max_completion_tokens", "max_completion_tokens"),
    ):
        if first.get(src) is not None and first_at is not None:
            params[dst] = need_int(first, src, first_at, lo=1)
    stream = first.get("stream")
    if not isinstance(stream, bool):
        stream = True
        tally.derived["stream"] = "true (where the rows do not say)"

    def body(history: list[dict[str, Any]]) -> dict[str, Any]:
        b: dict[str, Any] = {"model": model, "messages": history}
        if tools:
            b["tools"] = tools
        b.update(params)
        b["stream"] = stream
        return b

    tally.derived.update(_DERIVED)
    return conversation(messages, body, session, Pacer(tally, start_ns), lambda i: places[i], gaps)


def _groups(path: Path, tally: Tally) -> tuple[int, dict[str, list[tuple[At, dict[str, Any]]]]]:
    """The rows of one file by conversation (in the order first seen), and how many were read."""
    groups: dict[str, list[tuple[At, dict[str, Any]]]] = {}
    last: str | None = None
    n = 0
    for at, row in rows(path, tally):
        n += 1
        if row.get("_type") == "dataset_metadata":
            continue
        conv = need_str(row, "conversation_id", at)
        if conv != last and conv in groups:
            tally.note("conversation_id", "rows of a conversation not contiguous")
        last = conv
        groups.setdefault(conv, []).append((at, row))
    return n, groups


def import_mlperf(paths: list[Path], out: Path, *, force: bool = False) -> str:
    """Import MLPerf agentic-inference JSONL (files or directories) into the trace ``out``."""
    tally = Tally(FORMAT)
    files, walked = source_files(paths, (".jsonl",))
    if not files:
        raise TraceFormatError(
            f"{', '.join(map(str, paths))}: no MLPerf agentic rows (*.jsonl) found"
        )
    check_output(out, files, force=force)
    progress = Progress("mlperf conversations")
    n_rows = 0
    n_conv = 0
    used: dict[str, int] = {}
    read: list[Path] = []  # the files imported (a walked file of another kind is skipped)

    def sessions() -> Iterator[list[Exchange]]:
        nonlocal n_rows, n_conv
        for f in files:
            if f in walked:
                head = first_row(f)
                if head is None or not looks_like_mlperf(head):
                    tally.note("file", "not MLPerf agentic rows, skipped")
                    continue
            read.append(f)
            n, groups = _groups(f, tally)
            n_rows += n
            start = mtime_ns(f)
            for conv, group in groups.items():
                n_conv += 1
                yield _conversation(conv, group, tally, start, unique(conv, used))
        if not n_conv:
            raise TraceFormatError(f"{', '.join(map(str, paths))}: no MLPerf conversations found")

    n_sessions, calls = write_sessions(
        out, lambda t0: full_header(FORMAT, read, n_rows, tally, t0), sessions(), progress
    )
    warning = tally.dev.warning()
    if warning:
        print(warning, file=sys.stderr)
    return (
        f"wrote {out}: {n_sessions:,} sessions, {calls:,} calls from {n_conv:,} MLPerf "
        f"conversations ({n_rows:,} rows in {len(read):,} files)"
    )
