"""Response bodies as OpenAI sends them: SSE chunk streams and non-streaming JSON.

Streaming events are built from pre-encoded byte templates (one per response), one event per
token: the role chunk, content deltas, for each tool call a header delta (index, id, type,
name, empty arguments) then argument fragments, the finish chunk, the usage chunk when
``stream_options.include_usage`` is set, and ``data: [DONE]``. ``Rendered.token_pos[k]`` says
how many events may be sent once ``k + 1`` tokens are generated, so the server can pace them
(``paced``: the events sent as the engine generates tokens).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "Rendered",
    "Reply",
    "js_string",
    "paced",
    "render_json",
    "render_stream",
    "usage_event",
    "usage_obj",
]

_JSON_CACHE: dict[str, bytes] = {}
_WRITE_BYTES = 65536


def js_string(piece: str) -> bytes:
    b = _JSON_CACHE.get(piece)
    if b is None:
        b = orjson.dumps(piece)
        if len(_JSON_CACHE) < 200_000:
            _JSON_CACHE[piece] = b
    return b


@dataclass
class Reply:
    """What the server answers: text pieces, tool calls (id, name, argument pieces), finish."""

    content_pieces: list[str]
    tool_calls: list[tuple[str, str, list[str]]]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0

    @property
    def content(self) -> str:
        return "".join(self.content_pieces)


def usage_obj(r: Reply) -> dict[str, Any]:
    return {
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "total_tokens": r.prompt_tokens + r.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": r.cached_tokens},
    }


@dataclass
class Rendered:
    """SSE events of one response and the event index reached after each token."""

    events: list[bytes]
    token_pos: list[int]
    head: int  # events that go out with the first token (role chunk)


async def paced(
    r: Rendered, ready: AsyncIterator[int], on_first: Callable[[], None]
) -> AsyncIterator[bytes]:
    """``r``'s events, sent as tokens are generated (``ready`` yields how many at each step),
    in writes of about ``_WRITE_BYTES``; ``on_first`` runs when the first tokens are ready."""
    events, pos = r.events, r.token_pos
    sent = 0
    generated = 0
    first = True
    async for n in ready:
        if first:
            first = False
            on_first()
        generated += n
        upto = pos[min(generated, len(pos)) - 1] if pos else r.head
        while sent < upto:
            stop, size = sent, 0
            while stop < upto and size < _WRITE_BYTES:
                size += len(events[stop])
                stop += 1
            yield b"".join(events[sent:stop])
            sent = stop
    if sent < len(events):
        yield b"".join(events[sent:])


def _chunk_head(rid: str, created: int, model: str) -> bytes:
    """``data: {"id":..,"object":"chat.completion.chunk",..,"choices":`` of every chunk."""
    return (
        b'data: {"id":"'
        + rid.encode()
        + b'","object":"chat.completion.chunk","created":'
        + str(created).encode()
        + b',"model":'
        + js_string(model)
        + b',"system_fingerprint":"fp_agentload","choices":'
    )


def render_stream(r: Reply, rid: str, created: int, model: str, include_usage: bool) -> Rendered:
    """All SSE events of a streamed response (usage is filled in when the last event is built)."""
    prefix = _chunk_head(rid, created, model) + b'[{"index":0,"delta":'
    tail = b',"usage":null}\n\n' if include_usage else b"}\n\n"
    open_suffix = b',"logprobs":null,"finish_reason":null}]' + tail
    events: list[bytes] = [prefix + b'{"role":"assistant","content":""}' + open_suffix]
    token_pos: list[int] = []
    pre_c = prefix + b'{"content":'
    suf_c = b"}" + open_suffix
    for p in r.content_pieces:
        events.append(pre_c + js_string(p) + suf_c)
        token_pos.append(len(events))
    for i, (cid, name, arg_pieces) in enumerate(r.tool_calls):
        idx = str(i).encode()
        events.append(
            prefix
            + b'{"tool_calls":[{"index":'
            + idx
            + b',"id":"'
            + cid.encode()
            + b'","type":"function","function":{"name":'
            + js_string(name)
            + b',"arguments":""}}]}'
            + open_suffix
        )
        pre_a = prefix + b'{"tool_calls":[{"index":' + idx + b',"function":{"arguments":'
        suf_a = b"}}]}" + open_suffix
        for p in arg_pieces:
            events.append(pre_a + js_string(p) + suf_a)
            token_pos.append(len(events))
    events.append(
        prefix + b'{},"logprobs":null,"finish_reason":"' + r.finish_reason.encode() + b'"}]' + tail
    )
    if include_usage:
        events.append(usage_event(r, rid, created, model))
    events.append(b"data: [DONE]\n\n")
    return Rendered(events, token_pos, 1)


def usage_event(r: Reply, rid: str, created: int, model: str) -> bytes:
    """The final usage chunk (``choices`` empty), sent when ``include_usage`` is set."""
    return _chunk_head(rid, created, model) + b'[],"usage":' + orjson.dumps(usage_obj(r)) + b"}\n\n"


def render_json(r: Reply, rid: str, created: int, model: str) -> bytes:
    """The non-streaming ``chat.completion`` object."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": r.content if (r.content or not r.tool_calls) else None,
        "refusal": None,
    }
    if r.tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": "".join(a)}}
            for cid, name, a in r.tool_calls
        ]
    return orjson.dumps(
        {
            "id": rid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_agentload",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": r.finish_reason}
            ],
            "usage": usage_obj(r),
        }
    )
