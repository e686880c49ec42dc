"""What the endpoint answers before any load: its models list, and which APIs it speaks.

The one probe of an endpoint: replay asks ``list_models`` (the model must be listed), an agent
run ``model_to_use`` (a named model, or the first listed); both read the same ``GET /models``
and say the same things when it fails.

Each question is one small request on the pool's shared client, bounded by ``limit``
(``StreamClient.probe_timeout_s``): an endpoint that accepts the connection and never answers
is one ``EndpointUnreachableError`` line within that bound, never a hang.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from agentload.auth import refused_key_message
from agentload.client.target import Target, gemini_url
from agentload.errors import (
    ConfigError,
    EndpointError,
    EndpointUnreachableError,
    ModelNotFoundError,
)
from agentload.masking import redact_url

__all__ = ["list_models", "model_to_use", "simulator_profile", "speaks"]


async def list_models(
    client: httpx.AsyncClient, target: Target, model: str, limit: float
) -> list[str]:
    """GET ``/models`` within ``limit`` seconds: the ids it lists, ``model`` among them (replay
    sends only to a model the endpoint lists); raises ``EndpointUnreachableError`` (no
    answer, or no models list) / ``EndpointError`` (the key refused) / ``ModelNotFoundError``."""
    shown = redact_url(target.models_url)
    ids = await _listed(client, target, shown, limit)
    if isinstance(ids, str):
        raise EndpointUnreachableError(f"{shown}: {ids}")
    _check_listed(target, shown, model, ids)
    return ids


async def model_to_use(
    client: httpx.AsyncClient, target: Target, model: str | None, limit: float
) -> str:
    """The model an agent run talks to, by the same ``GET /models``: ``model`` when the list
    has it or the endpoint keeps no list (agents work with endpoints that list nothing), else
    the first one listed; raises as ``list_models`` does, and ``ConfigError`` when no model
    was named and none is listed."""
    shown = redact_url(target.models_url)
    ids = await _listed(client, target, shown, limit)
    if model is not None:
        if not isinstance(ids, str) and ids:
            _check_listed(target, shown, model, ids)
        return model
    if isinstance(ids, str) or not ids:
        raise ConfigError(f"{shown}: cannot list the served models; pass --model NAME")
    return ids[0]


async def simulator_profile(
    client: httpx.AsyncClient, target: Target, model: str | None, limit: float
) -> str | None:
    """The profile of agentload's own simulator (``agentload serve``) when it is the target:
    its models list says ``owned_by: agentload`` for ``model`` (None: for the model it lists),
    and its ``/health`` names the profile ("unknown" when it does not); None for any other
    server, or no clear answer."""
    shown = redact_url(target.models_url)
    try:
        r = await _get_models(client, target, shown, limit)
        listed = r.json().get("data", []) if r.status_code == 200 else []
        ours = any(
            isinstance(m, dict)
            and (model is None or m.get("id") == model)
            and m.get("owned_by") == "agentload"
            for m in listed
        )
    except (EndpointUnreachableError, ValueError, AttributeError):
        return None
    if not ours:
        return None
    health = urlsplit(target.models_url)._replace(path="/health", query="").geturl()
    try:
        async with asyncio.timeout(limit):
            h = await client.get(health)
        profile = h.json().get("profile") if h.status_code == 200 else None
    except (TimeoutError, httpx.HTTPError, ValueError, AttributeError):
        profile = None
    return str(profile) if isinstance(profile, str) and profile else "unknown"


async def _listed(
    client: httpx.AsyncClient, target: Target, shown: str, limit: float
) -> list[str] | str:
    """The ids ``GET /models`` lists, or why there is no list (a non-200 answer, or not an
    OpenAI models list); raises ``EndpointUnreachableError`` when nothing answers and
    ``EndpointError`` when the key is refused."""
    r = await _get_models(client, target, shown, limit)
    if r.status_code in (401, 403):
        raise EndpointError(target.hide(refused_key_message(shown, r.status_code, r.content)))
    if r.status_code != 200:
        return f"HTTP {r.status_code} from the models list"
    try:
        return [str(m["id"]) for m in r.json().get("data", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        return "not an OpenAI models list"


def _check_listed(target: Target, shown: str, model: str, ids: list[str]) -> None:
    """``ModelNotFoundError`` unless ``model`` is among ``ids``."""
    if model not in ids:
        raise ModelNotFoundError(
            target.hide(
                f"{shown}: model {model!r} not served; available: {', '.join(ids) or 'none'}"
            )
        )


async def _get_models(
    client: httpx.AsyncClient, target: Target, shown: str, limit: float
) -> httpx.Response:
    """The answer to ``GET /models`` within ``limit`` seconds; no answer is an
    ``EndpointUnreachableError`` saying why (``shown``: the URL as it may be shown)."""
    try:
        async with asyncio.timeout(limit):
            return await client.get(target.models_url, timeout=limit)
    except (TimeoutError, httpx.TimeoutException) as exc:
        what = (
            "no connection" if isinstance(exc, httpx.ConnectTimeout) else "connected, but no answer"
        )
        raise EndpointUnreachableError(
            f"{shown}: endpoint unreachable ({what} within {limit:g}s)"
        ) from None
    except httpx.HTTPError as exc:
        hint = (
            " (a private CA: point SSL_CERT_FILE at its PEM bundle)"
            if "CERTIFICATE_VERIFY_FAILED" in str(exc)
            else ""
        )
        raise EndpointUnreachableError(
            target.hide(f"{shown}: endpoint unreachable ({type(exc).__name__}: {exc}){hint}")
        ) from None


async def speaks(
    client: httpx.AsyncClient, target: Target, api: str, model: str, limit: float
) -> tuple[bool, str]:
    """Whether the target answers ``api`` (``responses``, ``messages``, ``gemini``): one small
    non-streamed request within ``limit`` seconds; (answered, what it said)."""
    url = target.urls.get(api, "")
    small: dict[str, Any] = {"model": model, "max_output_tokens": 16, "input": "hi"}
    if api == "messages":
        small = {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
    elif api == "gemini":
        url = gemini_url(target.base_url, model, stream=False)
        small = {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"maxOutputTokens": 1},
        }
    headers = target.api_headers(api) or None
    try:
        async with asyncio.timeout(limit):
            r = await client.post(url, content=orjson.dumps(small), headers=headers, timeout=limit)
    except (TimeoutError, httpx.HTTPError) as exc:
        return False, target.hide(f"{type(exc).__name__}")
    return r.status_code == 200, f"HTTP {r.status_code}"
