"""The one context-overflow classifier on real servers' texts, what is not an overflow, the
request-error classifier and the clipping of long error texts."""

from __future__ import annotations

import pytest

from agentload.errortext import clip, is_context_overflow, is_request_error

# What servers send when the prompt does not fit, as their sources write it (numbers filled in).
OVERFLOWS = [
    # vLLM, vllm/entrypoints/renderer.py (_create_tokens_prompt)
    "This model's maximum context length is 32768 tokens. However, your request has 40021 input "
    "tokens. Please reduce the length of the input messages.",
    # vLLM, the same check when prompt + max_tokens do not fit (the 400 seen from vllm serve)
    "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context "
    "length is 32768 tokens and your request has 30000 input tokens (4096 > 32768 - 30000).",
    # vLLM before v0.6 (max_model_len in the text)
    '{"message": "Input length 9000 exceeds max_model_len"}',
    # SGLang, python/sglang/srt/managers/tokenizer_manager.py (_tokenize_one_request)
    "The input (40021 tokens) is longer than the model's context length (32768 tokens).",
    "Requested token count exceeds the model's maximum context length of 32768 tokens. You "
    "requested a total of 44117 tokens: 40021 tokens from the input messages and 4096 tokens "
    "for the completion. Please reduce the number of tokens in the input messages or the "
    "completion to fit within the limit.",
    # llama.cpp, tools/server/server-context.cpp (ERROR_TYPE_EXCEED_CONTEXT_SIZE), as the
    # server's JSON body carries it (type from tools/server/server-common.cpp)
    '{"error":{"code":400,"message":"request (40021 tokens) exceeds the available context size '
    '(32768 tokens), try increasing it","type":"exceed_context_size_error",'
    '"n_prompt_tokens":40021,"n_ctx":32768}}',
    "request (40021 tokens) exceeds the available context size (32768 tokens), try increasing it",
    # TensorRT-LLM, tensorrt_llm/llmapi/llm.py (_check_arguments), TensorRT and PyTorch backends
    "The sum of prompt length (40021.0) and query length (0) max_tokens (4096) should not "
    "exceed max_seq_len (32768)",
    "The sum of prompt length (40021.0), query length (0) should not exceed max_num_tokens (32768)",
    # OpenAI: the code, and the message of a failed response (openai/codex,
    # codex-rs/codex-api/src/sse/responses.rs: is_context_window_error and its test)
    '{"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window '
    'of this model. Please adjust your input and try again."}}',
    "context_length_exceeded",
    # Anthropic-style hosted APIs
    "prompt is too long: 210000 tokens > 200000 maximum",
]

NOT_OVERFLOWS = [
    "rate limit reached",
    "internal server error",
    # llama.cpp's 500 on a history whose tool-call arguments are not JSON (common/chat.cpp)
    "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error "
    "at line 1, column 80: syntax error while parsing value - invalid string: missing closing "
    "quote",
    # a 400 for a bad tool schema / one over-long string parameter (OpenAI's wording)
    "Invalid 'tools[0].function.name': string too long. Expected a string with maximum length "
    "64, but got a string with length 80 instead.",
    "Invalid schema for function 'read_file': 'path' is not of type 'object'",
    # vLLM's 400 for a bad max_tokens (protocol validation), not a full context
    "max_tokens must be at least 1, got 0.",
    # OpenAI's rate limit speaks of tokens too
    "Rate limit reached for gpt-5.1 in organization org-AAA on tokens per min (TPM): Limit "
    "30000, Used 22999, Requested 12528. Please try again in 11.054s.",
    "The model `gemma` does not exist.",
]


@pytest.mark.parametrize("text", OVERFLOWS)
def test_overflow_texts_are_recognised_as_text_and_as_bytes(text: str) -> None:
    assert is_context_overflow(text)
    assert is_context_overflow(text.encode())


@pytest.mark.parametrize("text", NOT_OVERFLOWS)
def test_other_errors_are_not_overflows(text: str) -> None:
    assert not is_context_overflow(text)
    assert not is_context_overflow(text.encode())


def test_a_request_the_server_cannot_parse_is_a_request_error() -> None:
    assert is_request_error(NOT_OVERFLOWS[2])
    assert is_request_error(NOT_OVERFLOWS[2].encode())
    for text in ("internal server error", "CUDA out of memory", "upstream connect error"):
        assert not is_request_error(text)


def test_clip_keeps_short_texts_and_says_how_much_of_a_long_one_was_cut() -> None:
    assert clip("short") == "short"
    assert clip("x" * 300) == "x" * 300
    long = "y" * 1100
    cut = clip(long)
    assert cut == "y" * 300 + "... [800 more characters]"
    assert clip("z" * 50, 10) == "z" * 10 + "... [40 more characters]"
