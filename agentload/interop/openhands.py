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

The row reader, the schema helpers and the conversation's calls are ``chat_rows``'s (shared with
the MLPerf and ATIF importers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
from agentload.interop.content_free import EXTRA_KEY, MISSING, NULL, At, show
from agentload.interop.exchanges import Exchange, Pacer, Tally, import_sessions
from agentload.outfile import check_output

__all__ = ["import_openhands", "looks_like_openhands"]

FORMAT = "openhands"
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


# -- OpenHands rows ----------------------------------------------------------------------------


def _message(m: Any, i: int, at: At, tally: Tally) -> dict[str, Any]:
    """One message as sent: its keys in OpenAI's shape, the ``null`` ones left out."""
    if not isinstance(m, dict):
        at.fail("trajectory[]", f"expected a message (an object), got {show(m)}")
    role = m.get("role")
    if not isinstance(role, str) or role not in _ROLES:
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
    n_rows = 0
    used: dict[str, int] = {}
    read: list[Path] = []  # the files imported (a walked file of another kind is skipped)

    def sessions() -> Iterator[list[Exchange]]:
        nonlocal n_rows
        for f in of_format(files, walked, looks_like_openhands, "OpenHands trajectories", tally):
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

    done = import_sessions(out, tally, sessions(), lambda: (read, n_rows), "openhands trajectories")
    return f"{done} from {n_rows:,} OpenHands trajectories in {len(read):,} files"
