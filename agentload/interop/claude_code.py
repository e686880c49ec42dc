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

The files are found and read by ``claude_code_log``; this module makes the calls of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentload.errors import TraceFormatError, WireError
from agentload.interop.claude_code_log import (
    Call,
    Session,
    blocks,
    looks_like_claude_code,
    read_session,
    session_files,
)
from agentload.interop.content_free import At
from agentload.interop.exchanges import (
    Exchange,
    Tally,
    import_sessions,
    iso_ns,
    unreadable,
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


def _chain(s: Session, uuid: Any, tally: Tally) -> list[dict[str, Any]]:
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
            for block in blocks(a["message"].get("content")):
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
            prev["content"] = blocks(prev["content"]) + blocks(content)
        else:
            out.append(
                {"role": role, "content": content if isinstance(content, str) else blocks(content)}
            )
        last_id = msg.get("id") if role == "assistant" else None
    return out


def _answer(call: Call) -> dict[str, Any]:
    """The call's answer as the Messages API gave it: its entries' content merged."""
    first = call.entries[0]["message"]
    last = call.entries[-1]["message"]
    content: list[dict[str, Any]] = []
    for e in call.entries:
        content += blocks(e["message"].get("content"))
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

    def __init__(self, s: Session, answers: dict[str, dict[str, Any]]) -> None:
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


def _request(s: Session, c: Call, rebuild: _Rebuilder, tally: Tally) -> tuple[dict[str, Any], int]:
    """The request of call ``c`` and its submit time: exact where its ``api-request`` record
    rebuilds, else derived from the conversation."""
    ref = c.entries[-1].get("requestRef")
    body = rebuild.body(ref) if isinstance(ref, str) else None
    if body is not None and isinstance(ref, str):
        submit = iso_ns(s.requests[ref].get("timestamp"), At(s.key, f"api-request {ref}"))
        tally.derived.setdefault("stream", "true (Claude Code streams every call)")
        return body, submit
    if isinstance(ref, str) and s.requests:
        tally.note("api-request", "does not rebuild (the conversation is used)")
    return _derived_request(s, c, tally)


def _derived_request(s: Session, c: Call, tally: Tally) -> tuple[dict[str, Any], int]:
    """Call ``c``'s request as the conversation before it shows it (earlier Claude Code: see
    the module docstring), and its submit time: the entry before the answer's."""
    first = c.entries[0]
    chain = _chain(s, first.get("parentUuid"), tally)
    body: dict[str, Any] = {
        "model": first["message"].get("model"),
        "max_tokens": MAX_TOKENS,
        "messages": _messages(chain),
        "stream": True,
    }
    names = s.tools.get(c.file) or []
    if names:
        body["tools"] = [
            {"name": n, "description": "", "input_schema": {"type": "object"}} for n in names
        ]
    tally.derived.update(_DERIVED)
    return body, chain[-1]["_ns"] if chain else first["_ns"] - 1_000_000


def _exchange(s: Session, c: Call, rebuild: _Rebuilder, tally: Tally) -> Exchange | None:
    """Call ``c`` as the proxy would have seen it; None (counted) when its answer is not one."""
    first, last = c.entries[0], c.entries[-1]
    answer = _answer(c)
    body, submit = _request(s, c, rebuild, tally)
    try:
        reply = reply_from_json("messages", answer)
    except WireError:
        tally.note("assistant.message", "not a Messages API answer, skipped")
        return None
    session = first.get("sessionId") or last.get("sessionId") or Path(s.key).name
    emits = tuple(
        b["id"]
        for b in answer["content"]
        if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
    )
    return Exchange(
        api="messages",
        body=body,
        reply=reply,
        submit_ns=min(submit, last["_ns"]),
        end_ns=last["_ns"],
        headers={SESSION_HEADER: str(session)},
        emits=emits,
    )


def _exchanges(s: Session, tally: Tally) -> list[Exchange]:
    """The session's calls; the first of a sub-agent's file after the call that started it."""
    answers: dict[str, dict[str, Any]] = {}
    for c in s.calls:
        ref = c.entries[-1].get("requestRef")
        if isinstance(ref, str):
            answers[ref] = _answer(c)
    rebuild = _Rebuilder(s, answers)
    out: list[Exchange] = []
    first_of: set[int] = set()
    for c in s.calls:
        x = _exchange(s, c, rebuild, tally)
        if x is None:
            continue
        if c.file not in first_of:
            first_of.add(c.file)
            x.after = s.spawned_by.get(c.file)
        out.append(x)
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

    def sessions() -> Iterator[list[Exchange]]:
        for g in groups:
            xs: list[Exchange] = []
            with unreadable(tally, "session"):
                xs = _exchanges(read_session(g, tally), tally)
            yield xs

    done = import_sessions(
        out, tally, sessions(), lambda: (files, len(files)), "claude-code sessions", len(groups)
    )
    return f"{done} from {len(files):,} Claude Code log files ({len(groups):,} sessions)"
