"""Where replay's requests go and which secrets they carry: URLs, headers, what may be shown.

Request URLs are the base URL's path plus the endpoint's (``/models``, ``/chat/completions``,
``/responses``, ``/messages``; Gemini's ``/models/{model}:streamGenerateContent?alt=sse``, the
model in the path) with the base URL's query kept after it
(``…/v1/chat/completions?api-version=…``) and its ``user:password@`` sent nowhere (the key
travels as ``Authorization: Bearer``, and as ``x-api-key`` to Messages, ``x-goog-api-key`` to
Gemini). A URL is shown only
through ``agentload.auth.redact_url``, and ``Target.hide`` scrubs the credentials the URL or
the API key carry out of any text.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from agentload.auth import split_base_url
from agentload.masking import hide_secrets, mask_text

__all__ = ["ANTHROPIC_VERSION", "Target", "endpoint_url", "gemini_url"]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent with Messages requests."""


def endpoint_url(base_url: str, path: str, extra: Mapping[str, str] | None = None) -> str:
    """``path`` appended to the base URL's path, the base URL's query kept after it (with
    ``extra`` parameters added):
    ``endpoint_url("http://h/v1?api-version=1", "/models")`` → ``http://h/v1/models?api-version=1``."""
    clean, query = split_base_url(base_url)  # no user:password@: it is sent nowhere
    query = {**query, **extra} if extra else query
    return clean + path + (f"?{urlencode(query)}" if query else "")


@functools.lru_cache(maxsize=256)
def gemini_url(base_url: str, model: str, stream: bool = True) -> str:
    """A Gemini call's URL: ``…/models/{model}:streamGenerateContent?alt=sse`` after the base
    URL's path (``:generateContent`` when not ``stream``), the base URL's query kept (built
    once per model: replay asks at every request)."""
    name = quote(model.removeprefix("models/"), safe="")
    if stream:
        return endpoint_url(base_url, f"/models/{name}:streamGenerateContent", {"alt": "sse"})
    return endpoint_url(base_url, f"/models/{name}:generateContent")


@dataclass(frozen=True, slots=True)
class Target:
    """The endpoint's URLs, the headers every request carries, and the secrets to hide."""

    base_url: str
    """The base URL as given, without a trailing ``/``."""
    urls: Mapping[str, str]
    """The streaming endpoint of each API (``chat``, ``responses``, ``messages``; Gemini's,
    which names the model, is ``url("gemini", model)``)."""
    models_url: str
    headers: dict[str, str]
    """Sent with every request (content type, accept, the key as a bearer token, extras)."""
    messages_headers: dict[str, str]
    """Added for Messages requests (the version, the key as ``x-api-key``)."""
    gemini_headers: dict[str, str]
    """Added for Gemini requests (the key as ``x-goog-api-key``)."""
    key: list[str]
    """The API key, when there is one (masked however short; the URL's: by policy)."""

    @classmethod
    def of(cls, base_url: str, api_key: str | None, headers: Mapping[str, str] | None) -> Target:
        """The target at ``base_url``, with ``api_key`` and the extra ``headers``."""
        base_url = base_url.rstrip("/")
        hdrs = {"content-type": "application/json", "accept": "text/event-stream"}
        if api_key:
            hdrs["authorization"] = f"Bearer {api_key}"
        hdrs.update(headers or {})
        # Messages servers read the key from x-api-key and want a version (vLLM, SGLang and
        # Anthropic's own accept these two).
        messages_headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            messages_headers["x-api-key"] = api_key
        return cls(
            base_url=base_url,
            urls={
                "chat": endpoint_url(base_url, "/chat/completions"),
                "responses": endpoint_url(base_url, "/responses"),
                "messages": endpoint_url(base_url, "/messages"),
            },
            models_url=endpoint_url(base_url, "/models"),
            headers=hdrs,
            messages_headers=messages_headers,
            gemini_headers={"x-goog-api-key": api_key} if api_key else {},
            key=[api_key] if api_key else [],
        )

    def url(self, api: str, model: str = "") -> str:
        """The streaming endpoint of ``api`` (Gemini's for ``model``)."""
        return gemini_url(self.base_url, model) if api == "gemini" else self.urls[api]

    def api_headers(self, api: str) -> dict[str, str]:
        """The headers ``api``'s requests add to every request's (Messages', Gemini's)."""
        if api == "messages":
            return self.messages_headers
        return self.gemini_headers if api == "gemini" else {}

    @property
    def https(self) -> bool:
        """Whether the endpoint is reached over TLS."""
        return self.base_url.startswith("https")

    def hide(self, text: str) -> str:
        """``text`` with every credential of the base URL (learned by ``split_base_url``) and
        the API key replaced."""
        return hide_secrets(mask_text(text), self.key)
