"""What the endpoint answers before any load: its models list, and which APIs it speaks.

Each question is one small request on the pool's shared client, bounded by ``limit``
(``StreamClient.probe_timeout_s``): an endpoint that accepts the connection and never answers
is one ``EndpointUnreachableError`` line within that bound, never a hang.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from agentload.auth import refused_key_message
from agentload.errors import EndpointError, EndpointUnreachableError, ModelNotFoundError
from agentload.masking import redact_url
from agentload.replay.target import Target

__all__ = ["list_models", "speaks"]


async def list_models(
    client: httpx.AsyncClient, target: Target, model: str, limit: float
) -> list[str]:
    """GET ``/models`` within ``limit`` seconds: the ids it lists, ``model`` among them;
    raises ``EndpointUnreachableError`` / ``EndpointError`` / ``ModelNotFoundError``."""
    shown = redact_url(target.models_url)
    r = await _get_models(client, target, shown, limit)
    if r.status_code in (401, 403):
        raise EndpointError(target.hide(refused_key_message(shown, r.status_code, r.content)))
    if r.status_code != 200:
        raise EndpointUnreachableError(f"{shown}: HTTP {r.status_code} from the models list")
    try:
        ids = [str(m["id"]) for m in r.json().get("data", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise EndpointUnreachableError(f"{shown}: not an OpenAI models list") from None
    if model not in ids:
        raise ModelNotFoundError(
            target.hide(
                f"{shown}: model {model!r} not served; available: {', '.join(ids) or 'none'}"
            )
        )
    return ids


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
    """Whether the target answers ``api`` (``responses``, ``messages``): one small
    non-streamed request within ``limit`` seconds; (answered, what it said)."""
    small: dict[str, Any] = (
        {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
        if api == "messages"
        else {"model": model, "max_output_tokens": 16, "input": "hi"}
    )
    headers = target.messages_headers if api == "messages" else None
    try:
        async with asyncio.timeout(limit):
            r = await client.post(
                target.urls[api], content=orjson.dumps(small), headers=headers, timeout=limit
            )
    except (TimeoutError, httpx.HTTPError) as exc:
        return False, target.hide(f"{type(exc).__name__}")
    return r.status_code == 200, f"HTTP {r.status_code}"
