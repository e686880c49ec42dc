"""Replay's connections to the endpoint: one single-connection httpx client per stream.

httpx's shared pool scans every connection on every request (quadratic at 1,000 streams), so
each concurrent stream gets a client of its own with one connection, taken from the idle
ones last-in first-out and put back when its stream ends; a semaphore (``slots``) bounds how
many are in use. Plain-HTTP clients run httpcore over ``netback``'s asyncio sockets (kernel
receive times); HTTPS clients share one TLS context. Idle connections are kept ``KEEPALIVE_S``.
A request written into a kept-alive connection that the server closed as it went out is sent
once more, on a new connection (``ConnectionPool.send``).
"""

from __future__ import annotations

import asyncio
import ssl
import sys

import httpcore
import httpx

from agentload.client.netback import AsyncioBackend, KernelStamps
from agentload.client.target import Target

__all__ = ["KEEPALIVE_S", "ConnectionPool"]

KEEPALIVE_S = 4.0
"""How long an idle connection is kept for the next request: under the 5 s after which
uvicorn (vLLM, SGLang) and cpp-httplib (llama.cpp) close an idle one, so a request is rarely
written into a connection the server is closing (httpx's default is those same 5 s)."""


class ConnectionPool:
    """The clients of one ``StreamClient``: a small shared one (probes) and one per stream."""

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
        self.timeout = httpx.Timeout(None, connect=min(timeout_s, 30.0))
        # One TLS context for every connection (building one costs ~30 ms); none for http.
        self.verify: ssl.SSLContext | bool = ssl.create_default_context() if target.https else False
        self.shared = self.new_client(4)
        """The client of the probes (``/models``, the API checks)."""
        # One single-connection client per concurrent stream, reused LIFO.
        self.idle: list[httpx.AsyncClient] = []
        self.all: list[httpx.AsyncClient] = []
        self.served: set[int] = set()
        """Ids of the clients whose connection answered before."""
        self.max_connections = max_connections
        self.slots = asyncio.Semaphore(max_connections)

    def new_client(self, connections: int) -> httpx.AsyncClient:
        """A client of up to ``connections`` kept-alive connections to the target."""
        limits = httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=KEEPALIVE_S,
        )
        transport = None
        if not self.target.https and sys.platform != "win32":
            # plain HTTP: httpcore over plain asyncio sockets (see netback), cheaper per read;
            # it needs loop.add_reader, which Windows' default (proactor) loop lacks
            # verify=False: no TLS on plain HTTP, and httpx's default would load the CA
            # bundle for every connection's client (~30 ms each: 30 s for 1,000 streams)
            transport = httpx.AsyncHTTPTransport(limits=limits, verify=False)
            transport._pool = httpcore.AsyncConnectionPool(
                max_connections=connections,
                max_keepalive_connections=connections,
                keepalive_expiry=limits.keepalive_expiry,
                network_backend=AsyncioBackend(self.stamps),
            )
        return httpx.AsyncClient(
            headers=self.target.headers,
            timeout=self.timeout,
            verify=self.verify,
            limits=limits,
            transport=transport,
        )

    def take(self) -> httpx.AsyncClient:
        """A client for one stream: the idle one put back last, else a new one (hold a
        ``slots`` place while it is out)."""
        client = self.idle.pop() if self.idle else None
        if client is None:
            client = self.new_client(1)
            self.all.append(client)
        return client

    def put(self, client: httpx.AsyncClient) -> None:
        """Give back a client ``take`` handed out."""
        self.idle.append(client)

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
        clients = [self.new_client(1) for _ in range(want)]
        url = self.target.models_url

        async def one(client: httpx.AsyncClient) -> bool:
            async with gate:
                r = await client.get(url, timeout=limit)
                await r.aread()
                return True

        tasks = [asyncio.ensure_future(one(c)) for c in clients]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=limit)
            for t in pending:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        opened = 0
        for client, task in zip(clients, tasks, strict=True):
            if not task.cancelled() and task.exception() is None:
                self.all.append(client)
                self.idle.append(client)
                self.served.add(id(client))  # its connection answered: the next is a reuse
                opened += 1
            else:
                await client.aclose()
        return opened

    async def aclose(self) -> None:
        """Close every client (their connections with them)."""
        for c in [self.shared, *self.all]:
            await c.aclose()
        self.all.clear()
        self.idle.clear()
