"""What an endpoint's error text means: the one classifier of context-overflow errors.

Both sides use it: ``generate``'s client ends a session ``context_limit`` on such an error, and
replay counts the request as ``context_overflow`` (not a plain ``http_400``). The phrases are the
ones real servers send, lower-cased:

* vLLM: "This model's maximum context length is 32768 tokens. However, you requested ..."
  (also "max_model_len"); OpenAI: "context_length_exceeded";
* SGLang / TensorRT-LLM: "... is longer than the model's context length", "input length ...
  exceeds the max ...";
* llama.cpp: "request (40021 tokens) exceeds the available context size (32768 tokens)", type
  "exceed_context_size_error";
* Anthropic and hosted APIs: "prompt is too long", "input is too long", "too many tokens",
  "context window".
"""

from __future__ import annotations

__all__ = ["is_context_overflow"]

_PHRASES = (
    "context length",
    "context_length",
    "maximum context",
    "context window",
    "context size",
    "exceed_context_size",
    "max_model_len",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "too long",
    "exceeds the max",
    "input length",
)


def is_context_overflow(text: str | bytes) -> bool:
    """Whether an endpoint's error text says the prompt exceeds the model's context window."""
    low = (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).lower()
    return any(p in low for p in _PHRASES)
