"""Messages are stored once; prefix block hashes are incremental and equal to a from-scratch pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import zstandard

from agentload.hashing import content_id
from agentload.tokenizer import PRIMING, ChatTokenCounter, render_message, render_tools
from agentload.trace import (
    CallCapture,
    ObservedCall,
    Timings,
    TraceWriter,
    assistant_message,
    load_trace,
)
from agentload.trace.prefix import PrefixHasher, chain_blocks

from .conftest import TOOLS, header, write_session


def decompressed(path: Path) -> bytes:
    out = b""
    data = path.read_bytes()
    while data:
        d = zstandard.ZstdDecompressor().decompressobj()
        out += d.decompress(data)
        data = d.unused_data
    return out


class CountingTokenizer:
    """Wraps the real tokenizer and records how many characters it was asked to encode."""

    def __init__(self, name: str = "o200k_base") -> None:
        from agentload.tokenizer import get_tokenizer

        self.inner = get_tokenizer(name)
        self.name = name
        self.chars = 0

    def encode(self, text: str) -> list[int]:
        self.chars += len(text)
        return self.inner.encode(text)


def scratch_ids(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    """Token ids of a whole prompt, each piece tokenized from scratch (the convention)."""
    from agentload.tokenizer import get_tokenizer

    tok = get_tokenizer("o200k_base")
    ids: list[int] = []
    if tools:
        ids += tok.encode(render_tools(tools))
    for m in messages:
        ids += tok.encode(render_message(m))
    ids += tok.encode(PRIMING)
    return ids


async def test_hundred_call_growing_session_stores_each_message_once(tmp_path: Path) -> None:
    path = tmp_path / "grow.agentload.jsonl.zst"
    h = header()
    tok = CountingTokenizer()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "MARKER-7f3a. " + "You are an orchestrator. " * 200},
        {"role": "user", "content": "Refactor the parser."},
    ]
    bodies = []
    async with TraceWriter(path, h) as w:
        cap = CallCapture(w, ChatTokenCounter(tok))
        for seq in range(100):
            body = {"model": "m", "messages": list(messages), "tools": TOOLS, "stream": True}
            bodies.append(body)
            content = f"Call {seq}: reading module_{seq}.py"
            tc = [
                {
                    "id": f"t{seq}",
                    "type": "function",
                    "function": {"name": "search_code", "arguments": f'{{"query":"q{seq}"}}'},
                }
            ]
            rec = await cap.record(
                ObservedCall(
                    call_id=f"c{seq}",
                    session_id="s",
                    agent_id="a",
                    seq=seq,
                    body=body,
                    content=content,
                    tool_calls=tc,
                    finish_reason="tool_calls",
                    usage=None,
                    timings=Timings(submit_ns=seq),
                )
            )
            if seq:
                # Incremental: each call stores only its new blocks on top of the previous call.
                assert rec.prefix is not None and rec.prefix.base == f"c{seq - 1}"
                assert len(rec.prefix.blocks) < 40
            messages.append(assistant_message(content, tc))
            messages.append(
                {"role": "tool", "tool_call_id": f"t{seq}", "content": f"hit {seq}\n" * 20}
            )
    raw = decompressed(path)
    lines = [orjson.loads(x) for x in raw.splitlines()]
    blobs = [x for x in lines if x["type"] == "blob"]
    unique_messages = {content_id(m) for b in bodies for m in b["messages"]}
    # Every distinct message once (+ the last reply, never sent back) and the tools list once.
    assert len(blobs) == len({b["id"] for b in blobs})
    message_blobs = {b["id"] for b in blobs if b["kind"] == "message"}
    assert unique_messages <= message_blobs and len(message_blobs) == len(unique_messages) + 1
    assert sum(1 for b in blobs if b["kind"] == "tools") == 1
    # The system prompt text is in the file exactly once.
    assert raw.count(b"MARKER-7f3a") == 1
    naive = sum(len(orjson.dumps(b["messages"])) for b in bodies)
    # Uncompressed, the file holds each message once plus each call's list of blob ids.
    assert len(raw) < naive / 4
    assert path.stat().st_size < naive / 50
    # Tokenization was incremental: every character of content tokenized about once.
    distinct_chars = sum(
        len(render_message(b["content"])) for b in blobs if b["kind"] == "message"
    ) + len(render_tools(TOOLS))
    assert tok.chars <= distinct_chars * 1.5 + 10_000

    trace = load_trace(path)
    for body in bodies[:3] + bodies[-3:]:
        call = trace.calls[f"c{bodies.index(body)}"]
        assert trace.messages(call) == body["messages"]
        ids = scratch_ids(body["messages"], TOOLS)
        assert call.usage.prompt_tokens_ours == len(ids)
        assert trace.blocks(call) == chain_blocks(ids, h.block_size)


async def test_multi_agent_session_blocks_match_from_scratch(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    facts = await write_session(path, orchestrator_calls=5, sub_calls=4)
    trace = load_trace(path)
    assert trace.truncated is None
    for call_id, body in facts["bodies"].items():
        call = trace.calls[call_id]
        ids = scratch_ids(body["messages"], body.get("tools"))
        assert call.usage.prompt_tokens_ours == len(ids), call_id
        assert trace.blocks(call) == chain_blocks(ids), call_id
    # Sub-agent calls after the first resume from the sub-agent's own previous call.
    assert trace.calls["sub1.2"].prefix.base == "sub1.1"  # type: ignore[union-attr]


def test_prefix_hasher_resumes_and_equals_scratch() -> None:
    import random

    rnd = random.Random(5)
    pieces = [[rnd.randrange(1000) for _ in range(rnd.randrange(0, 50))] for _ in range(30)]
    hasher = PrefixHasher(block_size=16)
    for n in range(1, 30):
        keys = [f"p{i}" for i in range(n)] + ["end"]
        ids = [*pieces[:n], [7, 7, 7]]
        state, base, start = hasher.hash(keys, ids, owner=str(n), checkpoints=(-2, -1))
        flat = [t for p in ids for t in p]
        assert list(state.blocks) == chain_blocks(flat, 16)
        assert state.tokens == len(flat)
        if n > 1:
            assert base is not None and start == n - 1  # resumed before the previous "end"


def test_prefix_hasher_memory_is_bounded() -> None:
    hasher = PrefixHasher(block_size=1, max_states=1000, max_blocks=500)
    for n in range(50):
        hasher.hash([f"x{n}"], [list(range(100))])
    assert hasher._held <= 500 and len(hasher._states) <= 5
