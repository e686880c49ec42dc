"""``agentload trace import openhands``: OpenHands trajectories (SWE-rebench, SWE-Gym rows) → a
full-content trace.

The datasets OpenHands runs are published as (``nebius/SWE-rebench-openhands-trajectories``,
``SWE-Gym/OpenHands-Sampled-Trajectories``) hold one trajectory a row: JSON lines, or a JSON
array of rows (a single row object is read as one). A directory is walked for ``*.jsonl`` and
``*.json``; a walked file whose first row is not a trajectory is skipped and counted.

| row | trace |
|---|---|
| the row | one session (``x-agentload-session``: ``trajectory_id``, else ``instance_id``, else
  ``FILE:LINE``; a repeat gets ``#2``...) of one agent |
| ``trajectory`` (SWE-Gym: ``messages``): OpenAI chat messages in order | the conversation;
  each ``assistant`` message is one model call, whose request is every message before it
  (``role``, ``content``, ``name``, ``tool_call_id``, ``tool_calls``; the keys the Parquet
  struct fills with ``null`` are left out: the schema allows them) and whose answer it is |
| ``tool_calls[]`` (``id``, ``function.name``, ``function.arguments``: a JSON string) | the
  answer's tool calls; the ``tool`` message that answers one closes it (a ``tool_call`` record) |
| ``tools`` | the request's tools, with every ``null`` entry dropped: the rows carry the union of
  all tools' parameters, ``null`` where a tool lacks one (``"file_text": null``,
  ``"additionalProperties": null``, ``"enum": null``), which a server that checks schemas
  refuses (each dropped entry counted) |
| ``instance_id``, ``repo``, ``model_patch``, ``exit_status``, ``resolved``, ``gen_tests_*`` |
  not read (the task, not the traffic) |

What the rows lack is derived and named in ``header.source.derived``: the model (``unknown``:
only the dataset card names it), the times (``exchanges.Pacer`` from the file's modification
time: every row of a file starts there; each call's output length for its duration is its
answer's characters / 4), the usage (none: the trace's own token counts stand) and ``stream:
true``. Without ``tools`` in a row, the functions its assistant calls are named with empty
schemas.

The row reader and the schema helpers here are shared with the MLPerf and ATIF importers.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import TraceFormatError, WireError
from agentload.infile import MAX_DOCUMENT_BYTES, read_bytes
from agentload.interop.content_free import EXTRA_KEY, MISSING, NULL, At, Progress, show
from agentload.interop.exchanges import (
    MAX_LINE,
    Exchange,
    Pacer,
    Tally,
    chat_exchange,
    full_header,
    jsonl_files,
    write_sessions,
)
from agentload.outfile import check_output

__all__ = [
    "SESSION_HEADER",
    "answer_tokens",
    "clean_tools",
    "conversation",
    "first_row",
    "import_openhands",
    "looks_like_openhands",
    "mtime_ns",
    "named_tools",
    "rows",
    "source_files",
    "tool_call",
    "unique",
]

FORMAT = "openhands"
SESSION_HEADER = "x-agentload-session"
"""The header that names an imported session (``agentload record``'s default session header)."""
_ROW_KEYS = frozenset(
    {
        "trajectory_id",
        "instance_id",
        "repo",
        "trajectory",
        "tools",
        "model_patch",
        "exit_status",
        "resolved",
        "gen_tests_correct",
        "pred_passes_gen_tests",
    }
)
_MESSAGE_KEYS = frozenset(
    {"content", "name", "role", "tool_call_id", "tool_calls", "function_call"}
)
_NAMES = ("trajectory_id", "instance_id")
"""Row keys that name the session, in order."""
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_DERIVED = {
    "model": "not in the rows (the dataset card names it): unknown",
    "usage": "not in the rows: none (the trace's own token counts stand)",
    "stream": "true",
    "output_tokens": "for the derived times: the answer's characters / 4",
    "start": "the file's modification time (every row of a file starts there)",
}


def looks_like_openhands(first: dict[str, Any]) -> bool:
    """Whether a file's first row is an OpenHands trajectory row (a ``trajectory`` list, or an
    ``instance_id`` beside a ``messages`` list)."""
    return isinstance(first.get("trajectory"), list) or (
        "instance_id" in first and isinstance(first.get("messages"), list)
    )


# -- shared by the full-content dataset importers (openhands, mlperf, atif) ------------------


def source_files(paths: list[Path], suffixes: tuple[str, ...]) -> tuple[list[Path], set[Path]]:
    """The files under ``paths`` whose name ends with one of ``suffixes`` (a named file is
    taken whatever its name), and which of them were walked (not named)."""
    files: list[Path] = []
    walked: set[Path] = set()
    for p in paths:
        for f in jsonl_files([p], "*"):
            if p.is_dir():
                if not f.name.endswith(suffixes):
                    continue
                walked.add(f)
            if f not in files:
                files.append(f)
    return files, walked


def rows(path: Path, tally: Tally) -> Generator[tuple[At, dict[str, Any]], None, None]:
    """The rows of a dataset file with their place: a ``.json`` file is one JSON document (an
    array of rows, or one row), any other a row a line. A line that is not JSON (cut short)
    is counted and skipped; a row that is not a JSON object is an error."""
    if path.name.endswith(".json"):
        data = read_bytes(path, limit=MAX_DOCUMENT_BYTES, label=str(path), error=TraceFormatError)
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise TraceFormatError(f"{path}: not JSON ({exc})") from None
        if isinstance(doc, dict):
            yield At(str(path), "", tally.dev), doc
            return
        if not isinstance(doc, list):
            At(str(path), "").fail(
                "document", f"expected rows (a list or an object), got {show(doc)}"
            )
        for i, row in enumerate(doc):
            at = At(str(path), f"[{i}]", tally.dev)
            if not isinstance(row, dict):
                at.fail("row", f"expected a JSON object, got {show(row)}")
            yield at, row
        return
    try:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                at = At(str(path), f"line {lineno}", tally.dev)
                if len(raw) > MAX_LINE:
                    tally.note("line", "over 64 MiB, skipped")
                    continue
                try:
                    row = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    tally.note("line", "not JSON, skipped")
                    continue
                if not isinstance(row, dict):
                    at.fail("row", f"expected a JSON object, got {show(row)}")
                yield at, row
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc}") from None


def first_row(path: Path) -> dict[str, Any] | None:
    """A dataset file's first row, or None when it has none or its first row is not an
    object (to tell whether a walked file is of the format; nothing counted)."""
    peek = rows(path, Tally("peek"))
    try:
        return next(peek, (None, None))[1]
    except TraceFormatError:
        return None
    finally:
        peek.close()


def mtime_ns(path: Path) -> int:
    """The file's modification time (ns): where the derived times of its sessions start."""
    try:
        return path.stat().st_mtime_ns
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc}") from None


def unique(name: str, used: dict[str, int]) -> str:
    """``name``, or ``name#K`` when the import already has a session by that name."""
    k = used.get(name, 0) + 1
    used[name] = k
    return name if k == 1 else f"{name}#{k}"


def _drop_nulls(value: Any, where: str, tally: Tally) -> Any:
    """``value`` without the ``null`` entries of its objects, at any depth (each counted at
    ``where``)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None:
                tally.note(where, "null entries dropped")
                continue
            out[k] = _drop_nulls(v, where, tally)
        return out
    if isinstance(value, list):
        return [_drop_nulls(v, where, tally) for v in value]
    return value


def clean_tools(tools: Any, at: At, fld: str, tally: Tally) -> list[dict[str, Any]] | None:
    """The tool schemas ``tools`` as sent (OpenAI ``{"type": "function", "function": {...}}``;
    a flat ``{"type": "function", "name", "parameters"}`` is wrapped), every ``null`` entry
    dropped (counted at ``FLD[].function.parameters``, or ``FLD[]``); None when absent."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        at.fail(fld, f"expected a list of tool schemas, got {show(tools)}")
    out: list[dict[str, Any]] = []
    for i, t in enumerate(tools):
        if not isinstance(t, dict):
            at.fail(f"{fld}[{i}]", f"expected a tool schema (an object), got {show(t)}")
        fn = t.get("function")
        if not isinstance(fn, dict):
            if not isinstance(t.get("name"), str):
                at.fail(f"{fld}[{i}].function", "missing (a tool schema with a name)")
            tally.note(f"{fld}[]", "flat tool schema, wrapped in function")
            fn = {k: v for k, v in t.items() if k != "type"}
            t = {"type": "function", "function": fn}
        if not isinstance(fn.get("name"), str):
            at.fail(f"{fld}[{i}].function.name", f"expected a string, got {show(fn.get('name'))}")
        tool: dict[str, Any] = {}
        for k, v in t.items():
            if v is None:
                tally.note(f"{fld}[]", "null entries dropped")
            elif k == "function":
                f2: dict[str, Any] = {}
                for fk, fv in fn.items():
                    if fv is None:
                        tally.note(f"{fld}[].function", "null entries dropped")
                    elif fk == "parameters":
                        f2[fk] = _drop_nulls(fv, f"{fld}[].function.parameters", tally)
                    else:
                        f2[fk] = fv
                tool[k] = f2
            else:
                tool[k] = v
        tool.setdefault("type", "function")
        out.append(tool)
    return out


def named_tools(names: list[str]) -> list[dict[str, Any]]:
    """Tool schemas for the functions named, with empty parameter schemas (what the source
    does not keep)."""
    return [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for n in names
    ]


def tool_call(
    tc: Any,
    at: At,
    fld: str,
    tally: Tally,
    *,
    scope: str = "",
    objects_ok: bool = False,
    fallback_id: str = "",
) -> dict[str, Any]:
    """One OpenAI tool call (``{"id", "type": "function", "function": {"name", "arguments"}}``,
    ``arguments`` a JSON string); arguments given as an object are encoded (a deviation unless
    ``objects_ok``); a missing id becomes ``fallback_id``. Deviations are counted at
    ``scope`` + ``fld`` without its indices."""
    dev = scope + _schema(fld)
    if not isinstance(tc, dict):
        at.fail(fld, f"expected a tool call (an object), got {show(tc)}")
    fn = tc.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        at.fail(f"{fld}.function.name", "missing (a tool call names its function)")
    args = fn.get("arguments")
    if args is None:
        tally.note(f"{dev}.function.arguments", NULL if "arguments" in fn else MISSING)
        args = "{}"
    elif not isinstance(args, str):
        if not objects_ok:
            tally.note(f"{dev}.function.arguments", "object, not a JSON string")
        args = json.dumps(args, ensure_ascii=False)
    cid = tc.get("id")
    if not isinstance(cid, str) or not cid:
        tally.note(f"{dev}.id", MISSING if cid is None else "not a string")
        cid = fallback_id
    return {"id": cid, "type": "function", "function": {"name": fn["name"], "arguments": args}}


def _schema(fld: str) -> str:
    """A field path as deviations count it (indices dropped)."""
    out, depth = [], 0
    for ch in fld:
        if ch == "[":
            depth += 1
            out.append("[]")
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def answer_tokens(answer: dict[str, Any]) -> int:
    """An answer's output tokens, estimated from its characters (content, reasoning, tool
    calls) at 4 a token: for the derived times of a source without token counts."""
    n = 0
    for k in ("content", "reasoning_content"):
        v = answer.get(k)
        if isinstance(v, str):
            n += len(v)
    for tc in answer.get("tool_calls") or ():
        fn = tc.get("function") or {}
        n += len(str(fn.get("name", ""))) + len(str(fn.get("arguments", "")))
    return n // 4


def conversation(
    messages: list[dict[str, Any]],
    body: Callable[[list[dict[str, Any]]], dict[str, Any]],
    session: str,
    pacer: Pacer,
    at: Callable[[int], At],
    gaps: dict[int, float] | None = None,
) -> list[Exchange]:
    """One call per ``assistant`` message of ``messages``: the request ``body(history)`` with
    every message before it, the message its answer, timed by ``pacer`` (``gaps``: the source's
    time before the call of message ``i``)."""
    out: list[Exchange] = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        if i == 0:
            at(i).fail("role", "an assistant turn with no message before it (nothing was asked)")
        times = pacer.call(answer_tokens(m), (gaps or {}).get(i))
        try:
            out.append(
                chat_exchange(body(messages[:i]), m, times, headers={SESSION_HEADER: session})
            )
        except WireError as exc:
            at(i).fail("assistant", str(exc))
    return out


# -- OpenHands rows ----------------------------------------------------------------------------


def _message(m: Any, i: int, at: At, tally: Tally) -> dict[str, Any]:
    """One message as sent: its keys in OpenAI's shape, the ``null`` ones left out."""
    if not isinstance(m, dict):
        at.fail("trajectory[]", f"expected a message (an object), got {show(m)}")
    role = m.get("role")
    if role not in _ROLES:
        at.fail("role", f"expected system, user, assistant or tool, got {show(role)}")
    out: dict[str, Any] = {"role": role}
    content = m.get("content")
    if content is None and role != "assistant":
        tally.note("trajectory[].content", NULL if "content" in m else MISSING)
        content = ""
    if content is not None and not isinstance(content, str | list):
        at.fail("content", f"expected a string or a list of parts, got {show(content)}")
    if role == "assistant" and isinstance(content, list):  # an answer's text is one string
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    out["content"] = content
    if isinstance(m.get("name"), str):
        out["name"] = m["name"]
    if role == "tool":
        tid = m.get("tool_call_id")
        if not isinstance(tid, str) or not tid:
            at.fail("tool_call_id", "missing (a tool message answers a call by its id)")
        out["tool_call_id"] = tid
    calls = m.get("tool_calls")
    if calls is not None and role == "assistant":
        if not isinstance(calls, list):
            at.fail("tool_calls", f"expected a list, got {show(calls)}")
        if calls:
            out["tool_calls"] = [
                tool_call(
                    tc,
                    at,
                    f"tool_calls[{j}]",
                    tally,
                    scope="trajectory[].",
                    fallback_id=f"call_{i}_{j}",
                )
                for j, tc in enumerate(calls)
            ]
    for k in m:
        if k not in _MESSAGE_KEYS:
            tally.note(f"trajectory[].{k}", EXTRA_KEY)
    return out


def _row_session(
    row: dict[str, Any], at: At, tally: Tally, start_ns: int, session: str
) -> list[Exchange]:
    msgs = row.get("trajectory")
    fld = "trajectory"
    if msgs is None and isinstance(row.get("messages"), list):
        msgs, fld = row["messages"], "messages"
    if not isinstance(msgs, list) or not msgs:
        at.fail(fld, "no messages (a trajectory is a list of chat messages)")
    for k in row:
        if k not in _ROW_KEYS and k != fld:
            tally.note(k, EXTRA_KEY)
    place = _places(at, fld)
    messages = [_message(m, i, place(i), tally) for i, m in enumerate(msgs)]
    if not any(m["role"] == "assistant" for m in messages):
        at.fail(fld, "no assistant message (no model call)")
    tools = clean_tools(row.get("tools"), at, "tools", tally)
    if tools is None:
        names: list[str] = []
        for m in messages:
            for tc in m.get("tool_calls") or ():
                if tc["function"]["name"] not in names:
                    names.append(tc["function"]["name"])
        if names:
            tools = named_tools(names)
            tally.derived["tools"] = "not in the row: the functions called, with empty schemas"
    model = "unknown"

    def body(history: list[dict[str, Any]]) -> dict[str, Any]:
        b: dict[str, Any] = {"model": model, "messages": history}
        if tools:
            b["tools"] = tools
        b["stream"] = True
        return b

    pacer = Pacer(tally, start_ns)
    tally.derived.update(_DERIVED)
    return conversation(messages, body, session, pacer, place)


def _places(at: At, fld: str) -> Callable[[int], At]:
    """The place of message ``i`` of a row (``FILE:line 3 trajectory[5]``)."""
    return lambda i: At(at.file, f"{at.record} {fld}[{i}]".strip())


def import_openhands(paths: list[Path], out: Path, *, force: bool = False) -> str:
    """Import OpenHands trajectory rows (files or directories) into the trace ``out``."""
    tally = Tally(FORMAT)
    files, walked = source_files(paths, (".jsonl", ".json"))
    if not files:
        raise TraceFormatError(
            f"{', '.join(map(str, paths))}: no OpenHands trajectories (*.jsonl, *.json) found"
        )
    check_output(out, files, force=force)
    progress = Progress("openhands trajectories")
    n_rows = 0
    used: dict[str, int] = {}
    read: list[Path] = []  # the files imported (a walked file of another kind is skipped)

    def sessions() -> Iterator[list[Exchange]]:
        nonlocal n_rows
        for f in files:
            if f in walked:
                head = first_row(f)
                if head is None or not looks_like_openhands(head):
                    tally.note("file", "not OpenHands trajectories, skipped")
                    continue
            read.append(f)
            start = mtime_ns(f)
            for at, row in rows(f, tally):
                n_rows += 1
                name = next(
                    (row[key] for key in _NAMES if isinstance(row.get(key), str) and row[key]),
                    f"{f.name}:{at.record}",
                )
                yield _row_session(row, at, tally, start, unique(name, used))
        if not n_rows:
            raise TraceFormatError(
                f"{', '.join(map(str, paths))}: no OpenHands trajectory rows found"
            )

    n_sessions, calls = write_sessions(
        out, lambda t0: full_header(FORMAT, read, n_rows, tally, t0), sessions(), progress
    )
    warning = tally.dev.warning()
    if warning:
        print(warning, file=sys.stderr)
    return (
        f"wrote {out}: {n_sessions:,} sessions, {calls:,} calls from {n_rows:,} OpenHands "
        f"trajectories in {len(read):,} files"
    )
