"""The LLM node's client: one streamed chat completion, timed to the nanosecond, with retries.

    client = ChatClient(base_url, model=..., api_key=api_key_from_env(...))
    result = await client.complete(body, on_retry=record_event)

``body`` is the request exactly as sent (``messages``, ``tools``, parameters); ``complete`` adds
``stream=True`` and ``stream_options={"include_usage": True}`` so the server reports usage on
the last chunk. Timings are ``time.perf_counter_ns`` readings (injectable ``clock``): submit,
every chunk, first token (first content or tool-call delta), last token. Tool-call deltas are
reassembled by their ``index``.

Failures: connection errors, timeouts, 429 and 5xx are retried (``retries`` times, exponential
backoff, each retry reported through ``on_retry``); then ``SessionEnd("endpoint_error")``. A
400 that says the prompt is too long is ``SessionEnd("context_limit")`` at once.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from agentload.agents.limits import SessionEnd
from agentload.recorder.schema import Timings

__all__ = [
    "DUMMY_API_KEY",
    "ChatClient",
    "LLMResult",
    "api_key_from_env",
    "is_context_limit_error",
]

DUMMY_API_KEY = "agentload-simulator"
_KEY_VARS = ("AGENTLOAD_API_KEY", "OPENAI_API_KEY")
_CONTEXT_WORDS = (
    "context length",
    "context_length",
    "maximum context",
    "context window",
    "too many tokens",
    "prompt is too long",
    "input is too long",
)

Clock = Callable[[], int]
RetryHook = Callable[[int, str], Awaitable[None]]


def api_key_from_env(default: str | None = DUMMY_API_KEY) -> str | None:
    """The API key from ``AGENTLOAD_API_KEY`` or ``OPENAI_API_KEY`` (never from the command line)."""
    for var in _KEY_VARS:
        value = os.environ.get(var)
        if value:
            return value
    return default


def is_context_limit_error(message: str) -> bool:
    """Whether an endpoint's error text says the prompt exceeds the model's context."""
    low = message.lower()
    return any(w in low for w in _CONTEXT_WORDS)


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
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.retries = retries
        self.backoff_s = backoff_s
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
                if is_context_limit_error(text):
                    raise SessionEnd("context_limit", text) from None
                raise SessionEnd("endpoint_error", f"{self.base_url}: {text}") from None
            except (openai.NotFoundError, openai.AuthenticationError) as exc:
                raise SessionEnd("endpoint_error", f"{self.base_url}: {_error_text(exc)}") from None
            except (openai.APIConnectionError, openai.APIStatusError, _StreamBroken) as exc:
                text = _error_text(exc)
                if isinstance(exc, openai.APIStatusError) and is_context_limit_error(text):
                    raise SessionEnd("context_limit", text) from None
                if attempt > self.retries:
                    raise SessionEnd(
                        "endpoint_error", f"{self.base_url}: {text} (after {attempt} attempts)"
                    ) from None
                if on_retry is not None:
                    await on_retry(attempt, text)
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
                continue
            result.attempts = attempt
            return result

    async def _once(self, body: dict[str, Any]) -> LLMResult:
        clock = self.clock
        submit = clock()
        offsets: list[int] = []
        first: int | None = None
        last: int | None = None
        parts: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: dict[str, Any] | None = None
        stream = await self._client.chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True}
        )
        try:
            async for chunk in stream:
                now = clock()
                offsets.append(now - submit)
                if chunk.usage is not None:
                    usage = chunk.usage.model_dump(exclude_none=True)
                for choice in chunk.choices:
                    delta = choice.delta
                    got = False
                    if delta.content:
                        parts.append(delta.content)
                        got = True
                    for tc in delta.tool_calls or ():
                        slot = calls.setdefault(
                            tc.index,
                            {
                                "id": "",
                                "type": "function",
                                "function": {"name": "", "arguments": ""},
                            },
                        )
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            if tc.function.name:
                                slot["function"]["name"] += tc.function.name
                            if tc.function.arguments:
                                slot["function"]["arguments"] += tc.function.arguments
                        got = True
                    if got:
                        if first is None:
                            first = now
                        last = now
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except openai.APIError:
            raise
        except Exception as exc:  # httpx read errors mid-stream
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                raise _StreamBroken(str(exc) or type(exc).__name__) from exc
            raise
        finally:
            await stream.close()
        content = "".join(parts) if parts else None
        return LLMResult(
            content=content,
            tool_calls=[calls[i] for i in sorted(calls)],
            finish_reason=finish,
            usage=usage,
            timings=Timings(
                submit_ns=submit, first_token_ns=first, last_token_ns=last, chunk_offsets_ns=offsets
            ),
            chunks=len(offsets),
        )


class _StreamBroken(Exception):
    """The connection dropped in the middle of a stream (retried like a connection error)."""


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
