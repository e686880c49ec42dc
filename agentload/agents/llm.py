"""The LLM node's client: one streamed chat completion, timed to the nanosecond, with retries.

    client = ChatClient(base_url, model=...)   # key: api_key=, else agentload.auth's, else a dummy
    result = await client.complete(body, on_retry=record_event)

``body`` is the request exactly as sent (``messages``, ``tools``, parameters); ``complete`` adds
``stream=True`` and ``stream_options={"include_usage": True}`` so the server reports usage on
the last chunk. It is sent by ``agentload.client``, the one client of the LLM APIs that replay
uses too: the same URL and secrets policy, connections, kernel receive times, stream reader
(``wire``: text and tool calls reassembled) and error kinds. Timings are
``time.perf_counter_ns`` readings: submit (the request's first bytes on
the connection), every event, first token (first content or tool-call delta), last token.

Failures are classified once (``agentload.client.failures.verdict``): no connection, a
timeout, a stream cut or garbled, 429, 502/503/504 and a plain 500 are retried (``retries``
times, exponential backoff, each retry reported through ``on_retry`` just before it is sent);
then ``SessionEnd("endpoint_error")``. When the server says how long to wait (``Retry-After``:
seconds or an HTTP date, as rate-limited APIs send with 429/503), the wait is at least that, up
to ``max_retry_after_s``. An error that says the prompt is too long is
``SessionEnd("context_limit")`` at once; one that will repeat — another 4xx (400, 401, 404,
422), a 500 whose text says the request is malformed (llama.cpp's "Failed to parse tool call
arguments as JSON"), or a 500 whose text is the previous attempt's — is
``SessionEnd("endpoint_error")`` at once. ``SessionEnd.cause`` names the verdict; the server's
text is clipped (``agentload.errortext.clip``) and its secrets masked.

Time limits: one attempt — a wait for a connection, connecting, the first byte and the whole
stream — gets at most ``call_timeout_s``; a stream that stalls, drips or never ends is cut
there. With a ``deadline`` (the session's wall budget), an attempt is also cut when the deadline
passes, and a retry whose wait would end past it is not made: ``SessionEnd("wall_budget")``.
So a call gives up within ``(retries + 1) * call_timeout_s`` plus the backoff waits.

The base URL's query parameters go on every request; its ``user:password@`` goes nowhere
(``agentload.auth.split_base_url``); messages name the URL with its secrets masked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentload.agents.limits import DEFAULT_CALL_TIMEOUT_S, Deadline, EndReason, SessionEnd
from agentload.auth import api_key_from_env
from agentload.client.failures import Verdict, answer_text, retry_after_s, verdict
from agentload.client.outcome import Outcome
from agentload.client.stream import StreamClient
from agentload.errortext import clip
from agentload.masking import mask_text, redact_url
from agentload.measure.errorkinds import ErrorKind
from agentload.options.engines import EnginePreset, session_headers
from agentload.trace.schema import Timings

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "DUMMY_API_KEY",
    "MAX_CONNECTIONS",
    "AgentSession",
    "ChatClient",
    "LLMResult",
]

DUMMY_API_KEY = "agentload-simulator"
MAX_CONNECTIONS = 1000
"""The most calls a run's client has in flight at once (the rest wait for a connection)."""

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


_WHY: dict[str, str] = {
    Verdict.BAD_REQUEST: "the endpoint refused the request, and would refuse it again",
    Verdict.REQUEST_ERROR: "the server says the request itself is malformed",
    Verdict.REPEATED: "the same error came back on the retry",
}


@dataclass(frozen=True)
class AgentSession:
    """Who makes a call, as session headers name it: the session, the calling agent's own
    session (the session's id for its root agent) and its parent's (None for the root)."""

    session: str
    agent: str
    parent: str | None = None


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
        max_retry_after_s: float = 120.0,
        engine: EnginePreset | None = None,
    ) -> None:
        self.base_url = redact_url(base_url)
        """The URL as messages show it (secrets masked)."""
        self.model = model
        self.retries = retries
        self.backoff_s = backoff_s
        self.call_timeout_s = call_timeout_s
        self.max_retry_after_s = max_retry_after_s
        self.clock: Clock = time.perf_counter_ns
        self.engine = engine
        """The target's preset: which session headers a call carries (``headers``)."""
        self._http = StreamClient(
            base_url,
            api_key=api_key or api_key_from_env() or DUMMY_API_KEY,
            timeout_s=call_timeout_s,
            max_connections=MAX_CONNECTIONS,
            clock=self.clock,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def headers(self, who: AgentSession | None) -> dict[str, str] | None:
        """The session headers of a call by ``who``: none without a preset that names a
        session header; the session's id; with a parent header (Dynamo), the agent's own
        session id and its parent's."""
        e = self.engine
        if e is None or who is None:
            return None
        return session_headers(
            e.session_header, e.parent_header, who.session, who.agent, who.parent
        )

    async def complete(
        self,
        body: dict[str, Any],
        on_retry: RetryHook | None = None,
        deadline: Deadline | None = None,
        on_chunk: ChunkHook | None = None,
        who: AgentSession | None = None,
    ) -> LLMResult:
        """Send ``body`` (streamed); retry transient failures; raise ``SessionEnd`` at the end
        (see the module docstring for the time limits and the error classes). ``on_chunk``
        gets the count of reply chunks (text or tool-call deltas) the attempt has received so
        far, after each one. ``who``: the agent making the call (its session headers)."""
        payload = orjson.dumps({**body, "stream": True, "stream_options": {"include_usage": True}})
        headers = self.headers(who)
        attempt = 0
        last: str | None = None
        while True:
            attempt += 1
            left = deadline.remaining_s() if deadline is not None else None
            by_budget = left is not None and left < self.call_timeout_s
            limit = left if by_budget and left is not None else self.call_timeout_s
            out = await self._http.chat(
                payload, headers, reply=on_chunk or True, limit_s=max(limit, 0.0)
            )
            if out.ok or out.error_kind == ErrorKind.INVALID_USAGE:
                return _result(out, attempt)
            if out.error_kind == ErrorKind.TIMEOUT:
                if by_budget:
                    raise SessionEnd(
                        EndReason.WALL_BUDGET,
                        f"the session's wall-clock budget ran out during a call to "
                        f"{self.base_url} (attempt {attempt})",
                        cause="wall_budget",
                    )
                text = f"no complete reply within {self.call_timeout_s:g}s (--call-timeout)"
                await self._wait_to_retry(attempt, text, None, on_retry, deadline)
                continue
            text = _error_text(out)
            said = verdict(out.error_kind or "", out.status, text, last)
            if said == Verdict.CONTEXT_OVERFLOW:
                raise SessionEnd(EndReason.CONTEXT_LIMIT, text, cause=said)
            if said != Verdict.TRANSIENT:
                raise SessionEnd(
                    EndReason.ENDPOINT_ERROR,
                    f"{self.base_url}: {text} (not retried: {_WHY[said]})",
                    cause=said,
                )
            last = text
            asked = retry_after_s(out.retry_after)
            await self._wait_to_retry(attempt, text, asked, on_retry, deadline)

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


def _result(out: Outcome, attempt: int) -> LLMResult:
    """The ``LLMResult`` of a call that succeeded (a usage report that holds no token counts
    is dropped: the reply stands)."""
    reply = out.reply
    assert reply is not None and out.event_ns is not None
    submit = out.send_ns
    return LLMResult(
        content=reply.content,
        tool_calls=reply.tool_calls,
        finish_reason=reply.finish_reason,
        usage=None if out.error_kind == ErrorKind.INVALID_USAGE else reply.usage,
        timings=Timings(
            submit_ns=submit,
            first_token_ns=out.first_ns,
            last_token_ns=out.chunk_ns[-1] if out.chunk_ns else None,
            chunk_offsets_ns=[t - submit for t in out.event_ns],
        ),
        attempts=attempt,
        chunks=len(out.event_ns),
    )


def _error_text(out: Outcome) -> str:
    """One line of what went wrong, secrets masked (a server may echo the key it was sent),
    the server's text clipped (``agentload.errortext.clip``)."""
    if out.body is not None and out.status is not None:
        raw = answer_text(out.status, out.body)
    else:
        raw = out.error or str(out.error_kind)
    return clip(mask_text(raw).replace("\n", " "))
