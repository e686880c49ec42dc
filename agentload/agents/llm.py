"""The LLM node's client: one streamed chat completion, timed to the nanosecond, with retries.

    client = ChatClient(base_url, model=...)   # key: api_key=, else agentload.auth's, else a dummy
    result = await client.complete(body, on_retry=record_event)

``body`` is the request exactly as sent (``messages``, ``tools``, parameters); ``complete`` adds
``stream=True`` and ``stream_options={"include_usage": True}`` so the server reports usage on
the last chunk. Timings are ``time.perf_counter_ns`` readings (injectable ``clock``): submit,
every chunk, first token (first content or tool-call delta), last token. Tool-call deltas are
reassembled by their ``index``.

Failures are classified once (:func:`classify`): connection errors, timeouts, a stream cut or
garbled, 429, 502/503/504 and a plain 500 are retried (``retries`` times, exponential backoff,
each retry reported through ``on_retry`` just before it is sent); then
``SessionEnd("endpoint_error")``. When the server says how long to wait (``Retry-After``:
seconds or an HTTP date, as rate-limited APIs send with 429/503), the wait is at least that, up
to ``max_retry_after_s``. An error that says the prompt is too long is
``SessionEnd("context_limit")`` at once; one that will repeat — another 4xx (400, 401, 404,
422), a 500 whose text says the request is malformed (llama.cpp's "Failed to parse tool call
arguments as JSON"), or a 500 whose text is the previous attempt's — is
``SessionEnd("endpoint_error")`` at once. ``SessionEnd.cause`` names the class; the server's
text is clipped (``agentload.errortext.clip``) and its secrets masked.

Time limits: one attempt — connecting, the first byte, every gap between chunks and the whole
stream — gets at most ``call_timeout_s``; a stream that stalls, drips or never ends is cut
there. With a ``deadline`` (the session's wall budget), an attempt is also cut when the deadline
passes, and a retry whose wait would end past it is not made: ``SessionEnd("wall_budget")``.
So a call gives up within ``(retries + 1) * call_timeout_s`` plus the backoff waits.

The base URL's query parameters go on every request; its ``user:password@`` goes nowhere
(``agentload.auth.split_base_url``); messages name the URL with its secrets masked.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import openai
import orjson

from agentload.agents.limits import DEFAULT_CALL_TIMEOUT_S, Deadline, EndReason, SessionEnd
from agentload.auth import api_key_from_env, split_base_url
from agentload.errortext import clip, is_context_overflow, is_request_error
from agentload.masking import mask_text, redact_url

try:  # openai >= 3 speaks through its `httpx2` fork; older releases through httpx itself
    import httpx2
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx as httpx2  # type: ignore[no-redef]
from agentload.trace.schema import Timings

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "DUMMY_API_KEY",
    "ChatClient",
    "LLMResult",
    "Verdict",
    "classify",
]

DUMMY_API_KEY = "agentload-simulator"
_RAW = "X-Stainless-Raw-Response"

Clock = Callable[[], int]
RetryHook = Callable[[int, str], Awaitable[None]]
ChunkHook = Callable[[int], None]


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
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        clock: Clock = time.perf_counter_ns,
        max_retry_after_s: float = 120.0,
    ) -> None:
        clean, query = split_base_url(base_url)
        self.base_url = redact_url(base_url)
        """The URL as messages show it (secrets masked)."""
        self.model = model
        self.retries = retries
        self.backoff_s = backoff_s
        self.call_timeout_s = call_timeout_s
        self.max_retry_after_s = max_retry_after_s
        self.clock = clock
        self._client = openai.AsyncOpenAI(
            base_url=clean,
            api_key=api_key or api_key_from_env() or DUMMY_API_KEY,
            max_retries=0,
            timeout=call_timeout_s,
            default_query=query or None,
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self,
        body: dict[str, Any],
        on_retry: RetryHook | None = None,
        deadline: Deadline | None = None,
        on_chunk: ChunkHook | None = None,
    ) -> LLMResult:
        """Send ``body`` (streamed); retry transient failures; raise ``SessionEnd`` at the end
        (see the module docstring for the time limits and the error classes). ``on_chunk``
        gets the count of reply chunks (text or tool-call deltas) the attempt has received so
        far, after each one."""
        attempt = 0
        last: str | None = None
        while True:
            attempt += 1
            left = deadline.remaining_s() if deadline is not None else None
            by_budget = left is not None and left < self.call_timeout_s
            try:
                async with asyncio.timeout(left if by_budget else self.call_timeout_s):
                    result = await self._once(body, on_chunk)
            except TimeoutError:
                if by_budget:
                    raise SessionEnd(
                        EndReason.WALL_BUDGET,
                        f"the session's wall-clock budget ran out during a call to "
                        f"{self.base_url} (attempt {attempt})",
                        cause="wall_budget",
                    ) from None
                text = f"no complete reply within {self.call_timeout_s:g}s (--call-timeout)"
                await self._wait_to_retry(attempt, text, None, on_retry, deadline)
            except (openai.APIConnectionError, openai.APIStatusError, _StreamBroken) as exc:
                text = _error_text(exc)
                verdict = classify(exc, text, last)
                if verdict == "context_overflow":
                    raise SessionEnd(EndReason.CONTEXT_LIMIT, text, cause=verdict) from None
                if verdict != "transient":
                    raise SessionEnd(
                        EndReason.ENDPOINT_ERROR,
                        f"{self.base_url}: {text} (not retried: {_WHY[verdict]})",
                        cause=verdict,
                    ) from None
                last = text
                await self._wait_to_retry(attempt, text, _retry_after_s(exc), on_retry, deadline)
            else:
                result.attempts = attempt
                return result

    async def _wait_to_retry(
        self,
        attempt: int,
        text: str,
        asked: float | None,
        on_retry: RetryHook | None,
        deadline: Deadline | None,
    ) -> None:
        """Back off before attempt ``attempt + 1``, or raise ``SessionEnd`` when no retry is
        left (``endpoint_error``) or the wait would outlast the wall budget (``wall_budget``)."""
        if attempt > self.retries:
            raise SessionEnd(
                EndReason.ENDPOINT_ERROR,
                f"{self.base_url}: {text} (after {attempt} attempts)",
                cause="retries_exhausted",
            )
        delay = self.backoff_s * 2 ** (attempt - 1)
        if asked is not None:
            delay = max(delay, min(asked, self.max_retry_after_s))
            text += f" (retry after {delay:g}s, as the server asked)"
        left = deadline.remaining_s() if deadline is not None else None
        if left is not None and left <= delay:
            raise SessionEnd(
                EndReason.WALL_BUDGET,
                f"{self.base_url}: {text}; the wall-clock budget ends before the retry",
                cause="wall_budget",
            )
        await asyncio.sleep(delay)
        if on_retry is not None:
            await on_retry(attempt, text)

    async def _once(self, body: dict[str, Any], on_chunk: ChunkHook | None) -> LLMResult:
        clock = self.clock
        payload = orjson.dumps({**body, "stream": True, "stream_options": {"include_usage": True}})
        acc = _Accumulator(on_chunk)
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
        done = False
        try:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":  # read on to the end: the connection goes back to the pool
                    done = True
                else:
                    acc.feed(orjson.loads(data), clock(), submit)
        except openai.APIError:
            raise
        except orjson.JSONDecodeError as exc:
            raise _StreamBroken(f"bad chunk from the endpoint: {exc}") from exc
        except Exception as exc:  # httpx read errors mid-stream
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                raise _StreamBroken(f"the stream broke off ({why})") from exc
            raise
        finally:
            await response.aclose()
        if not done and acc.finish is None:
            raise _StreamBroken("the stream ended before the reply was complete (no [DONE])")
        return acc.result(submit)


class _Accumulator:
    """Reassembles streamed chunks: text, tool calls by index, usage, per-chunk times."""

    def __init__(self, on_chunk: ChunkHook | None = None) -> None:
        self.on_chunk = on_chunk
        self.deltas = 0
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
            raise _StreamBroken(f"error in the stream: {msg}", server=True)
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
                self.deltas += 1
                if self.on_chunk is not None:
                    self.on_chunk(self.deltas)
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
    """The stream broke off, was garbled or carried an error event (``server``: the server's
    own error text, classified like an error response's)."""

    def __init__(self, text: str, *, server: bool = False) -> None:
        super().__init__(text)
        self.server = server


Verdict = Literal["transient", "context_overflow", "bad_request", "request_error", "repeated"]
"""What a failed attempt means: retry it, or end the session (``context_limit`` for an
overflow, ``endpoint_error`` for the rest)."""

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 502, 503, 504})
_WHY: dict[str, str] = {
    "bad_request": "the endpoint refused the request, and would refuse it again",
    "request_error": "the server says the request itself is malformed",
    "repeated": "the same error came back on the retry",
}


def classify(exc: BaseException, text: str, last: str | None) -> Verdict:
    """The one classification of a failed attempt (``text``: its error text; ``last``: the
    previous attempt's, if it failed too):

    * an error whose text (or OpenAI ``code``/``type``) says the prompt does not fit:
      ``context_overflow``, at any status;
    * 408, 409, 425, 429, 502, 503, 504, connection errors, timeouts, a stream cut or garbled:
      ``transient`` (retried with backoff);
    * any other 4xx (400, 401, 403, 404, 422 ...): ``bad_request``;
    * another 5xx (a plain 500): ``transient``, unless its text says the request itself is
      malformed (``request_error``, as llama.cpp's "Failed to parse tool call arguments as
      JSON") or the previous attempt failed with the same text (``repeated``).
    """
    if isinstance(exc, openai.APIStatusError):
        if is_context_overflow(f"{text} {_error_code(exc)}"):
            return "context_overflow"
        status = exc.status_code
        if status in _TRANSIENT_STATUS:
            return "transient"
        if status < 500:
            return "bad_request"
        if is_request_error(text):
            return "request_error"
        return "repeated" if text == last else "transient"
    if isinstance(exc, _StreamBroken) and exc.server:
        if is_context_overflow(text):
            return "context_overflow"
        if is_request_error(text):
            return "request_error"
    return "transient"


def _error_code(exc: openai.APIStatusError) -> str:
    """The OpenAI-style ``code`` and ``type`` of an error body (``context_length_exceeded``)."""
    body = exc.body
    err = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return ""
    return " ".join(str(err[k]) for k in ("code", "type") if isinstance(err.get(k), str))


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
    """One line of what went wrong, secrets masked (a server may echo the key it was sent),
    the server's text clipped (``agentload.errortext.clip``)."""
    return clip(mask_text(_raw_error_text(exc)).replace("\n", " "))


def _raw_error_text(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        if isinstance(body, dict):
            err = body.get("error", body)
            msg = err.get("message") if isinstance(err, dict) else None
            if msg:
                return f"HTTP {exc.status_code}: {msg}"
        return f"HTTP {exc.status_code}: {exc.message}"
    return str(exc) or type(exc).__name__
