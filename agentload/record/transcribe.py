"""What the recording proxy writes: one request and its answer → trace records.

``Recorder.begin`` reads a request as it arrives (its API's body → the chat form, placed by
``threads.Threads``) and writes at once what its arrival tells: a new session or agent, the
tool calls whose results it carries (``tool_record``), the sub-agents those ended.
``Recorder.end`` writes its ``llm_call`` through ``CallCapture``, exactly as ``generate`` does
(each message a content-addressed blob, our token counts, prefix blocks), with the API it used
and, for a call not in chat, its body as sent (``request.native``). ``close`` writes the end of
every session and agent. A request that cannot be read is still proxied; it is noted as an
``event`` (a ``trace.events`` payload).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from agentload.errors import WireError
from agentload.errortext import clip
from agentload.record.decoding import decode
from agentload.record.ledger import Closed, Placement, header_session_id
from agentload.record.native import identity
from agentload.record.sink import Recorded, SessionOutcome
from agentload.record.threads import Threads
from agentload.tokenizer import ChatTokenCounter
from agentload.trace.capture import CallCapture, ObservedCall, assistant_message
from agentload.trace.events import (
    NOT_RECORDED,
    EventKind,
    EventPayload,
    UnknownPreviousResponse,
    UnreadRequest,
)
from agentload.trace.prefix import PrefixHasher
from agentload.trace.schema import (
    SIDE_ROLE,
    AgentRecord,
    EventRecord,
    NativeRequest,
    SessionRecord,
    Timings,
    ToolCallRecord,
)
from agentload.trace.trace import completion_of, prompt_of
from agentload.trace.writer import TraceWriter
from agentload.wire import Api, WireReply, to_chat
from agentload.wire.responses import continue_from, previous_response_id

__all__ = ["Pending", "Recorder", "tool_record"]

_ITEMS = {"messages": "messages", "responses": "input", "gemini": "contents"}
_KEEP_RESPONSES = 4096
"""Responses remembered for ``previous_response_id`` (the oldest are forgotten first)."""


@dataclass
class Pending:
    """One request between its arrival and its end."""

    api: Api
    body: dict[str, Any]
    chat: dict[str, Any]
    placement: Placement
    submit_ns: int
    scrubbed: list[tuple[Any, str]]
    """Each chat message as the trace holds it, and its content id (hashed once per call)."""


class Recorder:
    """Turns proxied requests into one trace (see the module docstring)."""

    def __init__(
        self,
        writer: TraceWriter,
        *,
        session_header: str | None = None,
        agent_header: str | None = None,
    ) -> None:
        self.writer = writer
        self.counter = ChatTokenCounter(writer.header.tokenizer)
        self.capture = CallCapture(writer, self.counter)
        self.threads = Threads()
        self.session_header = session_header.lower() if session_header else None
        self.agent_header = agent_header.lower() if agent_header else None
        self.calls = 0
        self.errors = 0
        self.unread = 0
        """Requests not turned into calls (``NOT_RECORDED`` events), for the stop line."""
        self.unread_first: str | None = None
        self.embeddings = 0
        """Embeddings requests relayed (``embedding`` events): no calls, not unread either."""
        self.websockets = 0
        self.on_recorded: Callable[[Recorded], None] | None = None
        """Told what was written of each call and of the tool runs a request closed."""
        self._outcomes: dict[str, SessionOutcome] = {}
        self._responses: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        """Responses answered so far (bounded): id → the conversation it ended, reply included
        (``previous_response_id`` continues from it)."""

    # -- arrival -----------------------------------------------------------------------------
    def begin(
        self, api: Api, raw: bytes, headers: dict[str, str], now_ns: int, path: str = ""
    ) -> Pending | None:
        """Read and place one request (synchronous: requests are placed in arrival order);
        None when its body cannot be read (noted as an event; the request is still sent).
        ``path``: the request's path (a Gemini call's model and streaming are there); a body
        sent compressed (``content-encoding``) is read decoded (``decoding``)."""
        try:
            body = orjson.loads(decode(raw, headers.get("content-encoding", "")))
            if not isinstance(body, dict):
                raise WireError(f"body: expected a JSON object, got {type(body).__name__}")
            chat = to_chat(api, body, path)
            messages = chat.get("messages")
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                raise WireError("messages: expected a list of objects")
            if api == "responses":
                chat["messages"] = messages = self._resolve(body, messages, now_ns)
        except (orjson.JSONDecodeError, WireError) as exc:
            self.note(UnreadRequest(api=api, error=clip(str(exc))), now_ns)
            return None
        scrubbed = [self.writer.scrubbed(m) for m in messages]
        ids = [mid for _, mid in scrubbed]
        who = identity(headers, self.session_header, self.agent_header)  # or the agent's own
        placement = self.threads.route(messages, ids, now_ns, who.session, who.agent, who.names)
        if placement.new_session is not None:
            self.writer.write_nowait(placement.new_session)
        if placement.new_agent is not None:
            self.writer.write_nowait(placement.new_agent)
        tools_ns = 0
        for c in placement.closed:
            tool = tool_record(c, self.counter)
            self.writer.write_nowait(tool)
            if tool.child_agent_id is None:
                tools_ns += tool.end_ns - tool.start_ns
        if self.on_recorded is not None and placement.closed:
            rec = placement.agent.record
            root = rec.parent_agent_id is None
            self.on_recorded(Recorded(rec.session_id, rec.id, root, call=False, tool_ns=tools_ns))
        for a in (*placement.ended_agents, *placement.linked_agents):
            self.writer.write_nowait(a)
        return Pending(api, body, chat, placement, now_ns, scrubbed)

    def _resolve(
        self, body: dict[str, Any], messages: list[dict[str, Any]], now_ns: int
    ) -> list[dict[str, Any]]:
        """A Responses request that continues a stored response (``previous_response_id``)
        means that response's conversation, then its own items; its own instructions stand in
        for the earlier ones (the API does not carry them over)."""
        prev = previous_response_id(body)
        if prev is None:
            return messages
        earlier = self._responses.get(prev)
        if earlier is None:
            self.note(UnknownPreviousResponse(previous_response_id=prev[:80]), now_ns)
            return messages
        return continue_from(earlier, messages)

    def _remember(self, p: Pending, reply: WireReply) -> None:
        if p.api != "responses" or not reply.response_id:
            return
        turn = assistant_message(reply.content, reply.tool_calls or None)
        self._responses[reply.response_id] = [*p.chat["messages"], turn]
        while len(self._responses) > _KEEP_RESPONSES:
            self._responses.popitem(last=False)

    # -- the answer --------------------------------------------------------------------------
    async def end(
        self,
        p: Pending,
        reply: WireReply,
        timings: Timings,
        error: str | None,
    ) -> None:
        """Write the call's ``llm_call`` (``error``: why it failed, if it did)."""
        pl = p.placement
        end_ns = timings.last_token_ns or time.perf_counter_ns()
        self.calls += 1
        error = error or reply.error
        if error:
            self.errors += 1
        native = await self._native(p) if p.api != "chat" else None
        tool_calls = reply.tool_calls or None
        rec = await self.capture.record(
            ObservedCall(
                call_id=pl.call_id,
                session_id=pl.agent.record.session_id,
                agent_id=pl.agent.record.id,
                seq=pl.seq,
                body=p.chat,
                content=reply.content,
                tool_calls=tool_calls,
                finish_reason=reply.finish_reason,
                usage=reply.usage,
                timings=timings,
                depends_on=pl.depends_on,
                error=clip(error) if error else None,
                api=p.api,
                native=native,
            ),
            scrubbed=p.scrubbed,
        )
        if self.on_recorded is not None:
            root = pl.agent.record.parent_agent_id is None
            u = rec.usage
            self.on_recorded(
                Recorded(
                    rec.session_id,
                    rec.agent_id,
                    root,
                    True,
                    prompt_of(u),
                    completion_of(u) or 0,
                    len(tool_calls or ()),
                )
            )
        if not error:
            self._remember(p, reply)
        answered = None if error else assistant_message(reply.content, tool_calls)
        if answered is not None and not (reply.content or tool_calls):
            answered = None
        self.threads.answered(pl, answered, end_ns)

    async def _native(self, p: Pending) -> NativeRequest:
        """The body as sent, each field and each item a blob."""
        key = _ITEMS[p.api]
        fields: dict[str, str] = {}
        items: list[str] = []
        for k, v in p.body.items():
            if k == key and isinstance(v, list):
                fields[k] = ""
                items = [await self.writer.blob("native", item) for item in v]
            else:
                fields[k] = await self.writer.blob("native", v)
        return NativeRequest(fields=fields, items_field=key, items=items)

    # -- notes and the end -------------------------------------------------------------------
    def note(self, event: EventPayload, now_ns: int) -> None:
        """An ``event`` record; a request it says was not recorded (``NOT_RECORDED``) is
        counted, and the first one's reason kept, for the proxy's stop line."""
        rec = EventRecord.of(event, now_ns)
        kind, details = event.kind, rec.details
        if kind in NOT_RECORDED:
            self.unread += 1
            if self.unread_first is None:
                where = details.get("transport") or details.get("where") or kind
                self.unread_first = clip(f"{where}: {details.get('error', kind)}", 160)
        elif kind == EventKind.WEBSOCKET:
            self.websockets += 1
        elif kind == EventKind.EMBEDDING:
            self.embeddings += 1
        self.writer.write_nowait(rec)

    def outcome(self, o: SessionOutcome) -> None:
        """How a session its caller ran ended (``generate --agent``: the agent's exit, the
        success check): its end record says so, and its ``eval`` event is written now."""
        sid = header_session_id(o.session)
        self._outcomes[sid] = o
        if o.eval is not None:
            self.writer.write_nowait(EventRecord.of(o.eval, o.ns, session_id=sid))

    def close(self) -> None:
        """Write the end of every session and every agent still open."""
        threads = self.threads
        waiting = {  # a tool call of an agent still running (a sub-agent's last call, such as
            o.session_id  # Gemini CLI's complete_task, is never answered: its spawn's is)
            for o in threads.unanswered()
            if (a := threads.agents.get(o.agent_id)) is None or a.record.end_ns is None
        }
        for side in threads.side_agents():
            side.record.role = SIDE_ROLE
        last: dict[str, int] = {}
        for a in threads.agents.values():
            rec: AgentRecord = a.record
            end = a.last_end_ns or rec.start_ns
            last[rec.session_id] = max(last.get(rec.session_id, 0), end)
            if rec.end_ns is None:
                rec.end_ns = end
            self.writer.write_nowait(rec)
        for sid, s in threads.sessions.items():
            update: dict[str, Any] = {
                "end_ns": max(s.start_ns, last.get(sid, s.start_ns)),
                "end_reason": "interrupted" if sid in waiting else "done",
            }
            o = self._outcomes.get(sid)
            if o is not None:
                update |= {"end_ns": max(s.start_ns, o.ns), "end_reason": o.end_reason}
                update |= {"eval_passed": o.eval.passed if o.eval else None}
                update |= {"meta": {**s.meta, **o.meta}}
                if o.sandbox is not None:
                    update["sandbox"] = o.sandbox
            done: SessionRecord = s.model_copy(update=update)
            self.writer.write_nowait(done)
        for sid in [sid for sid in self._outcomes if sid not in threads.sessions]:
            o = self._outcomes.pop(sid)  # it made no call (it failed to start): its end still
            self.writer.write_nowait(
                SessionRecord(  # says how it went
                    id=sid,
                    start_ns=o.start_ns or o.ns,
                    end_ns=o.ns,
                    end_reason=o.end_reason,
                    sandbox=o.sandbox,
                    eval_passed=o.eval.passed if o.eval else None,
                    meta=o.meta,
                )
            )

    def forget(self) -> None:
        """``close`` and start afresh: what follows shares no session with what came before
        (an importer that feeds one source session at a time keeps memory bounded so: the prefix
        blocks of what came before are forgotten too)."""
        self.close()
        self.threads = Threads()
        self._responses.clear()
        self.capture.hasher = PrefixHasher(self.writer.header.block_size)


def tool_record(c: Closed, counter: ChatTokenCounter) -> ToolCallRecord:
    """The ``tool_call`` record of a call whose result a request carried (``observed_by:
    proxy``): timed from the reply that emitted it to that request; malformed arguments (not a
    JSON object) are kept as the model gave them, the record's arguments ``{}``."""
    o = c.call
    raw_args: str | None = None
    try:
        args: Any = orjson.loads(c.arguments or "{}")
    except orjson.JSONDecodeError:
        args, raw_args = {}, c.arguments
    if not isinstance(args, dict):
        args, raw_args = {}, c.arguments
    return ToolCallRecord(
        id=o.id,
        session_id=o.session_id,
        agent_id=o.agent_id,
        llm_call_id=o.llm_call_id,
        name=o.name,
        arguments=args,
        raw_arguments=raw_args,
        start_ns=o.emitted_ns,
        end_ns=max(o.emitted_ns, c.end_ns),
        output_bytes=len(c.result.encode("utf-8", "replace")),
        output_tokens=counter.count_text(c.result),
        child_agent_id=o.children[0] if o.children else None,
        model_call_id=o.server_id if o.client_id else None,
        observed_by="proxy",
    )
