"""Turn an LLM call as sent/received into trace records: blobs once, our token counts, prefix.

Used by ``generate``'s agents (and any other in-process capture):

    cap = CallCapture(writer, ChatTokenCounter(header.tokenizer))
    rec = await cap.record(ObservedCall(call_id=..., session_id=..., agent_id=..., seq=...,
                                        body=body, content=text, tool_calls=[...],
                                        finish_reason=..., usage=usage, timings=Timings(...),
                                        depends_on=[...]))

Tokenizing and block hashing are incremental: token ids are cached per message blob and the
prefix hasher resumes from the longest prompt prefix it has seen, so a call costs O(new
messages) whatever its context length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agentload.tokenizer import ChatTokenCounter
from agentload.trace.prefix import PrefixHasher, PromptPrefix, hash_prompt
from agentload.trace.schema import (
    MAX_CALL_TOKENS,
    LLMCallRecord,
    NativeRequest,
    PrefixInfo,
    RequestParams,
    ResponseRecord,
    Timings,
    ToolCallRef,
    TraceApi,
    TurnKind,
    Usage,
)
from agentload.trace.writer import TraceWriter

__all__ = ["CallCapture", "ObservedCall", "assistant_message"]

_PARAM_KEYS = ("model", "max_tokens", "temperature", "top_p", "seed", "tool_choice", "stream")


def assistant_message(
    content: str | None, tool_calls: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """The assistant message as the next request will carry it (OpenAI shape)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return msg


@dataclass(frozen=True, kw_only=True)
class ObservedCall:
    """One model call as it was seen: where it sits in the trace, the request body exactly as
    sent (messages, tools, parameters), the reply (text, OpenAI-shaped ``tool_calls``, finish
    reason, the server's ``usage`` object or None), its timings and, if it failed, why."""

    call_id: str
    session_id: str
    agent_id: str
    seq: int
    body: dict[str, Any]
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str | None
    usage: dict[str, Any] | None
    timings: Timings
    depends_on: list[str] | None = None
    error: str | None = None
    api: TraceApi = "chat"
    native: NativeRequest | None = None
    turn: TurnKind | None = None
    wait_ns: int | None = None


class CallCapture:
    """Builds ``llm_call`` records (see the module docstring). One per trace writer."""

    def __init__(self, writer: TraceWriter, counter: ChatTokenCounter) -> None:
        self.writer = writer
        self.counter = counter
        self.hasher = PrefixHasher(writer.header.block_size)

    async def record(
        self, call: ObservedCall, *, scrubbed: list[tuple[Any, str]] | None = None
    ) -> LLMCallRecord:
        """Write the blobs this call needs and the ``llm_call`` record; return the record.

        ``scrubbed``: ``writer.scrubbed`` of each message of ``call.body``, when the caller has
        it already.
        """
        if scrubbed is None:
            scrubbed = [self.writer.scrubbed(m) for m in call.body["messages"]]
        messages = [m for m, _ in scrubbed]
        tools: list[dict[str, Any]] | None = _tools(call.body)
        if tools:
            tools = self.writer.scrubbed(tools)[0]
        # Everything that reads what the agent or the server sent comes before hash_prompt:
        # once it ran, later calls may resume from this one (prefix.base), so it must be written.
        request = request_params(call.body, None, call.api, call.native)
        pp = hash_prompt(
            self.hasher,
            self.counter,
            messages,
            tools,
            owner=call.call_id,
            message_ids=[mid for _, mid in scrubbed],
        )
        await self._prompt_blobs(messages, tools, pp)
        reply_id = await self._reply_blob(call.content, call.tool_calls)
        rec = LLMCallRecord(
            id=call.call_id,
            session_id=call.session_id,
            agent_id=call.agent_id,
            seq=call.seq,
            request=request.model_copy(update={"tools": pp.tools_id}),
            messages=pp.message_ids,
            response=_response(call, reply_id),
            usage=self._usage(call.usage, pp.state.tokens, call.content, call.tool_calls),
            timings=call.timings,
            depends_on=list(call.depends_on or ()),
            prefix=prefix_info(pp),
            error=call.error,
            turn=call.turn,
            wait_ns=call.wait_ns,
        )
        await self.writer.write(rec)
        return rec

    async def _prompt_blobs(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, pp: PromptPrefix
    ) -> None:
        """The tools list and each message as a blob, each written once per trace."""
        if tools and pp.tools_id and not self.writer.has_blob(pp.tools_id):
            n = len(self.counter.ids_for_tools(tools, pp.tools_id))
            await self.writer.blob("tools", tools, n)
        for m, mid in zip(messages, pp.message_ids, strict=True):
            if not self.writer.has_blob(mid):
                await self.writer.blob("message", m, len(self.counter.ids_for_message(m, mid)))

    async def _reply_blob(
        self, content: str | None, tool_calls: list[dict[str, Any]] | None
    ) -> str | None:
        """The reply as the next request will carry it, as a blob; its id (None: no reply)."""
        if not (content or tool_calls):
            return None
        reply, reply_id = self.writer.scrubbed(assistant_message(content, tool_calls))
        # Token ids of the reply are cached now: the next call carries it in its history.
        if not self.writer.has_blob(reply_id):
            await self.writer.blob(
                "message", reply, len(self.counter.ids_for_message(reply, reply_id))
            )
        return reply_id

    def _usage(
        self,
        usage: dict[str, Any] | None,
        prompt_tokens_ours: int,
        content: str | None,
        tool_calls: list[dict[str, Any]] | None,
    ) -> Usage:
        """The server's usage (None where it sent none) beside our own counts."""
        u = usage if isinstance(usage, dict) else {}
        details = u.get("prompt_tokens_details") or {}
        return Usage(
            prompt_tokens=_count(u.get("prompt_tokens")),
            completion_tokens=_count(u.get("completion_tokens")),
            cached_tokens=_count(details.get("cached_tokens"))
            if isinstance(details, dict)
            else None,
            cache_creation_tokens=_count(u.get("cache_creation_tokens")),
            prompt_tokens_ours=prompt_tokens_ours,
            completion_tokens_ours=self.counter.count_text(content or "")
            + sum(
                self.counter.count_text(str(tc.get("function", {}).get("arguments", "")))
                for tc in tool_calls or ()
            ),
        )


def _response(call: ObservedCall, reply_id: str | None) -> ResponseRecord:
    """The reply as the record keeps it: its blob, text length, tool calls and finish reason."""
    return ResponseRecord(
        content=reply_id,
        text_len=len(call.content or ""),
        tool_calls=[
            ToolCallRef(
                id=str(tc.get("id", "")),
                name=str(tc.get("function", {}).get("name", "")),
                arguments=str(tc.get("function", {}).get("arguments", "")),
            )
            for tc in call.tool_calls or ()
        ],
        finish_reason=call.finish_reason,
    )


def prefix_info(pp: PromptPrefix) -> PrefixInfo:
    """The prompt's blocks as a trace stores them: the blocks past the call it resumed from."""
    base, state = pp.base, pp.state
    return PrefixInfo(
        base=base.owner if base else None,
        base_blocks=len(base.blocks) if base else 0,
        blocks=list(state.blocks[len(base.blocks) :] if base else state.blocks),
    )


def _tools(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The request's tools list; None when it has none, or sent one that is not a list of
    objects (``request_params`` keeps that under ``extra``)."""
    tools = body.get("tools")
    if isinstance(tools, list) and tools and all(isinstance(t, dict) for t in tools):
        return tools
    return None


def _count(value: Any) -> int | None:
    """A token count as a server or an agent sent it, or None when it is not one (a string, a
    bool, a negative or float number, or one past ``MAX_CALL_TOKENS``): the call is kept, the
    value is not (the trace's reader would refuse it)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_CALL_TOKENS:
        return value
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    return None


def _real(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def request_params(
    body: dict[str, Any],
    tools_id: str | None,
    api: TraceApi = "chat",
    native: NativeRequest | None = None,
) -> RequestParams:
    """The request's parameters; fields we do not model are kept under ``extra``, and so is a
    modelled field whose value is not of its type (``"max_tokens": "lots"`` was forwarded and
    answered: the call is recorded with the value as sent, never lost)."""
    extra = {
        k: v
        for k, v in body.items()
        if k not in (*_PARAM_KEYS, "messages", "tools", "max_completion_tokens")
    }
    if body.get("tools") and _tools(body) is None:
        extra["tools"] = body["tools"]
    typed: dict[str, Any] = {}
    length_key = "max_tokens" if "max_tokens" in body else "max_completion_tokens"
    for key, field, read in (
        (length_key, "max_tokens", _count),
        ("temperature", "temperature", _real),
        ("top_p", "top_p", _real),
        ("seed", "seed", _int),
    ):
        value = body.get(key)
        typed[field] = read(value)
        if value is not None and typed[field] is None:
            extra[key] = value
    return RequestParams(
        model=str(body.get("model", "")),
        max_tokens=typed["max_tokens"],
        temperature=typed["temperature"],
        top_p=typed["top_p"],
        seed=typed["seed"],
        tools=tools_id,
        tool_choice=body.get("tool_choice"),
        stream=bool(body.get("stream", False)),
        extra=extra,
        api=api,
        native=native,
    )
