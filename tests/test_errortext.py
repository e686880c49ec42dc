"""The one context-overflow classifier: real servers' texts, and what is not an overflow."""

from __future__ import annotations

import pytest

from agentload.errortext import is_context_overflow

# What servers send when the prompt does not fit (copied from their error paths).
OVERFLOWS = [
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens",
    '{"message": "Input length 9000 exceeds max_model_len"}',
    "context_length_exceeded",
    "prompt is too long: 210000 tokens > 200000 maximum",
    # llama.cpp's llama-server
    '{"error":{"code":400,"message":"request (40021 tokens) exceeds the available context size '
    '(32768 tokens), try increasing it","type":"exceed_context_size_error"}}',
]
NOT_OVERFLOWS = ["rate limit reached", "internal server error", "Failed to parse tool call"]


@pytest.mark.parametrize("text", OVERFLOWS)
def test_overflow_texts_are_recognised_as_text_and_as_bytes(text: str) -> None:
    assert is_context_overflow(text)
    assert is_context_overflow(text.encode())


@pytest.mark.parametrize("text", NOT_OVERFLOWS)
def test_other_errors_are_not_overflows(text: str) -> None:
    assert not is_context_overflow(text)
    assert not is_context_overflow(text.encode())
