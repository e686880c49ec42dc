"""The recording reverse proxy: an ASGI app that forwards every request to the upstream,
unchanged, and records the LLM calls among them.

* ``POST`` to a Chat Completions, Responses or Messages path (``agentload.wire.api_for_path``)
  is forwarded and recorded; anything else (``/v1/models``, ``/v1/messages/count_tokens``, ...)
  is forwarded and not recorded.
* Headers pass through both ways, credentials included (``Authorization``, ``x-api-key``: they
  never reach the trace), except hop-by-hop ones; the upstream is asked for an uncompressed
  answer so the proxy can read it.
* A streamed answer is forwarded chunk by chunk as it arrives: each chunk is sent on before the
  proxy reads it (``wire.StreamReader``) and stamps it.
* Upstream errors reach the agent as the upstream sent them (status, headers, body); an
  upstream that cannot be reached is a 502 in the API's error shape; an upstream that breaks a
  stream breaks the agent's stream too (the connection is closed without the final chunk). A
  client that disconnects closes the upstream request. Each is recorded as the call's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson

from agentload.auth import redact_text
from agentload.errortext import clip
from agentload.record.recorder import Pending, Recorder
from agentload.recorder.schema import Timings
from agentload.wire import Api, StreamReader, WireReply, api_for_path, reply_from_json
from agentload.wire import stream_reader as new_reader

__all__ = ["RecordingProxy", "StreamBroken"]

_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
        b"accept-encoding",
    }
)
_HOP_OUT = frozenset(_HOP - {b"accept-encoding"})
_DECODERS = {"gzip", "x-gzip", "deflate"}
"""Content encodings the proxy can read (an upstream that compresses although it was asked not
to); the agent gets the bytes as sent either way."""

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class StreamBroken(Exception):
    """Raised out of the ASGI app to close the agent's connection mid-answer (the upstream
    broke its stream): the server drops the connection without ending the response."""


def _error_json(api: Api | None, status: int, message: str) -> bytes:
    if api == "messages":
        kind = "api_error" if status >= 500 else "invalid_request_error"
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    return orjson.dumps(
        {"error": {"message": message, "type": "upstream_error", "param": None, "code": status}}
    )


class RecordingProxy:
    """The ASGI application (see the module docstring)."""

    def __init__(self, upstream: str, recorder: Recorder | None) -> None:
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.recorder = recorder
        self.clients = _Clients(self.upstream.startswith("https"))
        self.in_flight = 0
        self.last_activity_ns = time.perf_counter_ns()

    async def aclose(self) -> None:
        await self.clients.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        self.in_flight += 1
        try:
            await self._handle(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.last_activity_ns = time.perf_counter_ns()

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        now = time.perf_counter_ns()
        path: str = scope["path"]
        api = api_for_path(path) if scope["method"] == "POST" else None
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        headers.append((b"accept-encoding", b"identity"))
        url = self.upstream + (scope.get("raw_path") or path.encode()).decode("latin-1")
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        disconnected = asyncio.Event()
        watcher = asyncio.create_task(_watch_disconnect(receive, disconnected))
        call = _Call(self, api, None, now, send, disconnected)
        req = self.clients.builder.build_request(
            scope["method"], url, headers=headers, content=body, extensions={"trace": call.trace}
        )
        task = asyncio.ensure_future(call.run(req))
        try:
            if api is not None and self.recorder is not None:
                # The request goes out first; it is read and placed while the upstream works
                # on it (its answer is read only once it is placed).
                sent = asyncio.ensure_future(call.sent.wait())
                await asyncio.wait({task, sent}, return_when=asyncio.FIRST_COMPLETED)
                sent.cancel()
                hdrs = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
                try:
                    call.pending = self.recorder.begin(api, body, hdrs, now)
                except Exception as exc:  # recording never gets in the agent's way
                    self.recorder.note("record_error", now, where="begin", error=_why(exc))
            call.placed.set()
            await task
        finally:
            if not task.done():
                task.cancel()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


class _Call:
    """One forwarded request and what is recorded of it."""

    def __init__(
        self,
        proxy: RecordingProxy,
        api: Api | None,
        pending: Pending | None,
        submit_ns: int,
        send: Send,
        disconnected: asyncio.Event,
    ) -> None:
        self.proxy = proxy
        self.api = api
        self.pending = pending
        self.submit_ns = submit_ns
        self.send = send
        self.disconnected = disconnected
        self.first_ns: int | None = None
        self.offsets: list[int] = []
        self.placed = asyncio.Event()
        """Set once the request has been read and placed (``pending`` is final)."""
        self.sent = asyncio.Event()
        """Set once the request's body has been written to the upstream."""

    async def trace(self, event: str, info: Any) -> None:
        """httpcore's trace hook: marks the moment the request is out."""
        if event == "http11.send_request_body.complete":
            self.sent.set()

    async def run(self, req: httpx.Request) -> None:
        error: str | None = None
        reply = WireReply()
        try:
            stream_task = asyncio.ensure_future(self._forward(req))
            gone = asyncio.ensure_future(self.disconnected.wait())
            done, _ = await asyncio.wait({stream_task, gone}, return_when=asyncio.FIRST_COMPLETED)
            if stream_task in done:
                gone.cancel()
                reply = stream_task.result()
            else:
                stream_task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await stream_task
                error = "client disconnected before the answer ended"
                if self._reader is not None:
                    reply = self._reader.reply()
        except _Upstream as exc:
            error = exc.message
            reply = exc.reply or reply
            await self._record(reply, error)
            if exc.broken:
                raise StreamBroken(error) from None
            return
        await self._record(reply, error)

    _reader: StreamReader | None = None
    """The reader of a streamed answer, once its headers came (what was answered so far)."""

    async def _forward(self, req: httpx.Request) -> WireReply:
        clients = self.proxy.clients
        client = clients.take()
        try:
            try:
                resp = await client.send(req, stream=True)
            except httpx.HTTPError as exc:
                message = f"upstream {req.url.host}:{req.url.port} unreachable: {_why(exc)}"
                await self._respond(502, [(b"content-type", b"application/json")],
                                    _error_json(self.api, 502, message))  # fmt: skip
                raise _Upstream(message, None, broken=False) from None
            finally:
                self.sent.set()  # out, or never going out: either way, place it now
            try:
                return await self._relay(resp)
            finally:
                await resp.aclose()
        finally:
            clients.give_back(client)

    async def _relay(self, resp: httpx.Response) -> WireReply:
        await self.placed.wait()
        out_headers = [
            (k, v) for k, v in resp.headers.raw if k.lower() not in _HOP_OUT
        ]  # fmt: skip
        await self.send(
            {"type": "http.response.start", "status": resp.status_code, "headers": out_headers}
        )
        streamed = "text/event-stream" in resp.headers.get("content-type", "")
        reader: StreamReader | None = None
        if self.pending is not None and streamed and resp.status_code < 400:
            reader = self._reader = new_reader(self.pending.api)
        kept: list[bytes] = []
        parse_error: str | None = None
        coding = resp.headers.get("content-encoding", "identity").strip().lower()
        unzip = zlib.decompressobj(wbits=47) if coding in _DECODERS else None
        if coding not in _DECODERS | {"identity", ""}:
            parse_error = f"answer not readable: content-encoding {coding[:40]}"
        try:
            async for chunk in resp.aiter_raw():
                await self.send({"type": "http.response.body", "body": chunk, "more_body": True})
                t = time.perf_counter_ns()
                if self.pending is None or parse_error is not None:
                    continue
                if unzip is not None:
                    try:
                        chunk = unzip.decompress(chunk)
                    except zlib.error as exc:
                        parse_error = f"answer not readable: {coding}: {exc}"
                        continue
                if reader is not None:
                    try:
                        if reader.feed(chunk):
                            self.first_ns = self.first_ns or t
                            self.offsets.append(t - self.submit_ns)
                    except Exception as exc:  # a stream we cannot read is still forwarded
                        parse_error = f"answer stream not readable: {exc}"
                else:
                    kept.append(chunk)
        except httpx.HTTPError as exc:
            partial = reader.reply() if reader is not None else None
            raise _Upstream(
                f"upstream broke the stream: {_why(exc)}", partial, broken=True
            ) from None
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        end = time.perf_counter_ns()
        self._end_ns = end
        if self.pending is None:
            return WireReply()
        if reader is not None:
            out = reader.reply()
            if parse_error and not out.error:
                out.error = parse_error
            elif not reader.done and not out.error:
                out.error = "upstream ended the stream before its last event"
            return out
        if parse_error:
            return WireReply(error=parse_error)
        return self._body_reply(resp.status_code, b"".join(kept))

    def _body_reply(self, status: int, raw: bytes) -> WireReply:
        assert self.pending is not None
        try:
            obj = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            obj = None
        if status >= 400:
            text = raw.decode("utf-8", "replace")
            if isinstance(obj, dict) and obj.get("error") is not None:
                err = obj["error"]
                text = str(err.get("message", err)) if isinstance(err, dict) else str(err)
            return WireReply(error=f"HTTP {status}: {clip(text)}")
        try:
            return reply_from_json(self.pending.api, obj)
        except Exception as exc:
            return WireReply(error=f"answer not readable: {exc}")

    _end_ns: int | None = None

    async def _respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body, "more_body": False})

    async def _record(self, reply: WireReply, error: str | None) -> None:
        await self.placed.wait()
        rec = self.proxy.recorder
        if self.pending is None or rec is None:
            return
        end = self._end_ns or time.perf_counter_ns()
        streamed = bool(self.pending.chat.get("stream"))
        first = self.first_ns if streamed else (end if not error else None)
        timings = Timings(
            submit_ns=self.submit_ns,
            first_token_ns=first,
            last_token_ns=end,
            chunk_offsets_ns=self.offsets,
        )
        try:
            await rec.end(self.pending, reply, timings, error)
        except Exception as exc:  # the agent already has its answer; the trace notes the loss
            rec.note("record_error", end, where="end", error=_why(exc))


class _Clients:
    """Upstream connections: one single-connection ``httpx.AsyncClient`` per request in flight,
    reused last-in first-out. httpx's shared pool scans every pooled connection at each request
    start and end, which at 100 streams costs the proxy more than forwarding them (replay's
    client does the same, for the same reason). One TLS context serves them all."""

    def __init__(self, tls: bool) -> None:
        self._verify: ssl.SSLContext | bool = ssl.create_default_context() if tls else False
        self._idle: list[httpx.AsyncClient] = []
        self._all: list[httpx.AsyncClient] = []
        self.builder = self._new()
        """Builds requests (``build_request``); sends none."""

    def _new(self) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        return httpx.AsyncClient(
            timeout=httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None),
            limits=limits,
            verify=self._verify,
            follow_redirects=False,
        )

    def take(self) -> httpx.AsyncClient:
        if self._idle:
            return self._idle.pop()
        c = self._new()
        self._all.append(c)
        return c

    def give_back(self, client: httpx.AsyncClient) -> None:
        self._idle.append(client)

    async def aclose(self) -> None:
        for c in [self.builder, *self._all]:
            await c.aclose()
        self._idle.clear()
        self._all.clear()


class _Upstream(Exception):
    """The upstream failed this call: its message, what was answered before, and whether the
    agent's stream must be broken."""

    def __init__(self, message: str, reply: WireReply | None, *, broken: bool) -> None:
        super().__init__(message)
        self.message = message
        self.reply = reply
        self.broken = broken


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return redact_text(clip(text))


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            break
        parts.append(msg.get("body", b""))
        if not msg.get("more_body"):
            break
    return b"".join(parts)


async def _watch_disconnect(receive: Receive, event: asyncio.Event) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            event.set()
            return


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
