"""API keys and endpoint URLs: keys are read from the environment only (never from the command
line, never written), and a URL is shown only with its secrets masked.

* ``api_key_from_env()``: ``AGENTLOAD_API_KEY``, else ``OPENAI_API_KEY``.
* ``split_base_url(url)``: ``(clean base URL, query params)``. The clean URL has no
  ``user:password@`` and no query, so a path can be appended to it (``/models``,
  ``/chat/completions``); the params go on every request (``?api-version=...``).
* ``redact_url(url)``: the URL to print or record: the password and every secret-looking query
  value (``api_key``, ``token``, ``sig`` ...) replaced by ``***``.
* ``redact_text(text)``: every URL in ``text`` redacted, and the environment's key values masked
  (a server may echo the key it was sent in its error message).
* ``url_secrets(url)`` / ``hide_secrets(text, secrets)``: the credentials a URL carries (its
  password, secret query values; as written and percent-decoded), and ``text`` with each of
  them masked wherever it appears (a server may echo them in a message that is no URL).
* ``userinfo_warning(url)``: the one-line warning for a URL that carries ``user:password@``
  (agentload sends it nowhere: the key travels as ``Authorization: Bearer``, from the
  environment).
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

import orjson

from agentload.errors import ConfigError

__all__ = [
    "API_KEY_ENV",
    "MASK",
    "api_key_from_env",
    "hide_secrets",
    "is_secret_param",
    "redact_text",
    "redact_url",
    "refused_key_message",
    "split_base_url",
    "url_secrets",
    "userinfo_warning",
]

API_KEY_ENV = ("AGENTLOAD_API_KEY", "OPENAI_API_KEY")
"""Where the key is read from, first set wins."""

MASK = "***"
_SECRET_PARAM = re.compile(r"(?i)key|token|secret|passw|auth|sig|credential|session")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]*[^\s'\"<>`:,.;)]")


def api_key_from_env() -> str | None:
    """The API key from ``AGENTLOAD_API_KEY`` (else ``OPENAI_API_KEY``); None when neither."""
    for name in API_KEY_ENV:
        value = os.environ.get(name)
        if value:
            return value
    return None


def is_secret_param(name: str) -> bool:
    """True for a query parameter whose value is a credential (``api_key``, ``token``, ...)."""
    return _SECRET_PARAM.search(name) is not None


def _redact_query(query: str) -> str:
    parts = []
    for piece in query.split("&"):
        name, sep, _ = piece.partition("=")
        parts.append(f"{name}={MASK}" if sep and is_secret_param(name) else piece)
    return "&".join(parts)


def redact_url(url: str) -> str:
    """``url`` with its password and secret-looking query values replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _redact_query(url) if "=" in url else url
    authority, slash, tail = _split_authority(rest)
    userinfo, at, hostport = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.split(':', 1)[0]}:{MASK}@{hostport}"
    path, qmark, query = tail.partition("?")
    query, hash_, fragment = query.partition("#")
    out = f"{scheme}://{authority}{slash}{path}"
    if qmark:
        out += "?" + _redact_query(query)
    return out + (hash_ + fragment if hash_ else "")


def _split_authority(rest: str) -> tuple[str, str, str]:
    """``host...`` / ``path?query``: the authority ends at the first ``/``, ``?`` or ``#``."""
    for i, ch in enumerate(rest):
        if ch in "/?#":
            return rest[:i], ("/" if ch == "/" else ""), rest[i + 1 if ch == "/" else i :]
    return rest, "", ""


def split_base_url(url: str) -> tuple[str, dict[str, str]]:
    """``(clean base URL, query params)`` of an endpoint base URL (see the module docstring);
    ``ConfigError`` for a URL that is not ``http(s)://host[:port][/path]``."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"--endpoint {redact_url(url)}: not a valid URL ({exc})") from None
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
        f"agentload: warning: {redact_url(url)}: the user:password in the URL is not sent "
        f"anywhere; the API key is sent as 'Authorization: Bearer', from {names}"
    )


def redact_text(text: str) -> str:
    """``text`` with every URL redacted and the environment's API key values masked."""
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    keys = [v for v in (os.environ.get(name) for name in API_KEY_ENV) if v and len(v) >= 4]
    return hide_secrets(text, keys)


def url_secrets(url: str) -> list[str]:
    """The credentials ``url`` carries (its password, the values of secret-looking query
    parameters), as written and percent-decoded, longest first: what no message may contain."""
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
    except ValueError:
        return []
    for piece in parts.query.split("&"):
        name, sep, value = piece.partition("=")
        if sep and is_secret_param(name):
            found.append(value)
    found += [unquote(s) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)


def hide_secrets(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` (e.g. ``url_secrets(url)``) replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


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
    said = redact_text(_server_says(body))
    return f"{redact_url(url)}: HTTP {status}: {said} (the API key comes from {names}; {source})"
