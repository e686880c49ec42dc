"""``agentload trace import claude-code``: Claude Code's own session logs → a full-content trace.

Claude Code writes each session to ``~/.claude/projects/<project>/<session>.jsonl`` (one JSON
object a line) and each sub-agent's transcript to ``<session>/subagents/agent-<id>.jsonl``
(with ``agent-<id>.meta.json``: the ``toolUseId`` of the ``Agent`` call that started it). A
directory is walked (``~/.claude/projects`` as a whole works); a session file brings its
sub-agents' files along. Each session becomes ``exchanges.Exchange``s, one per model call:

* **exact** (Claude Code 2.1.3xx and later log ``api-request`` records): the request as sent,
  rebuilt from ``api-request-shape`` (system, tools), the record's ``params`` (``betas`` are a
  header, not body), its messages (``keep`` messages of the ``base`` request, then the ``tail``
  blobs; a tail hash with no blob is the assistant answer to ``base``, which the log keeps as
  the ``assistant`` entries) and ``cacheControl`` marks; ``stream: true``. Not kept by the
  log: the per-request billing line Claude Code puts first in ``system`` and ``metadata``
  (device and account ids).
* **derived** (earlier versions): the conversation up to the call, from the ``parentUuid``
  chain of ``user`` and ``assistant`` entries (the entries of one answer, one per content block,
  merged; consecutive user entries merged into one message); no system prompt (the log does not
  keep it); ``tools`` named from the ``tool_use`` blocks of the agent's transcript with empty
  schemas; ``max_tokens`` 32,000; ``stream: true`` (``header.source.derived`` says so).

The answer is the ``assistant`` entries of the call merged (``message.usage`` as the API
reported it: cache reads and writes kept); its submit time is the ``api-request`` record's, or
the time of the entry before the answer; its end the last entry's. Lines that are not JSON
objects, entries without a ``message`` and chains that break are counted and skipped.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import TraceFormatError, WireError
from agentload.interop.content_free import At, Progress
from agentload.interop.exchanges import (
    Exchange,
    Tally,
    full_header,
    iso_ns,
    jsonl_files,
    read_lines,
    unreadable,
    write_sessions,
)
from agentload.outfile import check_output
from agentload.wire import reply_from_json

__all__ = ["import_claude_code", "looks_like_claude_code", "session_files"]

FORMAT = "claude-code"
SESSION_HEADER = "x-claude-code-session-id"
MAX_TOKENS = 32000
_DERIVED = {
    "system": "not in the log before api-request records: sent without",
    "tools": "the names the agent's transcript calls, with empty input schemas",
    "max_tokens": f"{MAX_TOKENS:,} (Claude Code's default)",
}


@dataclass
class _Call:
    """The entries of one answer (one per content block), in order."""

    file: int
    entries: list[dict[str, Any]]


@dataclass
class _Session:
    """Everything read of one session's files."""

    key: str
    files: list[Path]
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # uuid -> entry
    calls: list[_Call] = field(default_factory=list)
    shapes: dict[str, dict[str, Any]] = field(default_factory=dict)
    blobs: dict[str, Any] = field(default_factory=dict)
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    tools: dict[int, list[str]] = field(default_factory=dict)  # file -> tool names, first use
    spawned_by: dict[int, str] = field(default_factory=dict)  # file -> its Agent call's id
    first_ts: dict[int, int] = field(default_factory=dict)
    answer_of: dict[str, _Call] = field(default_factory=dict)  # assistant uuid -> its answer
    result_of: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool id -> user entry


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


def _read(files: list[Path], tally: Tally) -> _Session:
    s = _Session(str(files[0]), files)
    for fi, path in enumerate(files):
        meta = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
        if path.parent.name == "subagents" and meta.is_file():
            try:
                tool_use = orjson.loads(meta.read_bytes()).get("toolUseId")
                if isinstance(tool_use, str):
                    s.spawned_by[fi] = tool_use
            except (orjson.JSONDecodeError, OSError, AttributeError):
                tally.note("agent-*.meta.json", "unreadable")
        last: _Call | None = None
        names: list[str] = []
        for lineno, e in read_lines(path, tally):
            t = e.get("type")
            if t == "api-request-shape":
                if isinstance(e.get("shapeHash"), str) and isinstance(e.get("shape"), dict):
                    s.shapes[e["shapeHash"]] = e["shape"]
                continue
            if t == "api-request-blob":
                if isinstance(e.get("hash"), str):
                    s.blobs[e["hash"]] = e.get("message")
                continue
            if t == "api-request":
                if isinstance(e.get("id"), str):
                    s.requests[e["id"]] = e
                continue
            if t not in ("user", "assistant"):
                if isinstance(e.get("uuid"), str):  # a link of the chain (an attachment...)
                    s.entries[e["uuid"]] = {"type": t, "parentUuid": e.get("parentUuid")}
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
                for block in _blocks(msg.get("content")):
                    tid = block.get("tool_use_id")
                    if block.get("type") == "tool_result" and isinstance(tid, str):
                        s.result_of.setdefault(tid, e)
                continue
            if e.get("isApiErrorMessage") or msg.get("model") == "<synthetic>":
                last = None  # Claude Code's own note (an API error shown), not a model answer
                continue
            for block in _blocks(msg.get("content")):
                name = block.get("name") if block.get("type") == "tool_use" else None
                if isinstance(name, str) and name not in names:
                    names.append(name)
            mid = msg.get("id")
            if (
                last is not None
                and mid is not None
                and last.entries[-1]["message"].get("id") == mid
            ):
                last.entries.append(e)
            else:
                last = _Call(fi, [e])
                s.calls.append(last)
            s.answer_of[uuid] = last
        s.tools[fi] = names
    s.calls.sort(key=lambda c: c.entries[0]["_ns"])
    return s


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _chain(s: _Session, uuid: Any, tally: Tally) -> list[dict[str, Any]]:
    """The conversation entries up to ``uuid`` (user and assistant only), in order.

    The ``parentUuid`` links form a tree where an answer makes several tool calls (each block
    and each result hangs off the one before it or off its own call), so each answer met on
    the way up stands for all of its entries, followed by the results of its tool calls that
    came before ``uuid``'s time."""
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while isinstance(uuid, str) and uuid not in seen:
        seen.add(uuid)
        e = s.entries.get(uuid)
        if e is None:
            tally.note("parentUuid", "names no entry (the conversation before it is missing)")
            break
        if "message" in e:
            path.append(e)
        uuid = e.get("parentUuid")
    path.reverse()
    until = path[-1]["_ns"] if path else 0
    out: list[dict[str, Any]] = []
    done: set[int] = set()  # id() of entries emitted
    for e in path:
        if id(e) in done:
            continue
        call = s.answer_of.get(e.get("uuid", "")) if e.get("type") == "assistant" else None
        if call is None:
            out.append(e)
            done.add(id(e))
            continue
        for a in call.entries:
            if id(a) not in done:
                out.append(a)
                done.add(id(a))
        for a in call.entries:
            for block in _blocks(a["message"].get("content")):
                r = (
                    s.result_of.get(block.get("id", ""))
                    if block.get("type") == "tool_use"
                    else None
                )
                if r is not None and id(r) not in done and r["_ns"] <= until:
                    out.append(r)
                    done.add(id(r))
    return out


def _messages(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries → Messages API messages: an answer's entries and consecutive user entries
    merged."""
    out: list[dict[str, Any]] = []
    last_id: Any = None
    for e in entries:
        msg = e["message"]
        role = "assistant" if e.get("type") == "assistant" else "user"
        if e.get("isApiErrorMessage") or msg.get("model") == "<synthetic>":
            continue
        content = msg.get("content")
        if out and out[-1]["role"] == role and (role == "user" or msg.get("id") == last_id):
            prev = out[-1]
            prev["content"] = _blocks(prev["content"]) + _blocks(content)
        else:
            out.append(
                {"role": role, "content": content if isinstance(content, str) else _blocks(content)}
            )
        last_id = msg.get("id") if role == "assistant" else None
    return out


def _answer(call: _Call) -> dict[str, Any]:
    """The call's answer as the Messages API gave it: its entries' content merged."""
    first = call.entries[0]["message"]
    last = call.entries[-1]["message"]
    content: list[dict[str, Any]] = []
    for e in call.entries:
        content += _blocks(e["message"].get("content"))
    return {
        "id": first.get("id"),
        "type": "message",
        "role": "assistant",
        "model": first.get("model"),
        "content": content,
        "stop_reason": last.get("stop_reason"),
        "stop_sequence": last.get("stop_sequence"),
        "usage": last.get("usage") or first.get("usage"),
    }


class _Rebuilder:
    """The exact request bodies of a session with ``api-request`` records."""

    def __init__(self, s: _Session, answers: dict[str, dict[str, Any]]) -> None:
        self.s = s
        self.answers = answers  # request id -> its answer message (API form)
        self.memo: dict[str, list[Any]] = {}

    def messages(self, rid: str) -> list[Any] | None:
        todo: list[str] = []
        r: str | None = rid
        while r is not None and r not in self.memo:
            todo.append(r)
            req = self.s.requests.get(r)
            if req is None:
                return None
            base = req.get("base")
            r = base if isinstance(base, str) else None
            if len(todo) > 100_000:
                return None
        for r in reversed(todo):
            req = self.s.requests[r]
            base = req.get("base")
            prev = self.memo.get(base, []) if isinstance(base, str) else []
            keep = req.get("keep")
            tail = req.get("tail")
            if not isinstance(keep, int) or not isinstance(tail, list) or keep > len(prev):
                return None
            msgs = prev[:keep]
            for h in tail:
                if isinstance(h, str) and h in self.s.blobs:
                    msgs.append(self.s.blobs[h])
                elif isinstance(base, str) and base in self.answers:
                    a = self.answers[base]
                    msgs.append({"role": "assistant", "content": a["content"]})
                else:
                    return None
            self.memo[r] = msgs
        return self.memo[rid]

    def body(self, rid: str) -> dict[str, Any] | None:
        req = self.s.requests.get(rid)
        if req is None:
            return None
        msgs = self.messages(rid)
        key = req.get("shapeHash")
        shape = self.s.shapes.get(key) if isinstance(key, str) else None
        params = req.get("params")
        if msgs is None or shape is None or not isinstance(params, dict):
            return None
        body: dict[str, Any] = {"model": params.get("model"), "messages": list(msgs)}
        body.update(shape)
        body.update({k: v for k, v in params.items() if k not in ("betas", "model")})
        body["stream"] = True
        for mark in req.get("cacheControl") or ():
            if not (isinstance(mark, dict) and _set_at(body, mark.get("path"), mark.get("value"))):
                return None
        return body


def _set_at(body: dict[str, Any], path: Any, value: Any) -> bool:
    """``cache_control: value`` on the block at ``path``, copying what leads there."""
    if not isinstance(path, list) or not path:
        return False
    node: Any = body
    for i, key in enumerate(path):
        try:
            child = node[key]
        except (KeyError, IndexError, TypeError):
            return False
        if isinstance(child, str) and i == len(path) - 1:
            return False
        child = (
            dict(child)
            if isinstance(child, dict)
            else list(child)
            if isinstance(child, list)
            else child
        )
        node[key] = child
        node = child
    if not isinstance(node, dict):
        return False
    node["cache_control"] = value
    return True


def _exchanges(s: _Session, tally: Tally) -> list[Exchange]:
    answers: dict[str, dict[str, Any]] = {}
    for c in s.calls:
        ref = c.entries[-1].get("requestRef")
        if isinstance(ref, str):
            answers[ref] = _answer(c)
    rebuild = _Rebuilder(s, answers)
    out: list[Exchange] = []
    first_of: set[int] = set()
    for c in s.calls:
        first, last = c.entries[0], c.entries[-1]
        answer = _answer(c)
        ref = last.get("requestRef")
        body = rebuild.body(ref) if isinstance(ref, str) else None
        if body is not None and isinstance(ref, str):
            submit = iso_ns(s.requests[ref].get("timestamp"), At(s.key, f"api-request {ref}"))
            tally.derived.setdefault("stream", "true (Claude Code streams every call)")
        else:
            if isinstance(ref, str) and s.requests:
                tally.note("api-request", "does not rebuild (the conversation is used)")
            chain = _chain(s, first.get("parentUuid"), tally)
            body = {
                "model": first["message"].get("model"),
                "max_tokens": MAX_TOKENS,
                "messages": _messages(chain),
                "stream": True,
            }
            names = s.tools.get(c.file) or []
            if names:
                body["tools"] = [
                    {"name": n, "description": "", "input_schema": {"type": "object"}}
                    for n in names
                ]
            tally.derived.update(_DERIVED)
            submit = chain[-1]["_ns"] if chain else first["_ns"] - 1_000_000
        try:
            reply = reply_from_json("messages", answer)
        except WireError:
            tally.note("assistant.message", "not a Messages API answer, skipped")
            continue
        session = first.get("sessionId") or last.get("sessionId") or Path(s.key).name
        emits = tuple(
            b["id"]
            for b in answer["content"]
            if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
        )
        after = None
        if c.file not in first_of:
            first_of.add(c.file)
            after = s.spawned_by.get(c.file)
        out.append(
            Exchange(
                api="messages",
                body=body,
                reply=reply,
                submit_ns=min(submit, last["_ns"]),
                end_ns=last["_ns"],
                headers={SESSION_HEADER: str(session)},
                emits=emits,
                after=after,
            )
        )
    return out


def import_claude_code(paths: list[Path], out: Path, *, force: bool = False) -> str:
    """Import Claude Code session logs (files or directories) into the trace ``out``."""
    tally = Tally(FORMAT)
    groups = session_files(paths, tally)
    if not groups:
        raise TraceFormatError(
            f"{', '.join(map(str, paths))}: no Claude Code session logs (*.jsonl) found"
        )
    files = [f for g in groups for f in g]
    check_output(out, files, force=force)
    progress = Progress("claude-code sessions", total=len(groups))

    def sessions() -> Iterator[list[Exchange]]:
        for g in groups:
            xs: list[Exchange] = []
            with unreadable(tally, "session"):
                xs = _exchanges(_read(g, tally), tally)
            yield xs

    n_sessions, calls = write_sessions(
        out, lambda t0: full_header(FORMAT, files, len(files), tally, t0), sessions(), progress
    )
    warning = tally.dev.warning()
    if warning:
        print(warning, file=sys.stderr)
    return (
        f"wrote {out}: {n_sessions:,} sessions, {calls:,} calls from {len(files):,} Claude Code "
        f"log files ({len(groups):,} sessions)"
    )
