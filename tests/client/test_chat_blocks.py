"""A Chat Completions stream read a block at a time counts the same content events as read an
event at a time: the block fast paths (a run of the stream's plain deltas counted by the bytes
around their text, ``textrun.Template``; then ``chatsse._text_deltas``) over real HTTP, against
the count a JSON parse of every event gives, for streams written whole, in small pieces and a
few events at a time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest

from agentload.client.stream import StreamClient


def _chunk(delta: dict[str, Any], *, index: int = 0, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


def _text(s: str) -> dict[str, Any]:
    return _chunk({"content": s})


# Each stream: a list of SSE lines (``data: {...}``, comments, ``[DONE]``) without newlines.
STREAMS: dict[str, list[bytes]] = {
    "plain text": [
        b"data: " + orjson.dumps(_chunk({"role": "assistant", "content": ""})),
        *(b"data: " + orjson.dumps(_text(f"tok{i} ")) for i in range(200)),
        b"data: " + orjson.dumps(_chunk({}, finish="stop")),
        b"data: [DONE]",
    ],
    "text that looks like events": [
        b"data: " + orjson.dumps(_text("first")),
        b"data: " + orjson.dumps(_text('data: {"content":"x"} "finish_reason":null')),
        b"data: " + orjson.dumps(_text("")),
        b"data: " + orjson.dumps(_text('\\"content\\":\\"y\\"')),
        *(b"data: " + orjson.dumps(_text("z")) for _ in range(50)),
        b"data: " + orjson.dumps(_chunk({}, finish="length")),
        b"data: [DONE]",
    ],
    "comments, keep-alives and empty deltas": [
        b"data: " + orjson.dumps(_text("a")),
        b': keep-alive {"content":"not an event"}',
        *(b"data: " + orjson.dumps(_text("b")) for _ in range(30)),
        b"data: " + orjson.dumps(_chunk({"content": None})),
        b"data: " + orjson.dumps(_chunk({})),
        *(b"data: " + orjson.dumps(_text("c")) for _ in range(30)),
        b"data: " + orjson.dumps(_chunk({}, finish="stop")),
        b"data: [DONE]",
    ],
    "two choices, tools and reasoning": [
        b"data: " + orjson.dumps(_text("a")),
        *(b"data: " + orjson.dumps(_chunk({"content": "x"}, index=i % 2)) for i in range(20)),
        *(b"data: " + orjson.dumps(_chunk({"reasoning_content": "r"})) for _ in range(10)),
        *(
            b"data: "
            + orjson.dumps(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}))
            for _ in range(10)
        ),
        b"data: " + orjson.dumps(_chunk({"content": "y", "reasoning_content": "r"})),
        b"data: " + orjson.dumps(_chunk({}, finish="tool_calls")),
        b"data: [DONE]",
    ],
    "shapes the template must not take": [
        *(b"data: " + orjson.dumps(_text(f"t{i}")) for i in range(20)),
        b"data: " + orjson.dumps(_text('"},"finish_reason":null}]}')),  # its tail, as text
        b"data: " + orjson.dumps(_text("data: x")),
        *(b"data: " + orjson.dumps(_text("a")) for _ in range(5)),
        b"data: " + orjson.dumps(_chunk({"content": "", "tool_calls": [{"index": 0}]})),
        b"data: " + orjson.dumps(_chunk({"content": "b", "reasoning_content": "r"})),
        *(
            b"data: " + orjson.dumps({**_text("u"), "usage": {"completion_tokens": i}})
            for i in range(5)
        ),
        *(b"data: " + orjson.dumps(_text("c")) for _ in range(5)),
        b"data: " + orjson.dumps(_chunk({"content": "\\"})),  # a text ending in a backslash
        b"data: " + orjson.dumps(_chunk({"content": "last"}, finish="length")),
        b"data: [DONE]",
    ],
    "usage reported mid-stream (vLLM's continuous_usage_stats)": [
        *(b"data: " + orjson.dumps(_text(f"t{i}")) for i in range(10)),
        *(
            b"data: " + orjson.dumps({**_text("u"), "usage": {"completion_tokens": 10 + i}})
            for i in range(3)
        ),
        *(b"data: " + orjson.dumps(_text(f"t{i}")) for i in range(5)),
        b"data: " + orjson.dumps(_chunk({}, finish="stop")),
        b"data: [DONE]",
    ],
    "a usage report of its own mid-stream": [  # first in a write of 3 events
        *(b"data: " + orjson.dumps(_text(f"t{i}")) for i in range(9)),
        b"data: " + orjson.dumps({"id": "c1", "choices": [], "usage": {"completion_tokens": 20}}),
        *(b"data: " + orjson.dumps(_text(f"t{i}")) for i in range(5)),
        b"data: " + orjson.dumps(_chunk({}, finish="stop")),
        b"data: [DONE]",
    ],
    "an empty text mid-stream": [
        *(b"data: " + orjson.dumps(_text(f"t{i}")) for i in range(10)),
        b"data: " + orjson.dumps(_text("")),
        *(b"data: " + orjson.dumps(_text(f"t{i}")) for i in range(5)),
        b"data: " + orjson.dumps(_chunk({}, finish="stop")),
        b"data: [DONE]",
    ],
    "a new created every few events (llama.cpp's key order)": [
        b"data: "
        + orjson.dumps(
            {
                "choices": [{"finish_reason": None, "index": 0, "delta": {"content": f"w{i}"}}],
                "created": 1_700_000_000 + i // 7,
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
            }
        )
        for i in range(60)
    ]
    + [b"data: " + orjson.dumps(_chunk({}, finish="stop")), b"data: [DONE]"],
    "spaced JSON": [
        b"data: " + json.dumps(_text("a")).encode(),
        *(b"data: " + json.dumps(_text("b")).encode() for _ in range(40)),
        b"data: " + json.dumps(_chunk({}, finish="stop")).encode(),
        b"data: [DONE]",
    ],
}


SEPARATORS = {"plain text, CRLF line ends": b"\r\n\r\n"}
"""How a stream's events are ended (default: a blank line after each, with LF ends)."""
STREAMS["plain text, CRLF line ends"] = STREAMS["plain text"]


def _expected(lines: list[bytes]) -> tuple[int, str | None, int | None]:
    """Content events, the finish reason and the last usage report's completion tokens, by a
    JSON parse of every event (what the reader must find)."""
    n, finish, tokens = 0, None, None
    for line in lines:
        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
            continue
        ev = json.loads(line[5:])
        tokens = (ev.get("usage") or {}).get("completion_tokens", tokens)
        if not ev["choices"]:
            continue
        ch = ev["choices"][0]
        finish = ch.get("finish_reason") or finish
        d = ch.get("delta") or {}
        n += bool(d.get("content") or d.get("reasoning_content") or d.get("tool_calls"))
    return n, finish, tokens


@asynccontextmanager
async def _raw_server(parts: list[bytes]) -> AsyncIterator[str]:
    """An HTTP/1.1 server on 127.0.0.1 answering every request with ``payload`` as an SSE body
    (chunked), written a part at a time with a pause between parts."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(h.split(b":", 1)[1])
            for h in head.split(b"\r\n")
            if h.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for part in parts:
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
            await asyncio.sleep(0.001 if len(parts) > 1 else 0)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        await server.wait_closed()


def _parts(lines: list[bytes], payload: bytes, piece: int, sep: bytes) -> list[bytes]:
    """``payload`` in writes of ``piece`` bytes, or (negative) of ``-piece`` whole events."""
    if piece > 0:
        return [payload[i : i + piece] for i in range(0, len(payload), piece)]
    k = -piece
    return [b"".join(line + sep for line in lines[i : i + k]) for i in range(0, len(lines), k)]


@pytest.mark.parametrize("name", sorted(STREAMS))
@pytest.mark.parametrize("piece", [1 << 20, 97, 7, -3], ids=["whole", "97B", "7B", "3-events"])
def test_block_reading_counts_every_content_event_once(name: str, piece: int) -> None:
    lines = STREAMS[name]
    sep = SEPARATORS.get(name, b"\n\n")
    payload = b"".join(line + sep for line in lines)
    expected = _expected(lines)

    async def go() -> tuple[tuple[int, Any, Any], Any]:
        async with _raw_server(_parts(lines, payload, piece, sep)) as base:
            client = StreamClient(base, max_connections=2, timeout_s=10)
            try:
                out = await client.chat(orjson.dumps({"model": "m", "messages": []}))
            finally:
                await client.aclose()
        return (len(out.chunk_ns), out.finish_reason, out.completion_tokens), out.error_kind

    got, error = asyncio.run(go())
    assert error is None
    assert expected[1] in {"stop", "length", "tool_calls"}
    assert got == expected


def test_the_fast_path_takes_plain_text_and_refuses_everything_else() -> None:
    from agentload.client.chatsse import _text_deltas

    def block(*evs: dict[str, Any], dump: Callable[[Any], bytes] = orjson.dumps) -> bytes:
        return b"".join(b"data: " + dump(e) + b"\n\n" for e in evs)

    assert _text_deltas(block(_text("a"), _text("b"), _text("")))
    assert not _text_deltas(block(_text("a"), _chunk({}, finish="stop")))
    assert not _text_deltas(block(_text("a")) + b"data: [DONE]\n\n")
    assert not _text_deltas(block(_text("a"), _chunk({"content": "x"}, index=1)))
    assert not _text_deltas(block(_chunk({"reasoning_content": "r"})))
    assert not _text_deltas(block(_text("a")) + b": comment\n\n")
    assert not _text_deltas(block(_text("data: x")))  # text holding "data:": parsed per line
    assert not _text_deltas(block({**_text("a"), "usage": {"completion_tokens": 1}}))
    assert not _text_deltas(block({**_text("a"), "error": {"message": "x"}}))


def test_a_template_is_learned_from_plain_deltas_only_and_counts_only_their_runs() -> None:
    from agentload.client.textrun import Template

    def line(ev: dict[str, Any]) -> bytes:
        return b"data: " + orjson.dumps(ev)

    def block(*evs: dict[str, Any]) -> bytes:
        return b"".join(line(e) + b"\n\n" for e in evs)

    tpl = Template.learn(line(_text("a")))
    assert tpl is not None
    assert (
        tpl.head.endswith(b'"delta":{"content":"') and tpl.tail == b'"},"finish_reason":null}]}\n'
    )
    for not_plain in (
        _text(""),
        _chunk({"content": "a"}, finish="stop"),
        _chunk({"content": "a"}, index=1),
        _chunk({"reasoning_content": "r"}),
        {**_text("a"), "usage": {"completion_tokens": 1}},
        {**_text("a"), "error": {"message": "x"}},
    ):
        assert Template.learn(line(not_plain)) is None, not_plain
    assert Template.learn(b"data: [DONE]") is None
    assert Template.learn(b": comment") is None

    plain = block(_text("a"), _text('b"\\ data: {"content":"x"}'), _text("c"))

    def run(block: bytes) -> tuple[int, int]:
        return tpl.run(block, 0, len(block))

    assert run(plain) == (3, len(plain) - 1)  # up to the last tail; its blank line after
    assert run(b"\n" + plain) == (3, len(plain))  # a blank line before it
    assert tpl.run(b'data: {"x":1}\n\n' + plain, 15, 15 + len(plain)) == (3, 14 + len(plain))
    assert tpl.run(plain + plain, 0, len(plain)) == (3, len(plain) - 1)  # not past the stop
    rest = block(_chunk({}, finish="stop")) + b"data: [DONE]\n\n"
    assert run(plain + rest) == (3, len(plain) - 1)
    assert run(rest) == (0, 0)
    for spoilt in (
        b": ping\n\n" + plain,  # a comment first
        block(_text("a")) + b": ping\n\n" + block(_text("c")),  # a comment between
        block(_text("a"), _text(""), _text("c")),  # an empty text
        block(_text("a"), {**_text("b"), "usage": {"x": 1}}, _text("c")),
        block(_text("a"), _chunk({"content": "x"}, index=1)),  # the same tail, another choice
        block(_text("a")) + b"\n" + block(_text("c")),  # two blank lines
        block(_text("a")).replace(b"\n\n", b"\n") + block(_text("c")),  # none
    ):
        assert run(spoilt) == (0, 0), spoilt
