"""A whole trace loaded into memory with indexes, for stats, inspect, export and replay."""

from __future__ import annotations

import os
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Any

from agentload.errors import TraceFormatError
from agentload.trace.reader import Truncation, read_trace
from agentload.trace.schema import (
    AgentRecord,
    BlobRecord,
    EventRecord,
    Header,
    LLMCallRecord,
    SessionRecord,
    ToolCallRecord,
    Usage,
)

__all__ = ["Trace", "completion_of", "load_trace", "prompt_of"]


def prompt_of(u: Usage) -> int:
    """A call's prompt tokens: the server's when reported, else ours."""
    return u.prompt_tokens if u.prompt_tokens is not None else u.prompt_tokens_ours


def completion_of(u: Usage) -> int | None:
    """A call's completion tokens: the server's when reported, else ours (a streamed answer
    without usage); None when neither is known."""
    return u.completion_tokens if u.completion_tokens is not None else u.completion_tokens_ours


_BLOCKS_CACHE = 512


@dataclass
class Trace:
    """Records of one file, indexed. Later ``session``/``agent`` records (ends) update earlier ones."""

    path: str
    header: Header
    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    agents: dict[str, AgentRecord] = field(default_factory=dict)
    blobs: dict[str, BlobRecord] = field(default_factory=dict)
    calls: dict[str, LLMCallRecord] = field(default_factory=dict)
    tool_calls: dict[str, ToolCallRecord] = field(default_factory=dict)
    """Keyed by the tool call's id; where two sessions reuse an id (a model that numbers its
    calls per conversation, ``functions.bash:0``), the later session's record is keyed
    ``SESSION/ID``: look one up with ``tool_call(session_id, id)``."""
    events: list[EventRecord] = field(default_factory=list)
    truncated: Truncation | None = None
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # Recently resolved block lists (bounded: each is as long as its prompt).
    _blocks_cache: OrderedDict[str, list[str]] = field(default_factory=OrderedDict, repr=False)
    _by_agent: dict[str, list[LLMCallRecord]] = field(default_factory=dict, repr=False)
    _tool_keys: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    _by_agent_n: int = field(default=-1, repr=False)

    def calls_of(self, agent_id: str) -> list[LLMCallRecord]:
        """An agent's calls in seq order (a new list each time)."""
        if self._by_agent_n != len(self.calls):  # (re)build the index once per change of size
            by_agent: dict[str, list[LLMCallRecord]] = defaultdict(list)
            for c in self.calls.values():
                by_agent[c.agent_id].append(c)
            for calls in by_agent.values():
                calls.sort(key=lambda c: c.seq)
            self._by_agent = dict(by_agent)
            self._by_agent_n = len(self.calls)
        return list(self._by_agent.get(agent_id, ()))

    def agents_of(self, session_id: str) -> list[AgentRecord]:
        return sorted(
            (a for a in self.agents.values() if a.session_id == session_id),
            key=lambda a: a.start_ns,
        )

    def messages(self, call: LLMCallRecord) -> list[dict[str, Any]]:
        """The call's request messages, blob references resolved."""
        try:
            return [self.blobs[b].content for b in call.messages]
        except KeyError as exc:
            raise TraceFormatError(
                f"{self.path}: llm_call {call.id}: unknown blob {exc.args[0]}"
            ) from None

    def tools(self, call: LLMCallRecord) -> list[dict[str, Any]] | None:
        if call.request.tools is None:
            return None
        blob = self.blobs.get(call.request.tools)
        if blob is None:
            raise TraceFormatError(f"{self.path}: llm_call {call.id}: unknown tools blob")
        tools: list[dict[str, Any]] = blob.content
        return tools

    def native_body(self, call: LLMCallRecord) -> dict[str, Any] | None:
        """The request body as sent in its own API (``request.native``), or None for a chat
        call (its body is ``messages`` with ``request``)."""
        native = call.request.native
        if native is None:
            return None
        try:
            body = {k: self.blobs[b].content for k, b in native.fields.items() if b}
            items = [self.blobs[b].content for b in native.items]
        except KeyError as exc:
            raise TraceFormatError(
                f"{self.path}: llm_call {call.id}: request.native: unknown blob {exc.args[0]}"
            ) from None
        out: dict[str, Any] = {}
        for k in native.fields:  # the order sent
            out[k] = items if k == native.items_field else body[k]
        return out

    def blocks(self, call: LLMCallRecord) -> list[str]:
        """The call's full list of prompt block hashes (resolving ``prefix.base`` chains)."""
        # Iterative: a base chain is as long as an agent's (or a whole run's) call sequence.
        chain: list[LLMCallRecord] = []
        cur: LLMCallRecord | None = call
        seen: set[str] = set()
        out: list[str] | None = None
        while cur is not None:
            cached = self._blocks_cache.get(cur.id)
            if cached is not None:
                self._blocks_cache.move_to_end(cur.id)
                out = cached
                break
            if cur.id in seen:
                raise TraceFormatError(f"{self.path}: llm_call {call.id}: prefix base cycle")
            seen.add(cur.id)
            chain.append(cur)
            if cur.prefix is None or cur.prefix.base is None:
                break
            base = self.calls.get(cur.prefix.base)
            if base is None:
                raise TraceFormatError(
                    f"{self.path}: llm_call {cur.id}: unknown prefix base {cur.prefix.base}"
                )
            cur = base
        for c in reversed(chain):
            if c.prefix is None:
                out = []
            elif c.prefix.base is None:
                out = list(c.prefix.blocks)
            else:
                assert out is not None
                if c.prefix.base_blocks > len(out):
                    raise TraceFormatError(
                        f"{self.path}: llm_call {c.id}: prefix.base_blocks exceeds its base"
                    )
                out = out[: c.prefix.base_blocks] + c.prefix.blocks
            self._blocks_cache[c.id] = out
            if len(self._blocks_cache) > _BLOCKS_CACHE:
                self._blocks_cache.popitem(last=False)
        assert out is not None
        return out

    def add_tool_call(self, rec: ToolCallRecord) -> None:
        """Keep ``rec`` (a later record of the same id in the same session replaces it)."""
        key = self._tool_keys.get((rec.session_id, rec.id))
        if key is None:
            key = rec.id if rec.id not in self.tool_calls else f"{rec.session_id}/{rec.id}"
            self._tool_keys[(rec.session_id, rec.id)] = key
        self.tool_calls[key] = rec

    def share_tool_index(self, other: Trace) -> None:
        """Look tool calls up by ``other``'s keys (a copy of ``other`` with the same keys)."""
        self._tool_keys = dict(other._tool_keys)

    def tool_call(self, session_id: str, tool_id: str) -> ToolCallRecord | None:
        """The tool call ``tool_id`` of session ``session_id``, if the trace has it."""
        key = self._tool_keys.get((session_id, tool_id))
        return self.tool_calls.get(key) if key is not None else None

    def prompt_tokens(self, call: LLMCallRecord) -> int:
        """Server-reported prompt tokens when present, else ours."""
        return prompt_of(call.usage)

    def completion_tokens(self, call: LLMCallRecord) -> int:
        """Server-reported completion tokens when present, else ours (a streamed answer
        without usage)."""
        return completion_of(call.usage) or 0


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a whole trace; raises ``TraceFormatError`` for a bad record, tolerates truncation."""
    reader = read_trace(path)
    it = iter(reader)
    trace: Trace | None = None
    for rec in it:
        if isinstance(rec, Header):
            trace = Trace(path=str(path), header=rec)
            continue
        assert trace is not None  # the reader guarantees the header comes first
        trace.counts[rec.type] += 1
        if isinstance(rec, LLMCallRecord):
            trace.calls[rec.id] = rec
        elif isinstance(rec, ToolCallRecord):
            trace.add_tool_call(rec)
        elif isinstance(rec, BlobRecord):
            trace.blobs[rec.id] = rec
        elif isinstance(rec, AgentRecord):
            trace.agents[rec.id] = rec
        elif isinstance(rec, SessionRecord):
            old = trace.sessions.get(rec.id)
            if old is not None and rec.end_ns is None:
                continue
            trace.sessions[rec.id] = rec
        elif isinstance(rec, EventRecord):
            trace.events.append(rec)
    if trace is None:
        raise TraceFormatError(f"{path}: no header record (file cut before its first record?)")
    trace.truncated = reader.truncated
    return trace
