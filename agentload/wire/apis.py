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
    "gemini_auxiliary",
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
_GEMINI_AUXILIARY = ("countTokens", "embedContent", "batchEmbedContents")
"""Gemini methods on a model that are no LLM call (``:countTokens`` counts a prompt)."""
_GEMINI = re.compile(r"/models/([^/:]+):([A-Za-z]+)$")
"""``…/models/{model}:{method}`` (``/v1beta/models/gemini-2.5-pro:generateContent``; any
version or prefix before ``/models``)."""


def gemini_target(path: str) -> tuple[str, str] | None:
    """The model and method a Gemini path names (``("gemini-2.5-pro", "generateContent")``
    for ``/v1beta/models/gemini-2.5-pro:generateContent``); None for any other path. The
    query (``?alt=sse``) is no part of ``path``."""
    m = _GEMINI.search(path.rstrip("/"))
    return (m.group(1), m.group(2)) if m else None


def gemini_auxiliary(path: str) -> bool:
    """Whether ``path`` is a known Gemini method that is no LLM call (``:countTokens``,
    ``:embedContent``, ``:batchEmbedContents``): proxied, never recorded as a call."""
    target = gemini_target(path)
    return target is not None and target[1] in _GEMINI_AUXILIARY


def api_for_path(path: str) -> Api | None:
    """The API a ``POST`` to ``path`` speaks (``/v1/messages``; also under a prefix, as
    ``/openai/v1/chat/completions``; a Gemini model's ``:generateContent`` or
    ``:streamGenerateContent``, under any version); None for any other path (``/v1/models``,
    ``/v1/messages/count_tokens``, a Gemini ``:countTokens``: ``gemini_auxiliary``)."""
    path = path.rstrip("/")
    for suffix, api in API_PATHS.items():
        if path == suffix or path.endswith(suffix):
            return api
    target = gemini_target(path)
    if target is not None and target[1] in GEMINI_CALLS:
        return "gemini"
    return None
