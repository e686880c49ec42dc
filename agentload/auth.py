"""API keys: read from the environment only (never from the command line, never written),
and the one-line error for an endpoint that refuses the key."""

from __future__ import annotations

import os

import orjson

__all__ = ["API_KEY_ENV", "api_key_from_env", "refused_key_message"]

API_KEY_ENV = ("AGENTLOAD_API_KEY", "OPENAI_API_KEY")
"""Where the key is read from, first set wins."""


def api_key_from_env() -> str | None:
    """The API key from ``AGENTLOAD_API_KEY`` (else ``OPENAI_API_KEY``); None when neither."""
    for name in API_KEY_ENV:
        value = os.environ.get(name)
        if value:
            return value
    return None


def _server_says(body: bytes) -> str:
    """The error message of an OpenAI-style error body, else the body's start."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data.get("message", data.get("detail")))
        if isinstance(err, dict):
            err = err.get("message")
        if isinstance(err, str) and err:
            return err
    text = body.decode("utf-8", errors="replace").strip().replace("\n", " ")
    return text[:200] or "no message"


def refused_key_message(url: str, status: int, body: bytes) -> str:
    """One line for a 401/403: what the server said, and where agentload took the key from."""
    names = " or ".join(API_KEY_ENV)
    source = "set" if api_key_from_env() else "not set: no key was sent"
    return f"{url}: HTTP {status}: {_server_says(body)} (the API key comes from {names}; {source})"
