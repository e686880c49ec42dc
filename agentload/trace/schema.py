"""Trace format v1: the versioned pydantic models of every record in an agentload trace.

A trace is JSON lines (zstd-compressed as ``*.agentload.jsonl.zst``, or plain ``*.jsonl``).
The first record is a ``header``; then ``session``, ``agent``, ``blob``, ``llm_call``,
``tool_call`` and ``event`` records in any order, with one rule: a blob is written before the
first record that names it. All times are integer nanoseconds on the recording process's
monotonic clock (``time.perf_counter_ns``); ``header.clock`` pairs one monotonic reading with
the wall clock, so ``unix_ns = clock.unix_ns + (t - clock.mono_ns)``.

Messages are stored once: an ``llm_call`` lists the blob ids of its request messages, and each
``blob`` holds one chat message (or one tool-schema list) under its content hash.

**Content-free traces** (``header.redacted``: imported from another format, or written by
``agentload trace redact``) carry no message text. Their calls keep everything else: agents,
order, ``depends_on``, timings, usage, and the prompt's block ids in ``llm_call.prefix`` at
``header.block_size`` tokens a block (equal id = equal block of text, different ids = different
blocks; for an import these are the source's hash ids as strings, made unique across the file
where the source's scope is one conversation). ``usage.prompt_tokens_ours`` is the input length to
synthesize. An imported call has no message blobs (``messages`` is empty); a redacted call's
message blobs hold only lengths (see ``agentload.interop.redact``). Replay synthesizes each such
prompt from its block ids (``agentload.trace.synth``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from agentload.trace.events import EventKind, EventPayload

__all__ = [
    "MAX_CALL_TOKENS",
    "SCHEMA",
    "SCHEMA_MAJOR",
    "SCHEMA_MINOR",
    "SIDE_ROLE",
    "AgentRecord",
    "BlobRecord",
    "ClockAnchor",
    "ContextPolicy",
    "EndReason",
    "EventRecord",
    "Header",
    "HostFacts",
    "LLMCallRecord",
    "NativeRequest",
    "PrefixInfo",
    "Record",
    "RequestParams",
    "ResponseRecord",
    "SessionRecord",
    "SourceInfo",
    "Timings",
    "TokenCalibration",
    "ToolCallRecord",
    "ToolCallRef",
    "TraceApi",
    "TurnKind",
    "Usage",
    "WaitsInfo",
    "record_adapter",
]

from agentload.trace.header import (  # the header, re-exported: one module of the format
    MAX_CALL_TOKENS,
    SCHEMA,
    SCHEMA_MAJOR,
    SCHEMA_MINOR,
    ClockAnchor,
    Header,
    HostFacts,
    RecordModel,
    SourceInfo,
    TokenCalibration,
    WaitsInfo,
)

_Model = RecordModel

TraceApi = Literal["chat", "responses", "messages", "gemini"]
"""The API a call used (``llm_call.request.api``; ``gemini`` since 1.2); ``agentload.wire``
reads each into the chat form."""


class EndReason(StrEnum):
    """Why a session ended (``SessionRecord.end_reason``: its value is what the trace records;
    a reader keeps a value it does not know as the string it is)."""

    DONE = "done"
    """The orchestrator answered without tool calls, no follow-up left."""
    CONTEXT_TARGET = "context_target"
    """The orchestrator's server-reported prompt tokens reached the target."""
    MAX_ROUNDS = "max_rounds"
    """The orchestrator made its maximum number of calls."""
    WALL_BUDGET = "wall_budget"
    """The session's wall-clock budget ran out."""
    ENDPOINT_ERROR = "endpoint_error"
    """The endpoint kept failing after the retries."""
    CONTEXT_LIMIT = "context_limit"
    """The endpoint refused a prompt longer than its context."""
    LENGTH = "length"
    """The orchestrator's replies kept being cut at ``max_tokens`` (``finish_reason: length``)
    after the continuations the harness asks for."""
    DISK_QUOTA = "disk_quota"
    """A command wrote past the sandbox's disk quota (``sandbox.disk``) and was killed."""
    INTERRUPTED = "interrupted"
    """Ctrl-C / SIGTERM."""
    ERROR = "error"
    """A bug or an unexpected failure (the message says which)."""


class SessionRecord(_Model):
    """Start (or end, when ``end_ns`` is set) of one session; a session may be written twice."""

    type: Literal["session"] = "session"
    id: str = Field(description="session id, unique in the file")
    start_ns: int = Field(description="monotonic ns when the session started")
    end_ns: int | None = Field(default=None, description="monotonic ns when it ended")
    end_reason: EndReason | str | None = Field(
        default=None,
        union_mode="left_to_right",  # a known reason is its kind, another one its string
        description="why it ended: " + ", ".join(EndReason) + " (another value: kept as it is)",
    )
    workspace: str | None = Field(default=None, description="workspace recipe")
    sandbox: str | None = Field(default=None, description="sandbox kind: docker or local")
    eval_passed: bool | None = Field(default=None, description="success check result (eval runs)")
    meta: dict[str, Any] = Field(default_factory=dict, description="free-form facts")


class ContextPolicy(StrEnum):
    """How an agent's context starts (``AgentRecord.context_policy``)."""

    FRESH = "fresh"
    """Its own instructions and task (a delegated brief)."""
    FORKED = "forked"
    """Its parent's history, the spawning call in it (Codex's and Qwen Code's forks)."""


SIDE_ROLE = "side"
"""The role of a side agent: a root agent that made calls of its own during a session (a title,
a summary, a small-model check) beside the session's main agent (``agentload record``)."""


class AgentRecord(_Model):
    """One agent of a session's agent tree (written at start; again with ``end_ns`` at end)."""

    type: Literal["agent"] = "agent"
    id: str = Field(description="agent id, unique in the file")
    session_id: str = Field(description="session the agent belongs to")
    parent_agent_id: str | None = Field(default=None, description="agent that delegated to it")
    parent_tool_call_id: str | None = Field(default=None, description="the delegate tool call")
    role: str = Field(description="orchestrator, code_search, test_runner, file_reader, ...")
    context_policy: str = Field(
        default=ContextPolicy.FRESH,
        description="how its context starts: fresh, or forked (its parent's history)",
    )
    start_ns: int = Field(description="monotonic ns when it started")
    end_ns: int | None = Field(default=None, description="monotonic ns when it returned")


class BlobRecord(_Model):
    """Content-addressed content: one chat message, or one tool-schema list."""

    type: Literal["blob"] = "blob"
    id: str = Field(description="blake2b-128 hex of the canonical JSON of `content`")
    kind: Literal["message", "tools", "text", "native"] = Field(
        description="what the content is (native: one field or item of a request body in its "
        "own API, see RequestParams.native)"
    )
    content: Any = Field(description="the message dict / tools list / text")
    tokens: int | None = Field(
        default=None, ge=0, le=MAX_CALL_TOKENS, description="our token count of its framing piece"
    )


class NativeRequest(_Model):
    """A request body in the API the agent sent it in (Responses, Messages, Gemini), as blobs.

    The body is ``{name: blob(id).content for name, id in fields.items()}`` with the field
    ``items_field`` (``input``, ``messages`` or ``contents``) set to ``[blob(i).content for i in items]``:
    each conversation item is stored once, as each chat message is, so a long session stays
    small. Its chat translation is the call's ``messages`` / ``request`` (``agentload.wire``).
    """

    fields: dict[str, str] = Field(
        description="top-level field name -> blob id of its value, in the order sent (the "
        "items field maps to '')"
    )
    items_field: str = Field(description="the field holding the conversation items")
    items: list[str] = Field(default_factory=list, description="blob ids of the items, in order")


class RequestParams(_Model):
    """The request parameters as sent (besides messages)."""

    model: str = Field(description="model name sent")
    max_tokens: int | None = Field(default=None, description="max (completion) tokens")
    temperature: float | None = Field(default=None, description="sampling temperature")
    top_p: float | None = Field(default=None, description="nucleus sampling top_p")
    seed: int | None = Field(default=None, description="sampling seed sent, if any")
    tools: str | None = Field(default=None, description="blob id of the tools list")
    tool_choice: Any = Field(default=None, description="tool_choice as sent")
    stream: bool = Field(default=True, description="whether the response was streamed")
    extra: dict[str, Any] = Field(default_factory=dict, description="other body fields sent")
    api: TraceApi = Field(
        default="chat",
        description="the API the call used: chat (OpenAI Chat Completions), responses (OpenAI "
        "Responses), messages (Anthropic Messages), gemini (Google's Gemini API, since 1.2); the "
        "other fields are its chat translation",
    )
    native: NativeRequest | None = Field(
        default=None, description="the body as sent, for a call not in chat (api != chat)"
    )


class ToolCallRef(_Model):
    """A tool call the model emitted."""

    id: str = Field(description="the model's tool_call id")
    name: str = Field(description="function name")
    arguments: str = Field(
        description="JSON string as the history carries it onward: the model's own text, or, "
        "for a malformed call, its repair or `{}` (the model's text is the tool_call record's "
        "raw_arguments)"
    )


class ResponseRecord(_Model):
    """What the endpoint answered."""

    content: str | None = Field(default=None, description="blob id of the assistant message")
    text_len: int = Field(default=0, description="characters of assistant text")
    tool_calls: list[ToolCallRef] = Field(
        default_factory=list, description="tool calls the model emitted, in order"
    )
    finish_reason: str | None = Field(default=None, description="stop, length, tool_calls, ...")


class Usage(_Model):
    """Token counts: the server's when reported, and ours always."""

    prompt_tokens: int | None = Field(
        default=None, ge=0, le=MAX_CALL_TOKENS, description="server-reported prompt tokens"
    )
    completion_tokens: int | None = Field(
        default=None, ge=0, le=MAX_CALL_TOKENS, description="server-reported completion"
    )
    cached_tokens: int | None = Field(
        default=None, ge=0, le=MAX_CALL_TOKENS, description="server-reported cached prompt tokens"
    )
    cache_creation_tokens: int | None = Field(
        default=None,
        ge=0,
        le=MAX_CALL_TOKENS,
        description="server-reported prompt tokens written to its cache",
    )
    prompt_tokens_ours: int = Field(
        ge=0, le=MAX_CALL_TOKENS, description="our count under the framing convention"
    )
    completion_tokens_ours: int | None = Field(
        default=None, ge=0, le=MAX_CALL_TOKENS, description="our count of the output"
    )


class Timings(_Model):
    """Monotonic ns; ``chunk_offsets_ns`` are per-chunk arrival times relative to ``submit_ns``."""

    submit_ns: int = Field(description="when the request was sent")
    first_token_ns: int | None = Field(default=None, description="first content/tool chunk")
    last_token_ns: int | None = Field(default=None, description="last chunk (end of stream)")
    chunk_offsets_ns: list[int] = Field(
        default_factory=list, description="arrival of each chunk, ns after submit_ns"
    )

    @property
    def end_ns(self) -> int:
        """When the answer ended: its last token, else its first, else the submit."""
        return self.last_token_ns or self.first_token_ns or self.submit_ns


class PrefixInfo(_Model):
    """Chained block hashes of the prompt's token sequence, stored incrementally.

    The full list of a call's block hashes is the first ``base_blocks`` hashes of call ``base``
    followed by ``blocks``. Block k's hash covers tokens 0..16(k+1): equal hashes mean an equal
    prefix. Only full blocks are hashed.
    """

    base: str | None = Field(default=None, description="llm_call id whose blocks this extends")
    base_blocks: int = Field(
        default=0, ge=0, le=MAX_CALL_TOKENS, description="blocks taken from the base call"
    )
    blocks: list[str] = Field(default_factory=list, description="new block hashes (16 hex chars)")


class TurnKind(StrEnum):
    """What a call's prompt appends after its agent's previous call."""

    USER = "user"
    """A person's message: a session's first request, a follow-up (a user turn)."""
    TOOL = "tool"
    """Tool results (a sub-agent's summary included), with or without other text."""
    BRIEF = "brief"
    """A sub-agent's first request: the task its parent handed it."""


class LLMCallRecord(_Model):
    """One chat-completion call."""

    type: Literal["llm_call"] = "llm_call"
    id: str = Field(description="call id, unique in the file")
    session_id: str = Field(description="session of the calling agent")
    agent_id: str = Field(description="the calling agent")
    seq: int = Field(ge=0, description="0-based index of the call within its agent")
    request: RequestParams = Field(description="request parameters besides the messages")
    messages: list[str] = Field(description="blob ids of the request messages, in order")
    response: ResponseRecord = Field(default_factory=ResponseRecord, description="the answer")
    usage: Usage = Field(description="token counts: server-reported and ours")
    timings: Timings = Field(description="monotonic ns timestamps of the call")
    depends_on: list[str] = Field(
        default_factory=list,
        description="tool_call / agent ids whose results this prompt appends",
    )
    prefix: PrefixInfo | None = Field(default=None, description="prompt block hashes")
    error: str | None = Field(default=None, description="why the call failed, if it did")
    turn: TurnKind | None = Field(
        default=None,
        description="what the prompt appends after the agent's previous call: user (a user "
        "turn), tool (tool results), brief (a sub-agent's first request); absent: derived "
        "from the messages (agentload.trace.timeline.turn_of)",
    )
    wait_ns: int | None = Field(
        default=None,
        ge=0,
        description="a modeled wait before this call (header.waits): the time a real agent's "
        "loop would have waited beyond the measured gap (a person, a permission prompt)",
    )


class ToolCallRecord(_Model):
    """One tool execution."""

    type: Literal["tool_call"] = "tool_call"
    id: str = Field(description="the model's tool_call id")
    session_id: str = Field(description="session of the emitting agent")
    agent_id: str = Field(description="the agent whose model emitted the call")
    llm_call_id: str = Field(description="the llm_call that emitted it")
    name: str = Field(description="tool name")
    arguments: Any = Field(
        description="parsed arguments, as the history carries them onward (a malformed call's "
        "repaired or `{}`; traces before raw_arguments: the raw string when unparseable)"
    )
    raw_arguments: str | None = Field(
        default=None,
        description="the model's own arguments text, when it differs from what the history "
        "carries (malformed: not valid JSON or not an object; the call was not run)",
    )
    start_ns: int = Field(description="monotonic ns when the tool started")
    end_ns: int = Field(description="monotonic ns when its result was ready")
    exit_code: int | None = Field(default=None, description="process exit code, if any")
    timed_out: bool = Field(default=False, description="the tool hit its timeout")
    output_bytes: int = Field(default=0, ge=0, description="bytes of the tool's output")
    output_tokens: int | None = Field(
        default=None, ge=0, le=MAX_CALL_TOKENS, description="our tokens of the text returned"
    )
    truncated: bool = Field(default=False, description="output was cut to the size limit")
    sandbox_id: str | None = Field(default=None, description="container / sandbox it ran in")
    error: str | None = Field(default=None, description="tool error text, if any")
    child_agent_id: str | None = Field(default=None, description="for delegate: the sub-agent")
    model_call_id: str | None = Field(
        default=None,
        description="the tool_call id the server sent, when it differs from ``id`` (agentload "
        "gives every tool call a seed-derived ``id`` so replays are byte-identical; this keeps "
        "the server's own)",
    )
    observed_by: Literal["proxy"] | None = Field(
        default=None,
        description="None: the harness ran the tool and timed it; 'proxy': the recording proxy "
        "saw the call in a reply and its result in a later request (start_ns: the reply's end; "
        "end_ns: that request's arrival; no exit code)",
    )


class EventRecord(_Model):
    """Something that happened: a retry, an error, a follow-up ... (``trace.events``: the kinds
    and their payloads). ``kind`` is a plain string, compared with ``EventKind``: a kind this
    version does not know (an older file's, another tool's) still reads, as it is."""

    type: Literal["event"] = "event"
    kind: str = Field(description=" | ".join(EventKind) + ", or another kind, read as it is")
    ns: int = Field(description="monotonic ns when it happened")
    session_id: str | None = Field(default=None, description="session it concerns, if any")
    agent_id: str | None = Field(default=None, description="agent it concerns, if any")
    details: dict[str, Any] = Field(default_factory=dict, description="its payload's fields")

    @classmethod
    def of(
        cls,
        payload: EventPayload,
        ns: int,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> EventRecord:
        """The record of ``payload``: its kind, its fields as ``details``."""
        return cls(
            kind=payload.kind,
            ns=ns,
            session_id=session_id,
            agent_id=agent_id,
            details=payload.details(),
        )


Record = Annotated[
    Header
    | SessionRecord
    | AgentRecord
    | BlobRecord
    | LLMCallRecord
    | ToolCallRecord
    | EventRecord,
    Field(discriminator="type"),
]
record_adapter: TypeAdapter[Record] = TypeAdapter(Record)
