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

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import TraceFormatError
from agentload.interop.chat_rows import (
    clean_tools,
    conversation,
    mtime_ns,
    named_tools,
    of_format,
    rows,
    source_files,
    tool_call,
    unique,
)
from agentload.interop.content_free import (
    EXTRA_KEY,
    MISSING,
    At,
    need_int,
    need_str,
    opt_num,
    show,
)
from agentload.interop.exchanges import Exchange, Pacer, Tally, import_sessions
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


def _in_turns(
    conv: str, rows_: list[tuple[At, dict[str, Any]]], tally: Tally
) -> list[tuple[At, dict[str, Any]]]:
    """A conversation's rows in ``turn`` order (a repeated turn is an error, a gap counted)."""
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
    return [(at, row) for _, at, row in by_turn]


def _tool_content(r: dict[str, Any], tally: Tally) -> Any:
    """A tool result's ``content`` as sent: text or parts (absent or null: ``""``; another value
    JSON-encoded; both counted)."""
    content = r.get("content")
    if content is None:
        tally.note("tool_results[].content", MISSING if "content" not in r else "null")
        return ""
    if not isinstance(content, str | list):
        tally.note("tool_results[].content", "not a string (JSON-encoded)")
        return orjson.dumps(content).decode()
    return content


@dataclass
class _Messages:
    """A conversation's messages as its rows give them, each with its row's place, the recorded
    tool time before each answer (by the answer's index) and the functions called."""

    tally: Tally
    messages: list[dict[str, Any]] = field(default_factory=list)
    places: list[At] = field(default_factory=list)
    gaps: dict[int, float] = field(default_factory=dict)
    gap: float | None = None
    names: list[str] = field(default_factory=list)

    def add(self, msg: dict[str, Any], at: At) -> None:
        """One message, from the row at ``at``."""
        self.messages.append(msg)
        self.places.append(at)

    def row(self, at: At, row: dict[str, Any]) -> None:
        """One row's messages (its role checked, its keys the format lacks counted)."""
        role = row.get("role")
        if role not in _ROLES:
            at.fail("role", f"expected user, assistant or tool, got {show(role)}")
        for k in row:
            if k not in _KEYS:
                self.tally.note(k, EXTRA_KEY)
        if role == "user":
            msg: dict[str, Any] = {
                "role": "user",
                "content": need_str(row, "content", at, "", required=True),
            }
            if isinstance(row.get("name"), str):
                msg["name"] = row["name"]
            self.add(msg, at)
        elif role == "tool":
            self.tool(at, row)
        else:
            self.assistant(at, row)

    def tool(self, at: At, row: dict[str, Any]) -> None:
        """A ``tool`` row: a ``tool`` message a result; its delay added to the gap before the
        next answer."""
        results = _listed(row, "tool_results", at, self.tally)
        if not results:
            at.fail("tool_results", "missing (a tool row carries results)")
        for j, r in enumerate(results):
            if not isinstance(r, dict) or not isinstance(r.get("tool_call_id"), str):
                at.fail(
                    f"tool_results[{j}].tool_call_id",
                    "missing (a result answers a call by its id)",
                )
            content = _tool_content(r, self.tally)
            self.add({"role": "tool", "tool_call_id": r["tool_call_id"], "content": content}, at)
        delay = opt_num(row, "delay_seconds", at)
        if delay is not None:
            self.gap = (self.gap or 0.0) + max(delay, 0.0)

    def assistant(self, at: At, row: dict[str, Any]) -> None:
        """An ``assistant`` row: the answer, after the gap the tool rows before it recorded."""
        if self.messages and self.messages[-1]["role"] == "assistant":
            self.tally.note("role", "assistant after assistant (no client turn between)")
        answer = _answer(row, at, self.tally, len(self.messages))
        for c in answer.get("tool_calls", ()):
            if c["function"]["name"] not in self.names:
                self.names.append(c["function"]["name"])
        if self.gap is not None:
            self.gaps[len(self.messages)] = self.gap
        self.gap = None
        self.add(answer, at)


def _answer(row: dict[str, Any], at: At, tally: Tally, index: int) -> dict[str, Any]:
    """An ``assistant`` row as the answer message (``index``: its place in the conversation,
    for the ids of tool calls without one)."""
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
                fallback_id=f"call_{index}_{j}",
            )
            for j, c in enumerate(calls)
        ]
    if answer["content"] is None and "tool_calls" not in answer:
        tally.note("assistant", "neither content nor tool_calls (an empty answer)")
        answer["content"] = ""
    return answer


def _request(
    first: dict[str, Any],
    first_at: At | None,
    tools: list[dict[str, Any]] | None,
    tally: Tally,
) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """The request of each call, from the first ``user`` row's settings (every client turn
    carries them): ``history`` → the body sent."""
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

    return body


def _conversation(
    conv: str, rows_: list[tuple[At, dict[str, Any]]], tally: Tally, start_ns: int, session: str
) -> list[Exchange]:
    """One conversation's calls (see the module docstring)."""
    in_turns = _in_turns(conv, rows_, tally)
    first_at, first = next(((a, r) for a, r in in_turns if r.get("role") == "user"), (None, {}))
    m = _Messages(tally)
    system = need_str(first, "system", first_at, "") if first_at is not None else ""
    if system:
        m.add({"role": "system", "content": system}, first_at or in_turns[0][0])
    tools = clean_tools(first.get("tools"), first_at or in_turns[0][0], "tools", tally)
    for at, row in in_turns:
        m.row(at, row)
    if m.messages and m.messages[-1]["role"] != "assistant":
        tally.note("conversation", "ends on a client turn with no recorded answer (not sent)")
    if tools is None and m.names:
        tools = named_tools(m.names)
        tally.derived["tools"] = "not in the rows: the functions called, with empty schemas"
    body = _request(first, first_at, tools, tally)
    tally.derived.update(_DERIVED)
    return conversation(
        m.messages, body, session, Pacer(tally, start_ns), lambda i: m.places[i], m.gaps
    )


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
    n_rows = 0
    n_conv = 0
    used: dict[str, int] = {}
    read: list[Path] = []  # the files imported (a walked file of another kind is skipped)

    def sessions() -> Iterator[list[Exchange]]:
        nonlocal n_rows, n_conv
        for f in of_format(files, walked, looks_like_mlperf, "MLPerf agentic rows", tally):
            read.append(f)
            n, groups = _groups(f, tally)
            n_rows += n
            start = mtime_ns(f)
            for conv, group in groups.items():
                n_conv += 1
                yield _conversation(conv, group, tally, start, unique(conv, used))
        if not n_conv:
            raise TraceFormatError(f"{', '.join(map(str, paths))}: no MLPerf conversations found")

    done = import_sessions(out, tally, sessions(), lambda: (read, n_rows), "mlperf conversations")
    return f"{done} from {n_conv:,} MLPerf conversations ({n_rows:,} rows in {len(read):,} files)"
