"""The APIs agentload reads and the request path of each."""

from __future__ import annotations

from typing import Literal

__all__ = ["API_PATHS", "ENGINE_FIELDS", "Api", "api_for_path"]

Api = Literal["chat", "responses", "messages"]
"""``chat``: OpenAI Chat Completions; ``responses``: OpenAI Responses; ``messages``: Anthropic
Messages."""

ENGINE_FIELDS = ("ignore_eos", "min_tokens")
"""Inference engines' length-pinning extensions (vLLM, SGLang, llama.cpp), which replay adds to a
request whatever its API: a Responses or Messages body's chat form keeps them."""

API_PATHS: dict[str, Api] = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}


def api_for_path(path: str) -> Api | None:
    """The API a ``POST`` to ``path`` speaks (``/v1/messages``; also under a prefix, as
    ``/openai/v1/chat/completions``); None for any other path (``/v1/models``,
    ``/v1/messages/count_tokens``)."""
    path = path.rstrip("/")
    for suffix, api in API_PATHS.items():
        if path == suffix or path.endswith(suffix):
            return api
    return None
