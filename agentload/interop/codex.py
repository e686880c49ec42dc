"""``agentload trace import codex``: Codex CLI rollouts → a full-content trace.

Codex writes each thread to ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl``:
``{"timestamp", "type", "payload"}`` lines. The first ``session_meta`` is the thread's own
(``id``: the thread, ``session_id``: the session its sub-agents share, ``parent_thread_id`` and
``source.subagent.thread_spawn.agent_path`` for a sub-agent, ``base_instructions.text``); a
forked sub-agent's file then carries its parent's meta and history, which are its history too.
``response_item`` payloads are the Responses API items of the conversation, in order; a
``token_usage_record`` of the thread (``response_id``, ``usage``) ends one model call (earlier
Codex: an ``event_msg`` ``token_count`` with ``last_token_usage``), whose answer is the items
the model produced since the last input item (messages of the assistant, function, custom and
shell calls, reasoning).

Each call becomes an ``exchanges.Exchange`` in the Responses API: ``input`` (the thread's base
instructions as the first developer message, as Codex sends them, then every item before the
answer, without Codex's own bookkeeping key ``internal_chat_message_metadata_passthrough``),
``tools`` derived from the calls the thread makes (functions with empty schemas, in their
namespaces; ``tool_choice: auto``, ``parallel_tool_calls: true``), ``stream: true``;
the headers Codex sends (``session-id``, ``thread-id``, ``x-codex-turn-metadata`` with the
thread's source and agent path), so sessions and sub-agents are rebuilt as ``agentload
record`` rebuilds them. Submit: the time of the line before the answer's first item; end: the
usage record's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import TraceFormatError, WireError
from agentload.interop.content_free import At
from agentload.interop.exchanges import (
    Exchange,
    Tally,
    import_sessions,
    iso_ns,
    jsonl_files,
    read_lines,
    unreadable,
)
from agentload.outfile import check_output
from agentload.wire import reply_from_json

__all__ = ["import_codex", "looks_like_codex"]

FORMAT = "codex"
_OUTPUT = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
        "image_generation_call",
    }
)
"""Item types only the model produces (plus ``message`` with role ``assistant``)."""
_DROP = ("internal_chat_message_metadata_passthrough",)
_DERIVED = {
    "instructions": "the thread's base_instructions, as the first developer message",
    "tools": "the functions the thread calls, with empty parameter schemas; tool_choice "
    "auto, parallel_tool_calls true",
    "stream": "true (Codex streams every call)",
}


def looks_like_codex(first: dict[str, Any]) -> bool:
    """Whether a JSONL file's first object is a Codex rollout line."""
    return first.get("type") == "session_meta" and isinstance(first.get("payload"), dict)


@dataclass
class _Thread:
    path: Path
    id: str
    session: str
    source: str
    agent_path: str | None
    instructions: str | None
    lines: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


def _is_output(item: dict[str, Any]) -> bool:
    t = item.get("type")
    return isinstance(t, str) and (
        t in _OUTPUT or (t == "message" and item.get("role") == "assistant")
    )


def _clean(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in _DROP}


def _thread(path: Path, tally: Tally) -> _Thread | None:
    lines = list(read_lines(path, tally))
    meta = next((o.get("payload") for _, o in lines if o.get("type") == "session_meta"), None)
    if not isinstance(meta, dict) or not isinstance(meta.get("id"), str):
        tally.note("session_meta", "missing, file skipped")
        return None
    source = meta.get("source")
    spawn = source.get("subagent", {}).get("thread_spawn", {}) if isinstance(source, dict) else {}
    spawn = spawn if isinstance(spawn, dict) else {}
    base = meta.get("base_instructions")
    text = base.get("text") if isinstance(base, dict) else base if isinstance(base, str) else None
    sub = (
        meta.get("thread_source") == "subagent" or bool(spawn) or bool(meta.get("parent_thread_id"))
    )
    return _Thread(
        path=path,
        id=meta["id"],
        session=str(meta.get("session_id") or meta["id"]),
        source="subagent" if sub else "user",
        agent_path=spawn.get("agent_path") if isinstance(spawn.get("agent_path"), str) else None,
        instructions=text if isinstance(text, str) else None,
        lines=lines,
    )


def _tools(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Function tools for the calls made in ``items`` (namespaced ones in their namespace)."""
    plain: list[str] = []
    spaces: dict[str, list[str]] = {}
    for it in items:
        if it.get("type") not in ("function_call", "custom_tool_call"):
            continue
        name = it.get("name")
        if not isinstance(name, str):
            continue
        ns = it.get("namespace")
        bucket = spaces.setdefault(ns, []) if isinstance(ns, str) else plain
        if name not in bucket:
            bucket.append(name)
    schema = {"type": "object", "properties": {}}
    out: list[dict[str, Any]] = [
        {"type": "function", "name": n, "description": "", "parameters": schema} for n in plain
    ]
    for ns, names in spaces.items():
        fns = [
            {"type": "function", "name": n, "description": "", "parameters": schema} for n in names
        ]
        out.append({"type": "namespace", "name": ns, "description": "", "tools": fns})
    return out


def _usage(p: dict[str, Any]) -> dict[str, Any] | None:
    u = p.get("usage")
    if not isinstance(u, dict):
        info = p.get("info")
        u = info.get("last_token_usage") if isinstance(info, dict) else None
    if not isinstance(u, dict):
        return None
    out: dict[str, Any] = {
        "input_tokens": u.get("input_tokens"),
        "output_tokens": u.get("output_tokens"),
        "input_tokens_details": {"cached_tokens": u.get("cached_input_tokens") or 0},
    }
    if u.get("reasoning_output_tokens") is not None:
        out["output_tokens_details"] = {"reasoning_tokens": u["reasoning_output_tokens"]}
    return out


def _headers(th: _Thread) -> dict[str, str]:
    """The headers Codex sends with each call of the thread."""
    headers = {"session-id": th.session, "thread-id": th.id}
    meta: dict[str, str] = {"thread_source": th.source}
    if th.agent_path:
        meta["agent_name"] = th.agent_path
    headers["x-codex-turn-metadata"] = orjson.dumps(meta).decode()
    return headers


@dataclass
class _Replay:
    """A thread's lines read in order: the conversation so far, where the answer being read
    starts, the times it needs, and the calls made."""

    th: _Thread
    tally: Tally
    model: str
    by_record: bool
    headers: dict[str, str]
    first: list[dict[str, Any]]
    """What every request's ``input`` starts with (the base instructions)."""
    history: list[dict[str, Any]] = field(default_factory=list)
    answer_from: int = 0
    """Index in ``history`` of the first item of the answer being read."""
    before_ns: int = 0
    """The time of the line before the answer's first item."""
    last_ns: int = 0
    out: list[Exchange] = field(default_factory=list)

    def line(self, lineno: int, o: dict[str, Any]) -> None:
        """One rollout line: a model, a compaction, an item or a call's end."""
        at = At(str(self.th.path), f"line {lineno}")
        t = o.get("type")
        p = o.get("payload")
        if not isinstance(p, dict):
            return
        ns = iso_ns(o.get("timestamp"), at)
        if t == "turn_context" and isinstance(p.get("model"), str):
            self.model = p["model"]
        if t == "compacted" and isinstance(p.get("replacement_history"), list):
            self.history = [_clean(i) for i in p["replacement_history"] if isinstance(i, dict)]
            self.answer_from = len(self.history)
        elif t == "response_item":
            item = _clean(p)
            if not _is_output(item):
                self.answer_from = len(self.history) + 1
            elif self.answer_from == len(self.history):
                self.before_ns = self.last_ns
            self.history.append(item)
        elif self.ends_call(t, p) and not self.call(p, ns):
            return  # an answer that does not read: the line's time is not the last line's
        self.last_ns = ns

    def ends_call(self, t: Any, p: dict[str, Any]) -> bool:
        """Whether the line ends a model call: the thread's usage record, or (earlier Codex) a
        ``token_count`` event after the answer's items."""
        if self.by_record:
            return t == "token_usage_record" and bool(p.get("thread_id", self.th.id) == self.th.id)
        return (
            t == "event_msg"
            and p.get("type") == "token_count"
            and self.answer_from < len(self.history)
        )

    def call(self, p: dict[str, Any], ns: int) -> bool:
        """The call that ends at ``ns`` (its usage ``p``); False when its answer does not read
        as one (counted, skipped)."""
        answer = self.history[self.answer_from :]
        if not answer and not self.by_record:
            return True
        body: dict[str, Any] = {
            "model": self.model,
            "input": self.first + self.history[: self.answer_from],
        }
        tools = _tools(self.history)
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
            body["parallel_tool_calls"] = True
        body["stream"] = True
        reply_obj = {
            "id": p.get("response_id") or f"resp_{len(self.out)}",
            "object": "response",
            "status": "completed",
            "model": self.model,
            "output": answer,
            "usage": _usage(p),
        }
        try:
            reply = reply_from_json("responses", reply_obj)
        except WireError:
            self.tally.note("response_item", "answer not a Responses API answer, skipped")
            self.answer_from = len(self.history)
            return False
        emits = tuple(str(i["call_id"]) for i in answer if isinstance(i.get("call_id"), str))
        self.out.append(
            Exchange(
                api="responses",
                body=body,
                reply=reply,
                submit_ns=self.before_ns or ns,
                end_ns=ns,
                headers=dict(self.headers),
                emits=emits,
            )
        )
        self.answer_from = len(self.history)
        return True


def _exchanges(th: _Thread, tally: Tally, model_default: str) -> list[Exchange]:
    """The thread's model calls (see the module docstring)."""
    first: list[dict[str, Any]] = []
    if th.instructions is not None:  # Codex sends them as the first developer message
        text = {"type": "input_text", "text": th.instructions}
        first.append({"type": "message", "role": "developer", "content": [text]})
    replay = _Replay(
        th,
        tally,
        model=model_default,
        by_record=any(o.get("type") == "token_usage_record" for _, o in th.lines),
        headers=_headers(th),
        first=first,
    )
    for lineno, o in th.lines:
        replay.line(lineno, o)
    return replay.out


def _sessions(paths: list[Path], tally: Tally) -> tuple[list[Path], dict[str, list[Path]]]:
    """Rollout files under ``paths``, grouped by the session their first meta names."""
    files: list[Path] = []
    groups: dict[str, list[Path]] = {}
    for f in jsonl_files(paths, "rollout-*.jsonl"):
        files.append(f)
        session = f.name
        for _, o in read_lines(f, tally, limit=1):
            p = o.get("payload")
            if o.get("type") == "session_meta" and isinstance(p, dict):
                session = str(p.get("session_id") or p.get("id") or f.name)
        groups.setdefault(session, []).append(f)
    return files, groups


def import_codex(paths: list[Path], out: Path, *, force: bool = False) -> str:
    """Import Codex rollouts (files or directories) into the trace ``out``."""
    tally = Tally(FORMAT)
    files, groups = _sessions(paths, tally)
    if not groups:
        raise TraceFormatError(
            f"{', '.join(map(str, paths))}: no Codex rollouts (rollout-*.jsonl) found"
        )
    check_output(out, files, force=force)

    def sessions() -> Iterator[list[Exchange]]:
        for group in groups.values():
            xs: list[Exchange] = []
            for f in group:
                th = _thread(f, tally)
                if th is not None:
                    with unreadable(tally, "thread"):
                        xs += _exchanges(th, tally, "unknown")
            tally.derived.update(_DERIVED)
            yield xs

    done = import_sessions(
        out, tally, sessions(), lambda: (files, len(files)), "codex sessions", len(groups)
    )
    return f"{done} from {len(files):,} Codex rollouts ({len(groups):,} sessions)"
