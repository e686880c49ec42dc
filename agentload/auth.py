"""API keys: read from the environment only (never from the command line, never written);
the one-line error for an endpoint that refuses the key; and the one way a URL that may carry
credentials is shown (``redact_url``) or scrubbed out of a message (``url_secrets``)."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit, urlunsplit

import orjson

__all__ = [
    "API_KEY_ENV",
    "api_key_from_env",
    "hide_secrets",
    "redact_url",
    "refused_key_message",
    "url_secrets",
]

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


_SECRET_PARAM = re.compile(r"(?i)key|token|secret|pass|auth|sig|cred")
"""A query parameter whose name contains one of these carries a credential."""


def _secret_param(part: str) -> bool:
    return bool(_SECRET_PARAM.search(part.partition("=")[0]))


def redact_url(url: str) -> str:
    """``url`` as it may be shown or stored: without ``user:password@`` and without
    credential-like query parameters (``api_key=``, ``token=``, ``sig=`` ...); other
    parameters (``api-version=``) and everything else are kept."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    query = "&".join(q for q in parts.query.split("&") if q and not _secret_param(q))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str) -> list[str]:
    """The credentials ``url`` carries (its password, the values of credential-like query
    parameters), as written and percent-decoded: what must never appear in a message."""
    parts = urlsplit(url)
    found = [parts.password or ""]
    found += [q.partition("=")[2] for q in parts.query.split("&") if _secret_param(q)]
    found += [unquote(s) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)


def hide_secrets(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` (e.g. ``url_secrets(url)``) replaced by ``[REDACTED]``."""
    for secret in secrets:
        text = text.replace(secret, "[REDACTED]")
    return text
