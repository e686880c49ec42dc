"""Offline tokenizers and the chat framing convention."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agentload.errors import TokenizerError
from agentload.tokenizer import (
    PRIMING,
    ChatTokenCounter,
    get_tokenizer,
    render_message,
    render_tools,
    write_tiktoken_cache,
)

TEXT = "def parse(header):\n    return header.split(':', 1)  # ünïcödé ✓ <|endoftext|>\n"
# Token ids fixed by the published vocabularies (checked against tiktoken's own encodings).
KNOWN = {"o200k_base": [24912, 2375], "cl100k_base": [15339, 1917]}  # "hello world"


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_tiktoken_vocabularies_load_with_the_network_blocked(
    name: str, no_network: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    get_tokenizer.cache_clear()  # really load the vocabulary again, under the guard
    try:
        tok = get_tokenizer(name)
        assert tok.name == name
        assert tok.encode("hello world") == KNOWN[name]
        ids = tok.encode(TEXT)
        assert 10 < len(ids) < len(TEXT)
        assert tok.decode(ids) == TEXT  # type: ignore[attr-defined]
        # Special-token text in content is plain text, never a special token.
        assert 199999 not in ids and 100257 not in ids
    finally:
        get_tokenizer.cache_clear()


def test_network_guard_is_real(no_network: None) -> None:
    import socket

    with pytest.raises(AssertionError, match=r"network access attempted|DNS lookup"):
        socket.create_connection(("example.com", 80), timeout=1)


def test_tiktoken_cache_lets_plain_tiktoken_work_offline(
    no_network: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tiktoken
    import tiktoken.registry

    cache = tmp_path / "tiktoken"
    write_tiktoken_cache(str(cache))
    assert len(list(cache.iterdir())) == 2
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    for name in ("o200k_base", "cl100k_base"):
        enc = tiktoken.get_encoding(name)  # verifies the file hash; would download on mismatch
        assert enc.encode_ordinary(TEXT) == get_tokenizer(name).encode(TEXT)


def test_hf_tokenizer_without_the_package_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import fails as if not installed
    with pytest.raises(TokenizerError, match=r"needs the 'tokenizers' package: pip install"):
        get_tokenizer("hf:/models/x/tokenizer.json")


def test_unknown_tokenizer_lists_the_choices() -> None:
    with pytest.raises(TokenizerError, match="o200k_base, cl100k_base or hf:"):
        get_tokenizer("gpt2")


def test_counter_with_an_unknown_tokenizer_fails_clearly() -> None:
    with pytest.raises(TokenizerError, match="unknown tokenizer 'nope'"):
        ChatTokenCounter("nope")


CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful engineer.\n" * 30},
    {"role": "user", "content": "Fix the bug in parse()."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
            },
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "search_code", "arguments": '{"query": "parse"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": TEXT * 20},
    {"role": "tool", "tool_call_id": "c2", "content": "a.py:1: def parse(header):"},
    {"role": "assistant", "content": [{"type": "text", "text": "Found it."}]},
]
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def test_framing_convention() -> None:
    msg = render_message(CONVERSATION[3])
    assert msg.startswith("<|im_start|>tool\n<tool_call_id>c1</tool_call_id>\n")
    assert msg.endswith("<|im_end|>\n")
    call = render_message(CONVERSATION[2])
    assert (
        '<tool_call>{"arguments":"{\\"path\\": \\"a.py\\"}","name":"read_file"}</tool_call>' in call
    )
    assert render_message(CONVERSATION[5]) == "<|im_start|>assistant\nFound it.<|im_end|>\n"
    assert render_tools(TOOLS).startswith("<|im_start|>tools\n[{")
    assert PRIMING == "<|im_start|>assistant\n"


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_incremental_counting_equals_counting_from_scratch(name: str) -> None:
    tok = get_tokenizer(name)
    counter = ChatTokenCounter(name)
    for n in range(1, len(CONVERSATION) + 1):
        prompt = CONVERSATION[:n]
        scratch = len(tok.encode(render_tools(TOOLS)))
        scratch += sum(len(tok.encode(render_message(m))) for m in prompt)
        scratch += len(tok.encode(PRIMING))
        assert counter.count_prompt(prompt, TOOLS) == scratch
        # Without tools only the tools piece goes.
        assert counter.count_prompt(prompt) == scratch - len(tok.encode(render_tools(TOOLS)))


def test_counter_caches_token_ids_per_message() -> None:
    class Counting:
        name = "o200k_base"

        def __init__(self) -> None:
            self.calls = 0
            self.inner = get_tokenizer("o200k_base")

        def encode(self, text: str) -> list[int]:
            self.calls += 1
            return self.inner.encode(text)

    tok = Counting()
    counter = ChatTokenCounter(tok)
    first = counter.count_prompt(CONVERSATION, TOOLS)
    after_first = tok.calls
    assert after_first == len(CONVERSATION) + 1 + 1  # messages + tools + priming
    for _ in range(5):
        assert counter.count_prompt(CONVERSATION, TOOLS) == first
    assert tok.calls == after_first  # nothing tokenized twice
    counter.count_prompt([*CONVERSATION, {"role": "user", "content": "more"}], TOOLS)
    assert tok.calls == after_first + 1


def test_counter_cache_is_bounded() -> None:
    counter = ChatTokenCounter("o200k_base", cache_size=10)
    for i in range(50):
        counter.count_prompt([{"role": "user", "content": f"m{i}"}])
    assert len(counter._cache) <= 10


def test_an_hf_tokenizer_is_read_bounded_and_never_blocks(tmp_path: Path) -> None:
    # A trace's header names its tokenizer: hf:/dev/zero filled memory, a FIFO blocked
    # (issue 28, class 3). Only a regular file of bounded size is read, without blocking.
    pytest.importorskip("tokenizers")
    fifo = tmp_path / "tokenizer.fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        with pytest.raises(TokenizerError, match="not a regular file"):
            get_tokenizer(f"hf:{path}")
    with pytest.raises(TokenizerError, match="is a directory"):
        get_tokenizer(f"hf:{tmp_path}")
