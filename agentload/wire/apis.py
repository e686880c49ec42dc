"""The APIs agentload reads and the request path of each."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import unquote

__all__ = [
    "API_PATHS",
    "ENGINE_FIELDS",
    "GEMINI_CALLS",
    "UNRECORDED",
    "Api",
    "Unrecorded",
    "api_for_path",
    "azure_deployment",
    "counts_tokens",
    "gemini_target",
    "match_path",
    "unrecorded_api",
]

Api = Literal["chat", "responses", "messages", "gemini"]
"""``chat``: OpenAI Chat Completions; ``responses``: OpenAI Responses; ``messages``: Anthropic
Messages; ``gemini``: Google's Gemini API (``generativelanguage``: ``generateContent``)."""

ENGINE_FIELDS = ("ignore_eos", "min_tokens")
"""Inference engines' length-pinning extensions (vLLM, SGLang, llama.cpp), which replay adds to a
request whatever its API: a Responses, Messages or Gemini body's chat form keeps them."""

API_PATHS: dict[str, Api] = {
    "/chat/completions": "chat",
    "/responses": "responses",
    "/v1/messages": "messages",
}
"""Path ends of each API (compared case-insensitively with ``match_path``'s form), after any
prefix: ``/v1/chat/completions``, a gateway's ``/openai/v1/chat/completions``, and the bare
``/chat/completions`` and ``/responses`` an OpenAI SDK sends to a base URL without ``/v1``;
Azure OpenAI's ``/openai/responses`` (the deployment in the body's ``model``) among them."""

Unrecorded = Literal["embeddings", "completions", "ollama"]
"""A known API whose requests are relayed and counted but recorded as no call: ``embeddings``
(OpenAI's, Azure's, Gemini's ``:embedContent``, Ollama's: not generative), ``completions``
(OpenAI's legacy prompt API), ``ollama`` (Ollama's native ``/api/chat``, ``/api/generate``)."""

UNRECORDED: dict[Unrecorded, str] = {
    "embeddings": "an embeddings request: not an LLM call",
    "completions": "the legacy Completions API (prompt) is not recorded; "
    "point the agent at /v1/chat/completions",
    "ollama": "Ollama's native API is not recorded; point the agent at /v1",
}
"""Why each known API is recorded as no call (an ``unread_request``'s ``error``)."""

_UNRECORDED_PATHS: dict[str, Unrecorded] = {
    "/v1/embeddings": "embeddings",
    "/api/embed": "embeddings",
    "/api/embeddings": "embeddings",
    "/v1/completions": "completions",
    "/api/chat": "ollama",
    "/api/generate": "ollama",
}
_AZURE = re.compile(
    r"/openai/deployments/([^/]+)/(chat/completions|responses|embeddings|completions)$",
    re.IGNORECASE,
)
"""Azure OpenAI's ``/openai/deployments/{deployment}/{operation}`` (``?api-version=`` in the
query): the deployment stands for the model."""
_AZURE_KIND: dict[str, tuple[Api | None, Unrecorded | None]] = {
    "chat/completions": ("chat", None),
    "responses": ("responses", None),
    "embeddings": (None, "embeddings"),
    "completions": (None, "completions"),
}
_GEMINI_EMBEDS = ("embedcontent", "batchembedcontents")

GEMINI_CALLS = ("generateContent", "streamGenerateContent")
"""The Gemini methods that are LLM calls (``streamGenerateContent`` streams)."""
_COUNTS_TOKENS = ("/count_tokens", ":countTokens")
"""Paths that count a prompt's tokens: Anthropic's ``/v1/messages/count_tokens``, a Gemini
model's ``:countTokens``."""
_GEMINI = re.compile(r"/models/([^/:]+):([A-Za-z]+)$")
"""``…/models/{model}:{method}`` (``/v1beta/models/gemini-2.5-pro:generateContent``; any
version or prefix before ``/models``)."""


def match_path(path: str) -> str:
    """``path`` in the form the APIs are recognised by: percent-decoded (``%2F`` is a slash),
    each segment without its ``;params``, no empty segments (``//``), no trailing slash. The
    request still goes upstream as the agent wrote it; this form only decides what it is."""
    segments = (s.split(";", 1)[0] for s in unquote(path).split("/"))
    return "/" + "/".join(s for s in segments if s)


def _azure(path: str) -> tuple[str, str] | None:
    """The deployment as written and the operation (lower-case) of an Azure path."""
    m = _AZURE.search(path)
    return (m.group(1), m.group(2).lower()) if m else None


def azure_deployment(path: str) -> str | None:
    """The deployment an Azure OpenAI path names (``/openai/deployments/{deployment}/…``), else
    None: a call whose body names no model used it."""
    hit = _azure(match_path(path))
    return hit[0] if hit else None


def gemini_target(path: str) -> tuple[str, str] | None:
    """The model and method a Gemini path names (``("gemini-2.5-pro", "generateContent")``
    for ``/v1beta/models/gemini-2.5-pro:generateContent``); None for any other path. The
    query (``?alt=sse``) is no part of ``path``."""
    m = _GEMINI.search(match_path(path))
    return (m.group(1), m.group(2)) if m else None


def counts_tokens(path: str) -> bool:
    """Whether ``path`` asks for a prompt's token count (``/v1/messages/count_tokens``, a
    Gemini ``:countTokens``): about a call, no call itself."""
    return match_path(path).lower().endswith(tuple(s.lower() for s in _COUNTS_TOKENS))


def api_for_path(path: str) -> Api | None:
    """The API a ``POST`` to ``path`` speaks (``/v1/messages``; also under a prefix, as
    ``/openai/v1/chat/completions``; a Gemini model's ``:generateContent`` or
    ``:streamGenerateContent``, under any version; an Azure deployment's ``chat/completions``
    or ``responses``); None for any other path (``/v1/models``, ``/v1/messages/count_tokens``,
    a Gemini ``:countTokens``: ``counts_tokens``; ``unrecorded_api``). The path is read in its
    ``match_path`` form and, but for a Gemini model's name, without regard to case."""
    return _kind(path)[0]


def unrecorded_api(path: str) -> Unrecorded | None:
    """The known API a ``POST`` to ``path`` speaks that is recorded as no call (``UNRECORDED``
    says why), else None."""
    return _kind(path)[1]


def _kind(path: str) -> tuple[Api | None, Unrecorded | None]:
    """(the API recorded, None) or (None, the API not recorded) or (None, None)."""
    path = match_path(path)
    low = path.lower()
    for suffix, api in API_PATHS.items():
        if low.endswith(suffix):
            return api, None
    azure = _azure(path)
    if azure is not None:
        return _AZURE_KIND[azure[1]]
    for suffix, other in _UNRECORDED_PATHS.items():
        if low.endswith(suffix):
            return None, other
    target = gemini_target(path)
    if target is not None and target[1] in GEMINI_CALLS:
        return "gemini", None
    if target is not None and target[1].lower() in _GEMINI_EMBEDS:
        return None, "embeddings"
    return None, None
