"""The LLM node's client: one streamed chat completion, timed to the nanosecond, with retries.

    client = ChatClient(base_url, model=...)   # key: api_key=, else agentload.auth's, else a dummy
    result = await client.complete(body, on_retry=record_event)

``body`` is the request exactly as sent (``messages``, ``tools``, parameters); ``complete`` adds
``stream=True`` and ``stream_options={"include_usage": True}`` so the server reports usage on
the last chunk. Timings are ``time.perf_counter_ns`` readings (injectable ``clock``): submit,
every chunk, first token (first content or tool-call delta), last token. Tool-call deltas are
reassembled by their ``index``.

Failures: connection errors, timeouts, 429 and 5xx are retried (``retries`` times, exponential
backoff, each retry reported through ``on_retry``); then ``SessionEnd("endpoint_error")``. When
the server says how long to wait (``Retry-After``: seconds or an HTTP date, as rate-limited
APIs send with 429/503), the wait is at least that, up to ``max_retry_after_s``. A 400 that
says the prompt is too long is ``SessionEnd("context_limit")`` at once.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
import orjson

from agentload.agents.limits import SessionEnd
from agentload.auth import api_key_from_env
from agentload.errortext import is_context_overflow

try:  # openai >= 3 speaks through its `httpx2` fork; older releases through httpx itself
    import httpx2
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx as httpx2  # type: ignore[no-redef]
from agentload.recorder.schema import Timings

__all__ = [
    "DUMMY_API_KEY",
    "ChatClient",
    "LLMResult",
]

DUMMY_API_KEY = "agentload-simulator"
_RAW = "X-Stainless-Raw-Response"

Clock = Callable[[], int]
RetryHook = Callable[[int, str], Awaitable[None]]


@dataclass
class LLMResult:
    """One completed call: the reply, the server's usage and the timings."""

    content: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    usage: dict[str, Any] | None
    timings: Timings
    attempts: int = 1
    chunks: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt_tokens(self) -> int | None:
        """Server-reported prompt tokens, when the server reported usage."""
        if not self.usage:
            return None
        value = self.usage.get("prompt_tokens")
        return int(value) if value is not None else None

    @property
    def completion_tokens(self) -> int:
        if not self.usage:
            return 0
        return int(self.usage.get("completion_tokens") or 0)


class ChatClient:
    """Streams chat completions from an OpenAI-compatible endpoint (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        retries: int = 3,
        backoff_s: float = 0.5,
        timeout_s: float = 600.0,
        clock: Clock = time.perf_counter_ns,
        max_retry_after_s: float = 120.0,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_retry_after_s = max_retry_after_s
        self.clock = clock
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or api_key_from_env() or DUMMY_API_KEY,
            max_retries=0,
            timeout=timeout_s,
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(self, body: dict[str, Any], on_retry: RetryHook | None = None) -> LLMResult:
        """Send ``body`` (streamed); retry transient failures; raise ``SessionEnd`` at the end."""
        attempt = 0
        while True:
            attempt += 1
            try:
                result = await self._once(body)
            except openai.BadRequestError as exc:
                text = _error_text(exc)
                if is_context_overflow(text):
                    raise SessionEnd("context_limit", text) from None
                raise SessionEnd("endpoint_error", f"{self.base_url}: {text}") from None
            except (openai.NotFoundError, openai.AuthenticationError) as exc:
                raise SessionEnd("endpoint_error", f"{self.base_url}: {_error_text(exc)}") from None
            except (openai.APIConnectionError, openai.APIStatusError, _StreamBroken) as exc:
                text = _error_text(exc)
                if isinstance(exc, openai.APIStatusError) and is_context_overflow(text):
                    raise SessionEnd("context_limit", text) from None
                if attempt > self.retries:
                    raise SessionEnd(
                        "endpoint_error", f"{self.base_url}: {text} (after {attempt} attempts)"
                    ) from None
                delay = self.backoff_s * 2 ** (attempt - 1)
                asked = _retry_after_s(exc)
                if asked is not None:
                    delay = max(delay, min(asked, self.max_retry_after_s))
                    text += f" (retry after {delay:g}s, as the server asked)"
                if on_retry is not None:
                    await on_retry(attempt, text)
                await asyncio.sleep(delay)
                continue
            result.attempts = attempt
            return result

    async def _once(self, body: dict[str, Any]) -> LLMResult:
        clock = self.clock
        payload = orjson.dumps({**body, "stream": True, "stream_options": {"include_usage": True}})
        acc = _Accumulator()
        submit = clock()
        # The SDK's HTTP layer (auth, base URL, errors mapped to openai.APIStatusError), with
        # the stream read raw: its typed stream builds a pydantic object per chunk, which was
        # most of a session's CPU time; chunks are parsed with orjson here instead.
        response = await self._client.post(
            "/chat/completions",
            cast_to=httpx2.Response,
            content=payload,
            options={"headers": {"Content-Type": "application/json", _RAW: "stream"}},
            stream=True,
        )
        try:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data != "[DONE]":  # read on to the end: the connection goes back to the pool
                    acc.feed(orjson.loads(data), clock(), submit)
        except openai.APIError:
            raise
        except orjson.JSONDecodeError as exc:
            raise _StreamBroken(f"bad chunk from the endpoint: {exc}") from exc
        except Exception as exc:  # httpx read errors mid-stream
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                raise _StreamBroken(str(exc) or type(exc).__name__) from exc
            raise
        finally:
            await response.aclose()
        return acc.result(submit)


class _Accumulator:
    """Reassembles streamed chunks: text, tool calls by index, usage, per-chunk times."""

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.first: int | None = None
        self.last: int | None = None
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None

    def feed(self, chunk: dict[str, Any], now: int, submit: int) -> None:
        self.offsets.append(now - submit)
        if chunk.get("error"):
            err = chunk["error"]
            msg = err.get("message") if isinstance(err, dict) else str(err)
            raise _StreamBroken(f"error in the stream: {msg}")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            got = False
            if delta.get("content"):
                self.parts.append(delta["content"])
                got = True
            for tc in delta.get("tool_calls") or ():
                slot = self.calls.setdefault(
                    int(tc.get("index", 0)),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if tc.get("id"):
                    slot["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    slot["function"]["name"] += fn["name"]
                if fn.get("arguments"):
                    slot["function"]["arguments"] += fn["arguments"]
                got = True
            if got:
                if self.first is None:
                    self.first = now
                self.last = now
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def result(self, submit: int) -> LLMResult:
        return LLMResult(
            content="".join(self.parts) if self.parts else None,
            tool_calls=[self.calls[i] for i in sorted(self.calls)],
            finish_reason=self.finish,
            usage=self.usage,
            timings=Timings(
                submit_ns=submit,
                first_token_ns=self.first,
                last_token_ns=self.last,
                chunk_offsets_ns=self.offsets,
            ),
            chunks=len(self.offsets),
        )


class _StreamBroken(Exception):
    """The connection dropped in the middle of a stream (retried like a connection error)."""


def _retry_after_s(exc: BaseException) -> float | None:
    """The wait a ``Retry-After`` header of an error response asks for, in seconds."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    value = exc.response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        if isinstance(body, dict):
            err = body.get("error", body)
            msg = err.get("message") if isinstance(err, dict) else None
            if msg:
                return f"HTTP {exc.status_code}: {msg}"
        return f"HTTP {exc.status_code}: {exc.message}"
    return str(exc) or type(exc).__name__
