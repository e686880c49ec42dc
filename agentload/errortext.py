"""What an endpoint's error text means, and how much of it goes into a message.

* :func:`is_context_overflow`: the one classifier of context-overflow errors. Both sides use it:
  ``generate``'s client ends a session ``context_limit`` on such an error, and replay counts the
  request as ``context_overflow`` (not a plain ``http_400``).
* :func:`is_request_error`: a server error (HTTP 500) whose text says the request itself is bad,
  so the same request fails the same way again (``generate`` does not retry it).
* :func:`clip`: a server's error text cut to a readable length, saying how much was cut; every
  place that puts a server's text into a message or a one-line error uses it.
* :func:`one_line`: any text (a user's input echoed back, a server's message) as one printable,
  clipped line: what every error and warning line is made of.

The overflow phrases are the ones real servers send (each quoted, with its source file, in
``tests/test_errortext.py``), lower-cased:

* vLLM: "This model's maximum context length is N tokens. However, your request has M input
  tokens" and "'max_tokens' ... is too large: X. This model's maximum context length is N
  tokens and your request has M input tokens";
* SGLang: "The input (M tokens) is longer than the model's context length (N tokens)",
  "Requested token count exceeds the model's maximum context length of N tokens";
* llama.cpp: "request (M tokens) exceeds the available context size (N tokens)", type
  "exceed_context_size_error";
* TensorRT-LLM: "The sum of prompt length (M) and query length (Q) ... should not exceed
  max_seq_len (N)" (or "max_num_tokens");
* OpenAI: code "context_length_exceeded", "Your input exceeds the context window of this model";
* Anthropic and other hosted APIs: "prompt is too long", "input is too long", "too many tokens".

A bare "too long" is not among them: a 400 for one over-long string parameter ("Invalid
'tools[0].function.name': string too long") is a bad request, not a full context.
"""

from __future__ import annotations

__all__ = [
    "CLIP_CHARS",
    "ONE_LINE_CHARS",
    "clip",
    "is_context_overflow",
    "is_request_error",
    "one_line",
]

CLIP_CHARS = 300
"""How much of a server's error text a message keeps (:func:`clip`)."""

_OVERFLOW = (
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
    "sum of prompt length",
)

_REQUEST_ERRORS = (
    "failed to parse tool call arguments",  # llama.cpp, on the history's tool-call arguments
    "failed to parse messages",
    "failed to parse input",
    "json.exception.parse_error",  # llama.cpp's JSON library
)


def _low(text: str | bytes) -> str:
    return (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).lower()


def is_context_overflow(text: str | bytes) -> bool:
    """Whether an endpoint's error text says the prompt exceeds the model's context window."""
    low = _low(text)
    return any(p in low for p in _OVERFLOW)


def is_request_error(text: str | bytes) -> bool:
    """Whether a server error's text says the request itself is malformed (it will repeat)."""
    low = _low(text)
    return any(p in low for p in _REQUEST_ERRORS)


def clip(text: str, limit: int = CLIP_CHARS) -> str:
    """``text`` whole when it has at most ``limit`` characters, else its first ``limit`` and a
    note of how many were cut: ``... [1,234 more characters]``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()}... [{len(text) - limit:,} more characters]"


ONE_LINE_CHARS = 600
"""The longest error line: room for our own message around a server's (clipped) text."""


def one_line(text: str) -> str:
    """``text`` as one printable line: control and bidi characters (a user's input, echoed back,
    may carry newlines, NULs or a right-to-left override) are shown escaped, and a text longer
    than ``ONE_LINE_CHARS`` (a server's error pasted whole) is clipped, saying how much."""
    return clip("".join(_escape(ch) for ch in text.strip()), ONE_LINE_CHARS)


def _escape(ch: str) -> str:
    if ch.isprintable() and not ("\u202a" <= ch <= "\u202e" or "\u2066" <= ch <= "\u2069"):
        return ch
    return ch.encode("unicode_escape").decode("ascii")
