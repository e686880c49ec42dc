"""Turn an LLM call as sent/received into trace records: blobs once, our token counts, prefix.

Used by ``generate``'s agents (and any other in-process capture):

    cap = CallCapture(writer, ChatTokenCounter(header.tokenizer))
    rec = await cap.llm_call(call_id=..., session_id=..., agent_id=..., seq=..., body=body,
                             content=text, tool_calls=[...], finish_reason=..., usage=usage,
                             timings=Timings(...), depends_on=[...])

Tokenizing and block hashing are incremental: token ids are cached per message blob and the
prefix hasher resumes from the longest prompt prefix it has seen, so a call costs O(new
messages) whatever its context length.
"""

from __future__ import annotations

from typing import Any

from agentload.hashing import content_id
from agentload.recorder.prefix import PrefixHasher, hash_prompt
from agentload.recorder.schema import (
    LLMCallRecord,
    PrefixInfo,
    RequestParams,
    ResponseRecord,
    Timings,
    ToolCallRef,
    Usage,
)
from agentload.recorder.writer import TraceWriter
from agentload.tokenizer import ChatTokenCounter

__all__ = ["CallCapture", "assistant_message"]

_PARAM_KEYS = ("model", "max_tokens", "temperature", "top_p", "seed", "tool_choice", "stream")


def assistant_message(
    content: str | None, tool_calls: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """The assistant message as the next request will carry it (OpenAI shape)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return msg


class CallCapture:
    """Builds ``llm_call`` records (see the module docstring). One per trace writer."""

    def __init__(self, writer: TraceWriter, counter: ChatTokenCounter) -> None:
        self.writer = writer
        self.counter = counter
        self.hasher = PrefixHasher(writer.header.block_size)

    async def llm_call(
        self,
        *,
        call_id: str,
        session_id: str,
        agent_id: str,
        seq: int,
        body: dict[str, Any],
        content: str | None,
        tool_calls: list[dict[str, Any]] | None,
        finish_reason: str | None,
        usage: dict[str, Any] | None,
        timings: Timings,
        depends_on: list[str] | None = None,
        error: str | None = None,
    ) -> LLMCallRecord:
        """Write the blobs this call needs and the ``llm_call`` record; return the record.

        ``body`` is the request body exactly as sent (messages, tools, parameters);
        ``usage`` the server's usage object (or None); ``tool_calls`` OpenAI-shaped dicts.
        """
        messages: list[dict[str, Any]] = body["messages"]
        tools: list[dict[str, Any]] | None = body.get("tools") or None
        pp = hash_prompt(self.hasher, self.counter, messages, tools, owner=call_id)
        tools_id, msg_ids, state, base = pp.tools_id, pp.message_ids, pp.state, pp.base
        if tools and tools_id and not self.writer.has_blob(tools_id):
            await self.writer.blob("tools", tools, len(self.counter.ids_for_tools(tools, tools_id)))
        for m, mid in zip(messages, msg_ids, strict=True):
            if not self.writer.has_blob(mid):
                await self.writer.blob("message", m, len(self.counter.ids_for_message(m, mid)))
        prefix = PrefixInfo(
            base=base.owner if base else None,
            base_blocks=len(base.blocks) if base else 0,
            blocks=list(state.blocks[len(base.blocks) :] if base else state.blocks),
        )

        reply = assistant_message(content, tool_calls)
        reply_id = None
        if content or tool_calls:
            # Token ids of the reply are cached now: the next call carries it in its history.
            reply_id = content_id(reply)
            if not self.writer.has_blob(reply_id):
                tokens = len(self.counter.ids_for_message(reply, reply_id))
                await self.writer.blob("message", reply, tokens)
        extra = {
            k: v
            for k, v in body.items()
            if k not in (*_PARAM_KEYS, "messages", "tools", "max_completion_tokens")
        }
        params = RequestParams(
            model=str(body.get("model", "")),
            max_tokens=body.get("max_tokens", body.get("max_completion_tokens")),
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            seed=body.get("seed"),
            tools=tools_id,
            tool_choice=body.get("tool_choice"),
            stream=bool(body.get("stream", False)),
            extra=extra,
        )
        u = usage or {}
        details = u.get("prompt_tokens_details") or {}
        rec = LLMCallRecord(
            id=call_id,
            session_id=session_id,
            agent_id=agent_id,
            seq=seq,
            request=params,
            messages=msg_ids,
            response=ResponseRecord(
                content=reply_id,
                text_len=len(content or ""),
                tool_calls=[
                    ToolCallRef(
                        id=str(tc.get("id", "")),
                        name=str(tc.get("function", {}).get("name", "")),
                        arguments=str(tc.get("function", {}).get("arguments", "")),
                    )
                    for tc in tool_calls or ()
                ],
                finish_reason=finish_reason,
            ),
            usage=Usage(
                prompt_tokens=u.get("prompt_tokens"),
                completion_tokens=u.get("completion_tokens"),
                cached_tokens=details.get("cached_tokens") if isinstance(details, dict) else None,
                prompt_tokens_ours=state.tokens,
                completion_tokens_ours=self.counter.count_text(content or "")
                + sum(
                    self.counter.count_text(str(tc.get("function", {}).get("arguments", "")))
                    for tc in tool_calls or ()
                ),
            ),
            timings=timings,
            depends_on=list(depends_on or ()),
            prefix=prefix,
            error=error,
        )
        await self.writer.write(rec)
        return rec
