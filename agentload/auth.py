"""API keys and endpoint URLs: keys are read from the environment only (never from the command
line, never written); what is secret and where it is masked is ``agentload.masking``'s policy.

* ``api_key_from_env()``: ``AGENTLOAD_API_KEY``, else ``OPENAI_API_KEY``; a key that an HTTP
  header cannot carry (a newline, a non-ASCII character) is one line that never shows it.
* ``split_base_url(url)``: ``(clean base URL, query params)``. The clean URL has no
  userinfo and no query, so a path can be appended to it (``/models``,
  ``/chat/completions``); the params go on every request (``?api-version=...``). The URL's
  credentials are remembered as secrets (masked in every line and record from then on).
* ``userinfo_warning(url)``: the one-line warning for a URL that carries userinfo (agentload
  sends it nowhere: the key travels as ``Authorization: Bearer``, from the environment).
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import orjson

from agentload.errors import ConfigError
from agentload.masking import API_KEY_ENV, mask_text, redact_url, remember_url

__all__ = [
    "API_KEY_ENV",
    "api_key_from_env",
    "refused_key_message",
    "split_base_url",
    "userinfo_warning",
]


def api_key_from_env() -> str | None:
    """The API key from ``AGENTLOAD_API_KEY`` (else ``OPENAI_API_KEY``); None when neither.
    ``ConfigError`` for a key an HTTP header cannot carry (it is never shown)."""
    for name in API_KEY_ENV:
        value = os.environ.get(name)
        if value:
            for i, ch in enumerate(value):
                if not "!" <= ch <= "~":
                    what = "a space" if ch == " " else f"the character U+{ord(ch):04X}"
                    raise ConfigError(
                        f"{name} holds {what} at position {i + 1} of {len(value)}: an API key "
                        "is sent in an HTTP header, which takes visible ASCII only (the key is "
                        "not shown)"
                    )
            return value
    return None


def split_base_url(url: str) -> tuple[str, dict[str, str]]:
    """``(clean base URL, query params)`` of an endpoint base URL (see the module docstring);
    ``ConfigError`` for a URL that is not ``http(s)://host[:port][/path]``."""
    remember_url(url)
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ConfigError(
            f"--endpoint {redact_url(url)}: not a valid URL (its host or port does not parse)"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"--endpoint {redact_url(url)}: expected http(s)://host[:port]/v1 (an "
            "OpenAI-compatible base URL)"
        )
    host = parts.hostname
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{port}" if port is not None else "")
    clean = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return clean, dict(parse_qsl(parts.query, keep_blank_values=True))


def userinfo_warning(url: str) -> str | None:
    """The one-line warning for ``user:password@`` in ``url`` (never shows the password)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.username is None and parts.password is None:
        return None
    names = " or ".join(API_KEY_ENV)
    return (
        f"agentload: warning: {redact_url(url)}: the user info in the URL is not sent "
        f"anywhere; the API key is sent as 'Authorization: Bearer', from {names}"
    )


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
    source = "set" if any(os.environ.get(n) for n in API_KEY_ENV) else "not set: no key was sent"
    said = mask_text(_server_says(body))
    return f"{redact_url(url)}: HTTP {status}: {said} (the API key comes from {names}; {source})"
