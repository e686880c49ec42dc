"""What the importers of chat-message trajectories (OpenHands, MLPerf, ATIF) share: their files
and rows, the sessions' names and start times, tool schemas and tool calls as sent, and the
conversation as calls (each ``assistant`` message one call, its request every message before it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import TraceFormatError, WireError
from agentload.infile import MAX_DOCUMENT_BYTES, read_bytes
from agentload.interop.content_free import MISSING, NULL, At, show
from agentload.interop.exchanges import (
    Exchange,
    Pacer,
    Tally,
    chat_exchange,
    jsonl_files,
    jsonl_values,
)
from agentload.record.native import SESSION_HEADER

__all__ = [
    "answer_tokens",
    "clean_tools",
    "conversation",
    "first_row",
    "mtime_ns",
    "named_tools",
    "of_format",
    "rows",
    "source_files",
    "tool_call",
    "unique",
]


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
            for lineno, _, _, row in jsonl_values(f, tally):
                at = At(str(path), f"line {lineno}", tally.dev)
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


def of_format(
    files: list[Path],
    walked: set[Path],
    looks_like: Callable[[dict[str, Any]], bool],
    what: str,
    tally: Tally,
) -> Iterator[Path]:
    """Each of ``files`` to import: a walked file whose first row ``looks_like`` does not know is
    counted (``not WHAT, skipped``) and passed over (a file named is taken as it is)."""
    for f in files:
        if f in walked:
            head = first_row(f)
            if head is None or not looks_like(head):
                tally.note("file", f"not {what}, skipped")
                continue
        yield f


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
