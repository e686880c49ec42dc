"""Claude Code's session logs read: which files make a session, and each session's entries.

A session is its log (``<session>.jsonl``) and its sub-agents' transcripts
(``<session>/subagents/agent-<id>.jsonl``, each started by the ``Agent`` call its
``agent-<id>.meta.json`` names). Reading them keeps every conversation entry by ``uuid`` (and the
other entries as links of the ``parentUuid`` chain), each answer's entries (one per content block)
as one ``Call``, the ``api-request`` records with their shapes and blobs, and the functions each
file's agent calls. ``claude_code`` makes the calls of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentload.interop.content_free import At
from agentload.interop.exchanges import Tally, iso_ns, jsonl_files, read_lines

__all__ = ["Call", "Session", "blocks", "looks_like_claude_code", "read_session", "session_files"]


@dataclass
class Call:
    """The entries of one answer (one per content block), in order."""

    file: int
    entries: list[dict[str, Any]]


@dataclass
class Session:
    """Everything read of one session's files."""

    key: str
    files: list[Path]
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # uuid -> entry
    calls: list[Call] = field(default_factory=list)
    shapes: dict[str, dict[str, Any]] = field(default_factory=dict)
    blobs: dict[str, Any] = field(default_factory=dict)
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    tools: dict[int, list[str]] = field(default_factory=dict)  # file -> tool names, first use
    spawned_by: dict[int, str] = field(default_factory=dict)  # file -> its Agent call's id
    first_ts: dict[int, int] = field(default_factory=dict)
    answer_of: dict[str, Call] = field(default_factory=dict)  # assistant uuid -> its answer
    result_of: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool id -> user entry

    def add_record(self, e: dict[str, Any], t: Any) -> None:
        """An entry that is not a conversation message: an ``api-request`` record, its shape or
        blob, or another link of the ``parentUuid`` chain (an attachment...)."""
        if t == "api-request-shape":
            if isinstance(e.get("shapeHash"), str) and isinstance(e.get("shape"), dict):
                self.shapes[e["shapeHash"]] = e["shape"]
        elif t == "api-request-blob":
            if isinstance(e.get("hash"), str):
                self.blobs[e["hash"]] = e.get("message")
        elif t == "api-request":
            if isinstance(e.get("id"), str):
                self.requests[e["id"]] = e
        elif isinstance(e.get("uuid"), str):
            self.entries[e["uuid"]] = {"type": t, "parentUuid": e.get("parentUuid")}

    def add_results(self, e: dict[str, Any], msg: dict[str, Any]) -> None:
        """A user entry: the entry that answers each tool call (the first one that does)."""
        for block in blocks(msg.get("content")):
            tid = block.get("tool_use_id")
            if block.get("type") == "tool_result" and isinstance(tid, str):
                self.result_of.setdefault(tid, e)

    def add_answer(
        self, fi: int, e: dict[str, Any], last: Call | None, names: list[str]
    ) -> Call | None:
        """An assistant entry of file ``fi``: one more block of the answer ``last`` when it has
        the same message id, else a new answer (its functions added to ``names``); returns the
        answer being read (None after Claude Code's own note, which is no model answer)."""
        msg = e["message"]
        if e.get("isApiErrorMessage") or msg.get("model") == "<synthetic>":
            return None  # Claude Code's own note (an API error shown), not a model answer
        for block in blocks(msg.get("content")):
            name = block.get("name") if block.get("type") == "tool_use" else None
            if isinstance(name, str) and name not in names:
                names.append(name)
        mid = msg.get("id")
        if last is not None and mid is not None and last.entries[-1]["message"].get("id") == mid:
            last.entries.append(e)
        else:
            last = Call(fi, [e])
            self.calls.append(last)
        self.answer_of[e["uuid"]] = last
        return last


def looks_like_claude_code(first: dict[str, Any]) -> bool:
    """Whether a JSONL file's first object is a Claude Code session log entry (a conversation
    entry or record naming its ``sessionId``, or the ``summary`` / ``file-history-snapshot``
    lines older logs open with)."""
    if "payload" in first:
        return False
    t = first.get("type")
    return (
        ("sessionId" in first and ("parentUuid" in first or isinstance(t, str)))
        or (t == "summary" and "leafUuid" in first)
        or (t == "file-history-snapshot" and "snapshot" in first)
    )


def session_files(paths: list[Path], tally: Tally) -> list[list[Path]]:
    """The session logs under ``paths``, each with its sub-agents' files after it (a file whose
    first line is not a Claude Code entry is counted and skipped)."""
    groups: dict[str, list[Path]] = {}
    for f in jsonl_files(paths, "*.jsonl"):
        if not any(looks_like_claude_code(o) for _, o in read_lines(f, tally, limit=1)):
            tally.note("file", "not a Claude Code log, skipped")
            continue
        if f.parent.name == "subagents":
            key = str(f.parent.parent)
            groups.setdefault(key, [])
            if f not in groups[key]:
                groups[key].append(f)
            continue
        key = str(f.with_suffix(""))
        group = groups.setdefault(key, [])
        if f not in group:
            group.insert(0, f)
        sub = f.with_suffix("") / "subagents"
        if sub.is_dir():
            for s in sorted(sub.glob("agent-*.jsonl")):
                if s not in group:
                    group.append(s)
    return [g for g in groups.values() if g]


def read_session(files: list[Path], tally: Tally) -> Session:
    """Everything of one session's files (its log, then its sub-agents'), its answers in time
    order."""
    s = Session(str(files[0]), files)
    for fi, path in enumerate(files):
        _spawned_by(s, fi, path, tally)
        _read_file(s, fi, path, tally)
    s.calls.sort(key=lambda c: c.entries[0]["_ns"])
    return s


def _spawned_by(s: Session, fi: int, path: Path, tally: Tally) -> None:
    """The ``Agent`` call that started sub-agent file ``fi`` (its ``.meta.json``'s
    ``toolUseId``), if it says."""
    meta = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
    if path.parent.name == "subagents" and meta.is_file():
        try:
            tool_use = orjson.loads(meta.read_bytes()).get("toolUseId")
            if isinstance(tool_use, str):
                s.spawned_by[fi] = tool_use
        except (orjson.JSONDecodeError, OSError, AttributeError):
            tally.note("agent-*.meta.json", "unreadable")


def _read_file(s: Session, fi: int, path: Path, tally: Tally) -> None:
    """The entries and records of file ``fi`` (an entry without a message or uuid counted and
    skipped), and the functions its agent calls."""
    last: Call | None = None
    names: list[str] = []
    for lineno, e in read_lines(path, tally):
        t = e.get("type")
        if t not in ("user", "assistant"):
            s.add_record(e, t)
            continue
        msg = e.get("message")
        uuid = e.get("uuid")
        if not isinstance(msg, dict) or not isinstance(uuid, str):
            tally.note(str(t), "no message or uuid, skipped")
            continue
        at = At(str(path), f"line {lineno}")
        e["_ns"] = iso_ns(e.get("timestamp"), at)
        s.first_ts.setdefault(fi, e["_ns"])
        s.entries[uuid] = e
        if t == "user":
            last = None
            s.add_results(e, msg)
        else:
            last = s.add_answer(fi, e, last, names)
    s.tools[fi] = names


def blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []
