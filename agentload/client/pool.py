"""The client's connections to the endpoint: one connection per stream.

httpx's shared pool scans every connection on every request (quadratic at 1,000 streams), so
each concurrent stream gets a connection of its own, taken from the idle ones last-in
first-out and put back when its stream ends; a semaphore (``slots``) bounds how many are in
use. On plain HTTP a stream's connection is a ``lean.LeanConnection`` (``netback``'s asyncio
socket with kernel receive times, read with ``http1``'s strict framing); on HTTPS it is a single-connection httpx
client, and those share one TLS context. The probes (``/models``, the API checks, ``post``)
go through one small shared httpx client (``shared``). Idle connections are kept
``KEEPALIVE_S``. A request written into a kept-alive connection that the server closed as it
went out is sent once more, on a new connection.
"""

from __future__ import annotations

import asyncio
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import httpcore
import httpx

from agentload.client.gate import Due
from agentload.client.kstamps import KernelStamps
from agentload.client.lean import LeanConnection, read_upto
from agentload.client.netback import AsyncioBackend
from agentload.client.streams import Answer, stamped
from agentload.client.target import Target

__all__ = ["KEEPALIVE_S", "Connection", "ConnectionPool", "HttpxAnswer"]

Connection = LeanConnection | httpx.AsyncClient
"""One stream's connection: lean on plain HTTP, a single-connection httpx client on HTTPS."""

KEEPALIVE_S = 4.0
"""How long an idle connection is kept for the next request: under the 5 s after which
uvicorn (vLLM, SGLang) and cpp-httplib (llama.cpp) close an idle one, so a request is rarely
written into a connection the server is closing (httpx's default is those same 5 s)."""


class ConnectionPool:
    """The connections of one ``StreamClient``: a small shared httpx client (probes) and one
    connection per stream."""

    def __init__(
        self,
        target: Target,
        *,
        timeout_s: float,
        max_connections: int,
        stamps: KernelStamps | None,
    ) -> None:
        self.target = target
        self.stamps = stamps
        # Streams are bounded as a whole (``StreamClient.chat``), so reads and writes need
        # no timer each.
        self.connect_s = min(timeout_s, 30.0)
        self.timeout = httpx.Timeout(None, connect=self.connect_s)
        # One TLS context for every connection (building one costs ~30 ms); none for http.
        self.verify: ssl.SSLContext | bool = ssl.create_default_context() if target.https else False
        # plain HTTP over asyncio sockets needs loop.add_reader, which Windows' default
        # (proactor) loop lacks
        self.lean = not target.https and sys.platform != "win32"
        self.backend = AsyncioBackend(stamps)
        self.paths = {api: _path(url) for api, url in target.urls.items()}
        self.gemini: dict[str, tuple[str, str]] = {}
        """Gemini's URL and request target per model (the model is in the path)."""
        self.shared = self.new_client(4)
        """The client of the probes (``/models``, the API checks)."""
        # One connection per concurrent stream, reused LIFO.
        self.idle: list[Connection] = []
        self.all: list[Connection] = []
        self.served: set[int] = set()
        """Ids of the httpx clients whose connection answered before."""
        self.max_connections = max_connections
        self.slots = asyncio.Semaphore(max_connections)

    def new_client(self, connections: int) -> httpx.AsyncClient:
        """An httpx client of up to ``connections`` kept-alive connections to the target."""
        limits = httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=KEEPALIVE_S,
        )
        transport = None
        if self.lean:
            # plain HTTP: httpcore over plain asyncio sockets (see netback), cheaper per read;
            # verify=False: no TLS here, and httpx's default would load the CA bundle for
            # every client (~30 ms each)
            transport = httpx.AsyncHTTPTransport(limits=limits, verify=False)
            transport._pool = httpcore.AsyncConnectionPool(
                max_connections=connections,
                max_keepalive_connections=connections,
                keepalive_expiry=limits.keepalive_expiry,
                network_backend=self.backend,
            )
        return httpx.AsyncClient(
            headers=self.target.headers,
            timeout=self.timeout,
            verify=self.verify,
            limits=limits,
            transport=transport,
        )

    def new_connection(self) -> Connection:
        """A stream's connection, not opened yet (it opens on its first request)."""
        if self.lean:
            return LeanConnection(
                self.target.base_url, self.target.headers, self.backend, self.connect_s, KEEPALIVE_S
            )
        return self.new_client(1)

    def take(self) -> Connection:
        """A connection for one stream: the idle one put back last, else a new one (hold a
        ``slots`` place while it is out)."""
        conn = self.idle.pop() if self.idle else None
        if conn is None:
            conn = self.new_connection()
            self.all.append(conn)
        return conn

    def put(self, conn: Connection) -> None:
        """Give back a connection ``take`` handed out (a lean one whose answer was not
        settled, its request cancelled, is closed: it is mid-exchange)."""
        if isinstance(conn, LeanConnection) and conn.answering:
            conn.drop()
        self.idle.append(conn)

    async def open(
        self,
        conn: Connection,
        api: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        stamp: Callable[[], None],
        due: Due | None = None,
        model: str = "",
    ) -> Answer:
        """POST ``body`` to ``api``'s URL on ``conn`` (Gemini's for ``model``); the answer with
        its body still to read (``stamp`` is called as the request's first bytes go out; with
        ``due``, they go at its time: written by its gate on a lean connection, else sent once
        it passed)."""
        url, path = self._where(api, model)
        if isinstance(conn, LeanConnection):
            return await conn.request("POST", path, body, headers, stamp, due)
        if due is not None:
            await due[0].fire_at(due[1], _none_sent)
        req = conn.build_request(
            "POST",
            url,
            content=body,
            headers=headers,
            extensions={"trace": _stamper(stamp)},
        )
        return HttpxAnswer(await self.send(conn, req))

    def _where(self, api: str, model: str) -> tuple[str, str]:
        """The URL and request target (path and query) of ``api`` (Gemini's: of ``model``)."""
        if api != "gemini":
            return self.target.urls[api], self.paths[api]
        got = self.gemini.get(model)
        if got is None:
            url = self.target.url(api, model)
            got = self.gemini[model] = (url, _path(url))
        return got

    async def send(self, client: httpx.AsyncClient, req: httpx.Request) -> httpx.Response:
        """Send ``req`` on ``client``, streaming; once more on a new connection when a
        kept-alive one was closed under it (see below)."""
        try:
            resp = await client.send(req, stream=True)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as first:
            if id(client) not in self.served:
                raise
            # The server closed this kept-alive connection as the request went out (its idle
            # timeout), before answering a byte: as HTTP clients do (RFC 9112 9.3.1), the
            # request goes once more, on a new connection. A fresh one is never retried.
            # If the retry fails too, the request failed as the first try did (a reset): the
            # server may have read it before it went away.
            self.served.discard(id(client))
            try:
                resp = await client.send(req, stream=True)
            except httpx.HTTPError:
                raise first from None
        self.served.add(id(client))
        return resp

    async def warm(self, n: int, parallel: int, limit: float) -> int:
        """Open up to ``n`` stream connections (one ``GET /models`` each) within ``limit``
        seconds; returns how many opened (those not open by then are closed)."""
        want = max(0, min(n, self.max_connections) - len(self.all))
        gate = asyncio.Semaphore(parallel)
        conns = [self.new_connection() for _ in range(want)]
        models = _path(self.target.models_url)

        async def one(conn: Connection) -> bool:
            async with gate:
                if isinstance(conn, LeanConnection):
                    answer = await conn.request("GET", models, b"", None, _nothing)
                    await answer.aread()
                    return conn.open  # kept alive for the load
                r = await conn.get(self.target.models_url, timeout=limit)
                await r.aread()
                self.served.add(id(conn))  # its connection answered: the next is a reuse
                return True

        tasks = [asyncio.ensure_future(one(c)) for c in conns]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=limit)
            for t in pending:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        opened = 0
        for conn, task in zip(conns, tasks, strict=True):
            if not task.cancelled() and task.exception() is None and task.result():
                self.all.append(conn)
                self.idle.append(conn)
                opened += 1
            else:
                await _close(conn)
        return opened

    async def aclose(self) -> None:
        """Close every connection, and the shared client."""
        for c in [self.shared, *self.all]:
            await _close(c)
        self.all.clear()
        self.idle.clear()


class HttpxAnswer:
    """An httpx streamed response as a ``streams.Answer``."""

    def __init__(self, resp: httpx.Response) -> None:
        self._resp = resp
        self.status_code = resp.status_code
        self.network_stream: object = resp.extensions.get("network_stream")

    def header(self, name: str) -> str | None:
        """The first value of header ``name``, or None."""
        return cast(str | None, self._resp.headers.get(name))

    def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body, one network read at a time."""
        return self._resp.aiter_raw()

    async def pump(self, feed: Callable[[bytes, int], None]) -> None:
        """The body to its end: ``feed(data, rx_ns)`` for each network read (``rx_ns`` when
        the connection has kernel receive times, else 0)."""
        rx = stamped(self)
        async for raw in self._resp.aiter_raw():
            feed(raw, rx.rx_ns if rx is not None else 0)

    async def aread(self, limit: int | None = None) -> bytes:
        """The whole body, or (``limit``) its first ``limit`` bytes or a little more."""
        return await read_upto(self._resp.aiter_raw(), limit)

    async def aclose(self) -> None:
        """Done with the response (an unread rest closes its connection)."""
        await self._resp.aclose()


def _path(url: str) -> str:
    """The request target of ``url``: its path and query."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _stamper(stamp: Callable[[], None]) -> Callable[[str, Any], Awaitable[None]]:
    """httpcore's trace hook that calls ``stamp`` when the request's first bytes go to the
    socket (not when the client started preparing it)."""

    async def trace(event: str, info: Any) -> None:
        if event == "http11.send_request_headers.started":
            stamp()

    return trace


def _none_sent() -> int:
    return 0


def _nothing() -> None:
    """A stamp nobody reads (the warm-up's requests)."""


async def _close(conn: Connection) -> None:
    if isinstance(conn, LeanConnection):
        await conn.close()
    else:
        await conn.aclose()
