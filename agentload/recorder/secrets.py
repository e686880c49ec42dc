"""Keep secrets out of traces: API keys and Authorization headers are never written."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["REDACTED", "scrub_bytes", "strip_credentials"]

REDACTED = "[REDACTED]"

# Things that look like credentials: OpenAI-style keys, bearer tokens, common key headers.
_PATTERNS = [
    rb"(?<![A-Za-z0-9])sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}",
    rb"(?i)bearer\s+[A-Za-z0-9._~+/=\-]{8,}",
    rb"(?i)\"(?:authorization|proxy-authorization|api[-_]?key|x-api-key|openai[-_]api[-_]key"
    rb"|access[-_]token|auth[-_]token|password|secret[-_]?key)\"\s*:\s*\"(?:[^\"\\]|\\.)*\"",
    rb"(?i)(?:api[-_]?key|token|secret|password)=[A-Za-z0-9._~+/\-]{8,}",
]
_RE = re.compile(
    b"|".join(b"(?:" + p.replace(b"(?i)", b"") + b")" for p in _PATTERNS), re.IGNORECASE
)


def _sub(m: re.Match[bytes]) -> bytes:
    text = m.group(0)
    if text.startswith(b'"'):  # a JSON "key": "value" pair: keep the key, drop the value
        key = text.split(b":", 1)[0]
        return key + b':"' + REDACTED.encode() + b'"'
    return REDACTED.encode()


def scrub_bytes(data: bytes) -> bytes:
    """Replace anything that looks like a credential in serialized JSON by ``[REDACTED]``."""
    return _RE.sub(_sub, data)


def strip_credentials(url: str | None) -> str | None:
    """A URL without user:password and without key-like query parameters."""
    if not url:
        return url
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    query = "&".join(
        q for q in parts.query.split("&") if q and not re.match(r"(?i)(api[-_]?key|key|token)=", q)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
