"""The APIs agentload reads and the request path of each."""

from __future__ import annotations

import re
from typing import Literal

__all__ = [
    "API_PATHS",
    "ENGINE_FIELDS",
    "GEMINI_CALLS",
    "Api",
    "api_for_path",
    "counts_tokens",
    "gemini_target",
]

Api = Literal["chat", "responses", "messages", "gemini"]
"""``chat``: OpenAI Chat Completions; ``responses``: OpenAI Responses; ``messages``: Anthropic
Messages; ``gemini``: Google's Gemini API (``generativelanguage``: ``generateContent``)."""

ENGINE_FIELDS = ("ignore_eos", "min_tokens")
"""Inference engines' length-pinning extensions (vLLM, SGLang, llama.cpp), which replay adds to a
request whatever its API: a Responses, Messages or Gemini body's chat form keeps them."""

API_PATHS: dict[str, Api] = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}

GEMINI_CALLS = ("generateContent", "streamGenerateContent")
"""The Gemini methods that are LLM calls (``streamGenerateContent`` streams)."""
_COUNTS_TOKENS = ("/count_tokens", ":countTokens")
"""Paths that count a prompt's tokens: Anthropic's ``/v1/messages/count_tokens``, a Gemini
model's ``:countTokens``."""
_GEMINI = re.compile(r"/models/([^/:]+):([A-Za-z]+)$")
"""``…/models/{model}:{method}`` (``/v1beta/models/gemini-2.5-pro:generateContent``; any
version or prefix before ``/models``)."""


def gemini_target(path: str) -> tuple[str, str] | None:
    """The model and method a Gemini path names (``("gemini-2.5-pro", "generateContent")``
    for ``/v1beta/models/gemini-2.5-pro:generateContent``); None for any other path. The
    query (``?alt=sse``) is no part of ``path``."""
    m = _GEMINI.search(path.rstrip("/"))
    return (m.group(1), m.group(2)) if m else None


def counts_tokens(path: str) -> bool:
    """Whether ``path`` asks for a prompt's token count (``/v1/messages/count_tokens``, a
    Gemini ``:countTokens``): about a call, no call itself."""
    return path.rstrip("/").endswith(_COUNTS_TOKENS)


def api_for_path(path: str) -> Api | None:
    """The API a ``POST`` to ``path`` speaks (``/v1/messages``; also under a prefix, as
    ``/openai/v1/chat/completions``; a Gemini model's ``:generateContent`` or
    ``:streamGenerateContent``, under any version); None for any other path (``/v1/models``,
    ``/v1/messages/count_tokens``, a Gemini ``:countTokens``: ``counts_tokens``)."""
    path = path.rstrip("/")
    for suffix, api in API_PATHS.items():
        if path == suffix or path.endswith(suffix):
            return api
    target = gemini_target(path)
    if target is not None and target[1] in GEMINI_CALLS:
        return "gemini"
    return None
