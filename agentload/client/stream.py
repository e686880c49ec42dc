"""``StreamClient``: one request to an LLM API sent and timed, the answer read into an ``Outcome``.

Replay sends each planned request with ``chat``; ``generate``'s agents send their calls with
``chat(reply=...)`` (``agents.llm``), which keeps the answer itself. The endpoint is probed
before any load (``probe``, ``model_to_use``), its connections warmed (``warm``), and a small
non-streamed request sent with ``post`` (the token calibration).

Times are ``clock()`` readings (``time.perf_counter_ns`` unless injected): ``send_ns`` when
the request's first bytes are written to the connection (the lean connection's stamp, or
httpcore's trace hook over HTTPS; the moment the client picked the connection when neither
fired), one reading per network read that
carries content (every SSE event in that read gets it), ``end_ns`` when the stream closed.
On plain-HTTP endpoints with the default clock, a read's time is the earlier of that reading
and the kernel's receive time of the data it returned (``netback``: ``SO_TIMESTAMPNS`` on
Linux, converted to the ``perf_counter_ns`` domain; kept only when it lies after ``send_ns``),
so a busy event loop does not delay first-token and chunk times; send times are always clock
readings.
A *content event* is a chunk whose delta has non-empty ``content``, ``reasoning_content`` or
``tool_calls``; TTFT is the first one. No retries: every failure becomes an ``Outcome`` with
an error kind (``http_<status>``, ``context_overflow``, ``timeout``, ``connect``, ``reset``,
``truncated``, ``stream_error``) and never an exception.

Every network step is bounded. ``--timeout`` bounds each request as a whole, from the moment
it is due (a wait for a free connection included) to the end of its stream, however the
endpoint trickles or stalls; a request whose time ran out ends within 10 ms of it
(``deadline``: one loop timer per 10 ms tick, not one per request). The ``/models`` probe
and the connection warm-up are bounded by ``probe_timeout_s`` (``min(--timeout,
PROBE_TIMEOUT_S)``): an endpoint that accepts the connection and never answers is one
``EndpointUnreachableError`` line within that bound.
Request URLs are the base URL's path plus the endpoint's (``/models``, ``/chat/completions``)
with the base URL's query kept after it (``…/v1/chat/completions?api-version=…``) and its
``user:password@`` sent nowhere (the key travels as ``Authorization: Bearer``); a URL is
shown only through ``agentload.auth.redact_url``, and the credentials it or the API key carry
are scrubbed out of every error text.

``StreamClient`` holds the request's timing and bounds; the rest of ``agentload.client`` lives
beside it (see the package docstring).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import orjson

from agentload.client.deadline import Deadlines
from agentload.client.failures import transport_failure
from agentload.client.gate import Due
from agentload.client.kstamps import KernelStamps
from agentload.client.lean import LeanError
from agentload.client.outcome import Outcome
from agentload.client.pool import Connection, ConnectionPool
from agentload.client.probe import list_models, simulator_profile
from agentload.client.probe import model_to_use as pick_model
from agentload.client.probe import speaks as answers_api
from agentload.client.streams import ChunkHook, read_answer
from agentload.client.target import ANTHROPIC_VERSION, Target, endpoint_url
from agentload.errortext import clip
from agentload.measure.errorkinds import ErrorKind

__all__ = ["ANTHROPIC_VERSION", "PROBE_TIMEOUT_S", "Outcome", "StreamClient", "endpoint_url"]

PROBE_TIMEOUT_S = 10.0
"""Longest wait for the ``/models`` probe, and for the warm-up before each point."""


class StreamClient:
    """Sends chat completions and times their streams (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_connections: int = 100,
        headers: Mapping[str, str] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self._target = Target.of(base_url, api_key, headers)
        self.base_url = self._target.base_url
        self.timeout_s = timeout_s
        self.probe_timeout_s = min(timeout_s, PROBE_TIMEOUT_S)
        self.clock = clock
        # Kernel receive times are perf_counter_ns readings only; an injected clock gets none.
        self._stamps = (
            KernelStamps() if clock is time.perf_counter_ns and not self._target.https else None
        )
        self._pool = ConnectionPool(
            self._target, timeout_s=timeout_s, max_connections=max_connections, stamps=self._stamps
        )
        self.max_connections = max_connections
        self._limits: Deadlines | None = None

    def _deadlines(self) -> Deadlines:
        """The time limits of this loop's requests (made anew when the client moved loops)."""
        loop = asyncio.get_running_loop()
        limits = self._limits
        if limits is None or limits.loop is not loop:
            limits = self._limits = Deadlines(loop)
        return limits

    async def aclose(self) -> None:
        await self._pool.aclose()
        if self._stamps is not None:
            self._stamps.close()

    def set_tick(self, tick: Callable[[], None] | None) -> None:
        """Call ``tick`` before each socket read is handled (plain-HTTP connections), or stop
        (None): replay's ``Waker.poll``, so a send due between two reads leaves then."""
        self._pool.backend.tick = tick

    def hide(self, text: str) -> str:
        """``text`` with every credential of the base URL (learned by ``split_base_url``) and
        the API key replaced."""
        return self._target.hide(text)

    async def probe(self, model: str) -> list[str]:
        """GET ``/models`` within ``probe_timeout_s``: raises ``EndpointUnreachableError`` /
        ``ModelNotFoundError``."""
        return await list_models(self._pool.shared, self._target, model, self.probe_timeout_s)

    async def simulator_profile(self, model: str | None) -> str | None:
        """The profile of agentload's own simulator when it serves ``model`` here (else None):
        its timings are that profile's model of a server (``probe.simulator_profile``)."""
        return await simulator_profile(self._pool.shared, self._target, model, self.probe_timeout_s)

    async def model_to_use(self, model: str | None) -> str:
        """The model an agent run talks to (``probe.model_to_use``), within
        ``probe_timeout_s``."""
        return await pick_model(self._pool.shared, self._target, model, self.probe_timeout_s)

    async def post(self, path: str, body: dict[str, Any], limit_s: float) -> Outcome:
        """One small non-streamed request (``path`` after the base URL's, e.g.
        ``/completions``) within ``limit_s``: its status and whole ``body``, or its failure
        (``error_kind``, ``error``; secrets hidden); never raises for the endpoint's failures."""
        out = Outcome(send_ns=self.clock())
        url = endpoint_url(self._target.base_url, path)
        try:
            async with asyncio.timeout(limit_s):
                resp = await self._pool.shared.post(
                    url, content=orjson.dumps(body), timeout=limit_s
                )
            out.status, out.body = resp.status_code, resp.content
        except TimeoutError:
            out.error_kind, out.error = ErrorKind.TIMEOUT, f"no answer within {limit_s:g}s"
        except (httpx.HTTPError, OSError) as exc:
            out.error_kind, out.error = transport_failure(exc)
            out.error = self.hide(out.error)
        out.end_ns = self.clock()
        return out

    async def warm(self, n: int, parallel: int = 64) -> int:
        """Open up to ``n`` pooled connections ahead of the load (one ``GET /models`` each), so
        connection setup is not inside the first requests' TTFT; returns how many opened.
        Best effort, and done within ``probe_timeout_s``: a connection not open by then is
        closed, and the load opens it when it needs it."""
        return await self._pool.warm(n, parallel, self.probe_timeout_s)

    async def speaks(self, api: str, model: str) -> tuple[bool, str]:
        """Whether the target answers ``api`` (``responses``, ``messages``, ``gemini``): one small
        non-streamed request within ``probe_timeout_s``; (answered, what it said)."""
        return await answers_api(self._pool.shared, self._target, api, model, self.probe_timeout_s)

    async def chat(
        self,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        api: str = "chat",
        *,
        reply: ChunkHook | bool = False,
        limit_s: float | None = None,
        due: Due | None = None,
        model: str = "",
        out: Outcome | None = None,
    ) -> Outcome:
        """Send one streaming request (in ``api``: chat, or a call's recorded Responses,
        Messages or Gemini; a Gemini call to ``model``, which its path names), within
        ``limit_s`` (default ``timeout_s``) from now (a wait for a free connection and for
        ``due`` included); never raises for endpoint failures. With ``reply``, the answer
        itself is kept in ``Outcome.reply`` (see ``streams.read_answer``). With ``due``, the
        request goes at its time, written by its gate (``client.gate``). ``out``: the outcome
        to fill in (its first chunk's time is there to read while the answer streams)."""
        clock = self.clock
        if out is None:
            out = Outcome(send_ns=clock())
        else:
            out.send_ns = clock()
        pool = self._pool
        limit = self.timeout_s if limit_s is None else limit_s
        if due is not None and due[1] > out.send_ns:
            limit += (due[1] - out.send_ns) / 1e9  # the bound runs from the due time
        limits = self._deadlines()
        bound = limits.enter(limit)
        try:
            async with pool.slots:
                conn = pool.take()
                out.send_ns = clock()
                if api in ("messages", "gemini"):
                    headers = {**self._target.api_headers(api), **(headers or {})}
                try:
                    await self._exchange(conn, body, headers, out, (api, model), reply, due)
                finally:
                    pool.put(conn)
        except asyncio.CancelledError:
            if not bound.timed_out():
                raise
            out.error_kind = ErrorKind.TIMEOUT
            out.error = f"no complete answer in {limit:g}s"
        finally:
            limits.leave(bound)
        out.end_ns = clock()
        if out.error is not None:
            out.error = clip(self.hide(out.error))
        return out

    async def _exchange(
        self,
        conn: Connection,
        body: bytes,
        headers: Mapping[str, str] | None,
        out: Outcome,
        route: tuple[str, str],
        reply: ChunkHook | bool,
        due: Due | None,
    ) -> None:
        """Send one request on ``conn`` to ``route`` (its API, and the model a Gemini path
        names) and read its answer into ``out``; a failure of the connection becomes its error
        kind, never an exception."""
        clock = self.clock
        api, model = route

        def stamp() -> None:
            out.send_ns = clock()

        try:
            resp = await self._pool.open(conn, api, body, headers, stamp, due, model)
            try:
                await read_answer(resp, out, api, clock, reply)
            finally:
                await resp.aclose()
        except (httpx.HTTPError, LeanError, OSError) as exc:
            out.error_kind, out.error = transport_failure(exc)
