"""One agentload session as OpenTelemetry SDK spans that follow the GenAI semantic conventions.

The tree of one session (one OTLP trace):

* ``invoke_workflow {scenario}`` (INTERNAL): the session, from its start to its end;
* ``invoke_agent {role}`` (INTERNAL), one per agent: the orchestrator under the session span,
  a sub-agent under the ``execute_tool delegate`` span of the tool call that started it (that
  span lasts as long as the sub-agent; the chat span that asked for it has ended by then);
* ``chat {model}`` (CLIENT), one per llm_call, and ``execute_tool {name}`` (INTERNAL), one per
  tool call, under their agent's span; a tool span links to the chat span that emitted it.

Ids are derived from the trace, not drawn: the trace id from the recording's identity (header
``created_at`` and clock anchor) and the session id, a span id from the record's kind and id, so
two exports of one trace are equal. Timestamps: ``unix_ns = clock.unix_ns + (t - clock.mono_ns)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from agentload.interop.genai_parts import (
    message_parts,
    output_message,
    tool_arguments,
    tool_definitions,
)
from agentload.trace.events import EventKind
from agentload.trace.samples import call_end_ns
from agentload.trace.schema import AgentRecord, LLMCallRecord, ToolCallRecord
from agentload.trace.trace import Trace, completion_of

__all__ = ["PROVIDER", "SEMCONV_SCHEMA_URL", "session_ids", "session_spans", "tool_results"]

SEMCONV_SCHEMA_URL = "https://opentelemetry.io/schemas/1.41.0"
"""The semantic-conventions version the spans follow (GenAI conventions, status Development)."""
PROVIDER = "openai"
"""``gen_ai.provider.name``: agentload speaks the OpenAI chat-completions API to every endpoint."""

_Attrs = dict[str, Any]


def _id(key: str, size: int) -> int:
    n = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=size).digest(), "big")
    return n or 1  # an all-zero id is invalid in OTLP


@dataclass(frozen=True)
class _Span:
    """One span to build: its name, its context and its parent's, its start and end (trace ns),
    its attributes, and what else it may carry (kind, status, links, events)."""

    name: str
    ctx: SpanContext
    parent: SpanContext | None
    start: int
    end: int
    attrs: _Attrs
    kind: SpanKind = SpanKind.INTERNAL
    status: Status | None = None
    links: Sequence[Link] = ()
    events: Sequence[Event] = ()


@dataclass
class _Ctx:
    """What every span of one session shares."""

    trace: Trace
    session_id: str
    content: bool
    resource: Resource
    scope: InstrumentationScope
    trace_id: int = 0
    key: str = ""
    tool_results: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        h = self.trace.header
        copy = "/redacted" if h.redacted else ""  # a redacted copy is another trace
        self.key = f"{h.created_at}/{h.clock.unix_ns}/{h.clock.mono_ns}{copy}/{self.session_id}"
        self.trace_id = _id(f"trace/{self.key}", 16)

    def unix(self, t: int) -> int:
        c = self.trace.header.clock
        return c.unix_ns + (t - c.mono_ns)

    def span_ctx(self, kind: str, rid: str) -> SpanContext:
        return SpanContext(
            self.trace_id,
            _id(f"{kind}/{self.key}/{rid}", 8),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )

    def span(self, s: _Span) -> ReadableSpan:
        """``s`` as an SDK span of this session (its attributes without the None values, its
        times on the wall clock, an end before its start moved to the start)."""
        return ReadableSpan(
            name=s.name,
            context=s.ctx,
            parent=s.parent,
            resource=self.resource,
            attributes={k: v for k, v in s.attrs.items() if v is not None},
            events=s.events,
            links=s.links,
            kind=s.kind,
            status=s.status or Status(StatusCode.UNSET),
            start_time=self.unix(s.start),
            end_time=self.unix(max(s.start, s.end)),
            instrumentation_scope=self.scope,
        )


def session_ids(trace: Trace) -> list[str]:
    """Every session of the trace (those with a session record first, then any named only by
    agents or calls of a cut file), in order of appearance."""
    ids = dict.fromkeys(trace.sessions)
    ids.update(dict.fromkeys(a.session_id for a in trace.agents.values()))
    ids.update(dict.fromkeys(c.session_id for c in trace.calls.values()))
    return list(ids)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def tool_results(trace: Trace) -> dict[str, Any]:
    """tool_call id -> the tool message content the history carried onward (``--content``)."""
    out: dict[str, Any] = {}
    for b in trace.blobs.values():
        c = b.content
        if b.kind == "message" and isinstance(c, dict) and c.get("role") == "tool":
            out[str(c.get("tool_call_id"))] = c.get("content")
    return out


def session_spans(
    trace: Trace,
    session_id: str,
    *,
    content: bool,
    resource: Resource,
    scope: InstrumentationScope,
    results: dict[str, Any] | None = None,
) -> list[ReadableSpan]:
    """The spans of one session, parents before children (``results``: ``tool_results(trace)``,
    computed once per trace by a caller exporting several sessions)."""
    cx = _Ctx(trace, session_id, content and not trace.header.redacted, resource, scope)
    if cx.content:
        cx.tool_results = results if results is not None else tool_results(trace)
    return list(_spans(cx))


def _server_attrs(endpoint: str | None) -> _Attrs:
    if not endpoint:
        return {}
    u = urlsplit(endpoint)
    if not u.hostname:
        return {}
    port = u.port or (443 if u.scheme == "https" else 80)
    return {"server.address": u.hostname, "server.port": port}


def _spans(cx: _Ctx) -> Iterator[ReadableSpan]:
    trace, sid = cx.trace, cx.session_id
    agents = trace.agents_of(sid)
    calls = [c for a in agents for c in trace.calls_of(a.id)]
    tools = [tc for tc in trace.tool_calls.values() if tc.session_id == sid]
    sess = trace.sessions.get(sid)
    times = [a.start_ns for a in agents] + [c.timings.submit_ns for c in calls]
    ends = [a.end_ns or a.start_ns for a in agents] + [call_end_ns(c) for c in calls]
    ends += [tc.end_ns for tc in tools]
    start = sess.start_ns if sess is not None else min(times, default=0)
    end = sess.end_ns if sess is not None and sess.end_ns is not None else max(ends, default=start)
    events = _events(cx)

    root = cx.span_ctx("session", sid)
    scenario = trace.header.scenario
    yield cx.span(
        _Span(
            f"invoke_workflow {scenario}" if scenario else "invoke_workflow",
            root,
            None,
            start,
            end,
            {
                "gen_ai.operation.name": "invoke_workflow",
                "gen_ai.workflow.name": scenario,
                "gen_ai.conversation.id": sid,
                "agentload.session.end_reason": sess.end_reason if sess else None,
                "agentload.session.sandbox": sess.sandbox if sess else None,
                "agentload.session.eval_passed": sess.eval_passed if sess else None,
            },
            events=events.get(None, ()),
        )
    )
    tool_ctx = {tc.id: cx.span_ctx("tool", tc.id) for tc in tools}
    call_ctx = {c.id: cx.span_ctx("chat", c.id) for c in calls}
    agent_ctx = {a.id: cx.span_ctx("agent", a.id) for a in agents}
    agent_end: dict[str, int] = {}
    for c in calls:
        agent_end[c.agent_id] = max(agent_end.get(c.agent_id, 0), call_end_ns(c))
    for tc in tools:
        agent_end[tc.agent_id] = max(agent_end.get(tc.agent_id, 0), tc.end_ns)
    server = _server_attrs(trace.header.endpoint)
    for a in agents:  # sorted by start: a parent's span comes before its children's
        if a.parent_tool_call_id in tool_ctx:
            parent = tool_ctx[a.parent_tool_call_id]
        elif a.parent_agent_id in agent_ctx:
            parent = agent_ctx[a.parent_agent_id]
        else:
            parent = root
        yield _agent_span(cx, a, agent_ctx[a.id], parent, agent_end, events.get(a.id, ()))
        for c in trace.calls_of(a.id):
            yield _chat_span(cx, c, call_ctx[c.id], agent_ctx[a.id], a, server)
        for tc in sorted((t for t in tools if t.agent_id == a.id), key=lambda t: t.start_ns):
            link = call_ctx.get(tc.llm_call_id)
            yield _tool_span(cx, tc, tool_ctx[tc.id], agent_ctx[a.id], link)


def _events(cx: _Ctx) -> dict[str | None, list[Event]]:
    """The session's events as span events: on their agent's span, else on the session's."""
    out: dict[str | None, list[Event]] = {}
    for e in cx.trace.events:
        if e.session_id != cx.session_id or e.kind == EventKind.TRACE_END:
            continue
        nums = {
            f"agentload.{k}": v
            for k, v in e.details.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        ev = Event(f"agentload.{e.kind}", attributes=nums, timestamp=cx.unix(e.ns))
        out.setdefault(e.agent_id if e.agent_id in cx.trace.agents else None, []).append(ev)
    return out


def _agent_span(
    cx: _Ctx,
    a: AgentRecord,
    ctx: SpanContext,
    parent: SpanContext,
    agent_end: dict[str, int],
    events: Sequence[Event],
) -> ReadableSpan:
    end = a.end_ns if a.end_ns is not None else agent_end.get(a.id, a.start_ns)
    return cx.span(
        _Span(
            f"invoke_agent {a.role}",
            ctx,
            parent,
            a.start_ns,
            end,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.agent.name": a.role,
                "gen_ai.agent.id": a.id,
                "gen_ai.conversation.id": a.session_id,
                "gen_ai.request.model": cx.trace.header.model,
            },
            events=events,
        )
    )


def _chat_span(
    cx: _Ctx,
    c: LLMCallRecord,
    ctx: SpanContext,
    parent: SpanContext,
    agent: AgentRecord,
    server: _Attrs,
) -> ReadableSpan:
    u, r, t = c.usage, c.request, c.timings
    attrs: _Attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": r.model,
        **server,
        "gen_ai.conversation.id": c.session_id,
        "gen_ai.agent.name": agent.role,
        "gen_ai.agent.id": agent.id,
        "gen_ai.request.max_tokens": r.max_tokens,
        "gen_ai.request.temperature": r.temperature,
        "gen_ai.request.top_p": r.top_p,
        "gen_ai.request.seed": r.seed,
        "gen_ai.request.stream": r.stream,
        "gen_ai.response.finish_reasons": (
            [c.response.finish_reason] if c.response.finish_reason else None
        ),
        "gen_ai.usage.input_tokens": cx.trace.prompt_tokens(c),
        "gen_ai.usage.output_tokens": completion_of(u),
        "gen_ai.usage.cache_read.input_tokens": u.cached_tokens,
        "gen_ai.response.time_to_first_chunk": (
            (t.first_token_ns - t.submit_ns) / 1e9
            if r.stream and t.first_token_ns is not None
            else None
        ),
        "agentload.llm_call.id": c.id,
        "agentload.llm_call.seq": c.seq,
    }
    status = None
    if c.error is not None:
        attrs["error.type"] = "_OTHER"
        status = Status(StatusCode.ERROR, c.error if cx.content else None)
    if cx.content:
        attrs.update(_chat_content(cx.trace, c))
    return cx.span(
        _Span(
            f"chat {r.model}",
            ctx,
            parent,
            t.submit_ns,
            call_end_ns(c),
            attrs,
            kind=SpanKind.CLIENT,
            status=status,
        )
    )


def _chat_content(trace: Trace, c: LLMCallRecord) -> _Attrs:
    out: _Attrs = {"gen_ai.input.messages": _json([message_parts(m) for m in trace.messages(c)])}
    blob = trace.blobs.get(c.response.content) if c.response.content else None
    if blob is not None and isinstance(blob.content, dict):
        answer = output_message(blob.content, c.response.finish_reason)
        out["gen_ai.output.messages"] = _json([answer])
    tools = trace.tools(c)
    if tools:
        out["gen_ai.tool.definitions"] = _json(tool_definitions(tools))
    return out


def _tool_span(
    cx: _Ctx,
    tc: ToolCallRecord,
    ctx: SpanContext,
    parent: SpanContext,
    emitted_by: SpanContext | None,
) -> ReadableSpan:
    attrs: _Attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tc.name,
        "gen_ai.tool.call.id": tc.id,
        "gen_ai.tool.type": "function",
        "agentload.tool.exit_code": tc.exit_code,
        "agentload.tool.output_bytes": tc.output_bytes,
        "agentload.tool.output_tokens": tc.output_tokens,
        "agentload.tool.truncated": tc.truncated or None,
        "agentload.tool.child_agent_id": tc.child_agent_id,
    }
    status = None
    if tc.timed_out or tc.error is not None:
        attrs["error.type"] = "timeout" if tc.timed_out else "_OTHER"
        status = Status(StatusCode.ERROR, tc.error if cx.content else None)
    if cx.content:
        attrs["gen_ai.tool.call.arguments"] = _json(tool_arguments(tc.arguments))
        if tc.id in cx.tool_results:
            result = cx.tool_results[tc.id]
            attrs["gen_ai.tool.call.result"] = result if isinstance(result, str) else _json(result)
    links = [Link(emitted_by)] if emitted_by is not None else []
    return cx.span(
        _Span(
            f"execute_tool {tc.name}",
            ctx,
            parent,
            tc.start_ns,
            tc.end_ns,
            attrs,
            status=status,
            links=links,
        )
    )
