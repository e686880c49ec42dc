"""The streaming chat-completions client: one httpx.AsyncClient, precise stream timing.

Times are ``clock()`` readings (``time.perf_counter_ns`` unless injected): ``send_ns`` when
the request's first bytes are written to the connection (httpcore's trace hook; the moment
the client picked the connection when no hook fired), one reading per network read that
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
endpoint trickles or stalls. The ``/models`` probe and the connection warm-up are bounded by
``probe_timeout_s`` (``min(--timeout, PROBE_TIMEOUT_S)``): an endpoint that accepts the
connection and never answers is one ``EndpointUnreachableError`` line within that bound.
Request URLs are the base URL's path plus the endpoint's (``/models``, ``/chat/completions``)
with the base URL's query kept after it (``…/v1/chat/completions?api-version=…``) and its
``user:password@`` sent nowhere (the key travels as ``Authorization: Bearer``); a URL is
shown only through ``agentload.auth.redact_url``, and the credentials it or the API key carry
are scrubbed out of every error text.
"""

from __future__ import annotations

import asyncio
import ssl
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpcore
import httpx
import orjson

from agentload.auth import refused_key_message, split_base_url
from agentload.errors import (
    EndpointError,
    EndpointUnreachableError,
    ModelNotFoundError,
    WireError,
)
from agentload.errortext import clip, is_context_overflow
from agentload.masking import hide_secrets, mask_text, redact_url
from agentload.recorder.schema import MAX_CALL_TOKENS
from agentload.replay.netback import AsyncioBackend, KernelStamps, SocketStream
from agentload.wire import stream_reader

__all__ = ["ANTHROPIC_VERSION", "PROBE_TIMEOUT_S", "Outcome", "StreamClient", "endpoint_url"]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent with Messages requests."""

PROBE_TIMEOUT_S = 10.0
"""Longest wait for the ``/models`` probe, and for the warm-up before each point."""
KEEPALIVE_S = 4.0
"""How long an idle connection is kept for the next request: under the 5 s after which
uvicorn (vLLM, SGLang) and cpp-httplib (llama.cpp) close an idle one, so a request is rarely
written into a connection the server is closing (httpx's default is those same 5 s)."""


def endpoint_url(base_url: str, path: str) -> str:
    """``path`` appended to the base URL's path, the base URL's query kept after it:
    ``endpoint_url("http://h/v1?api-version=1", "/models")`` → ``http://h/v1/models?api-version=1``."""
    clean, query = split_base_url(base_url)  # no user:password@: it is sent nowhere
    return clean + path + (f"?{urlencode(query)}" if query else "")


@dataclass(slots=True)
class Outcome:
    """What happened to one request (all times are clock readings in ns)."""

    send_ns: int
    end_ns: int = 0
    first_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)
    """Arrival time of every content event (the first is ``first_ns``)."""
    status: int | None = None
    error_kind: str | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None


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
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.probe_timeout_s = min(timeout_s, PROBE_TIMEOUT_S)
        self.clock = clock
        hdrs = {"content-type": "application/json", "accept": "text/event-stream"}
        if api_key:
            hdrs["authorization"] = f"Bearer {api_key}"
        hdrs.update(headers or {})
        self._url = endpoint_url(self.base_url, "/chat/completions")
        self._urls = {
            "chat": self._url,
            "responses": endpoint_url(self.base_url, "/responses"),
            "messages": endpoint_url(self.base_url, "/messages"),
        }
        # Messages servers read the key from x-api-key and want a version (vLLM, SGLang and
        # Anthropic's own accept these two).
        self._messages_headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            self._messages_headers["x-api-key"] = api_key
        self._models_url = endpoint_url(self.base_url, "/models")
        self._key = [api_key] if api_key else []  # masked however short (the URL: by policy)
        self._headers = hdrs
        # Streams are bounded as a whole (``chat``), so reads and writes need no timer each.
        self._timeout = httpx.Timeout(None, connect=min(timeout_s, 30.0))
        # One TLS context for every connection (building one costs ~30 ms); none for http.
        self._verify: ssl.SSLContext | bool = (
            ssl.create_default_context() if self.base_url.startswith("https") else False
        )
        # Kernel receive times are perf_counter_ns readings only; an injected clock gets none.
        self._stamps = (
            KernelStamps()
            if clock is time.perf_counter_ns and not self.base_url.startswith("https")
            else None
        )
        self._client = self._new_client(4)
        # One single-connection client per concurrent stream, reused LIFO: httpx's shared pool
        # scans every connection on every request (quadratic at 1,000 streams); this doesn't.
        self._idle: list[httpx.AsyncClient] = []
        self._all: list[httpx.AsyncClient] = []
        self._served: set[int] = set()  # ids of clients whose connection answered before
        self.max_connections = max_connections
        self._slots = asyncio.Semaphore(max_connections)

    def _new_client(self, connections: int) -> httpx.AsyncClient:
        limits = httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=KEEPALIVE_S,
        )
        transport = None
        if not self.base_url.startswith("https") and sys.platform != "win32":
            # plain HTTP: httpcore over plain asyncio sockets (see netback), cheaper per read;
            # it needs loop.add_reader, which Windows' default (proactor) loop lacks
            transport = httpx.AsyncHTTPTransport(limits=limits)
            transport._pool = httpcore.AsyncConnectionPool(
                max_connections=connections,
                max_keepalive_connections=connections,
                keepalive_expiry=limits.keepalive_expiry,
                network_backend=AsyncioBackend(self._stamps),
            )
        return httpx.AsyncClient(
            headers=self._headers,
            timeout=self._timeout,
            verify=self._verify,
            limits=limits,
            transport=transport,
        )

    async def aclose(self) -> None:
        for c in [self._client, *self._all]:
            await c.aclose()
        self._all.clear()
        self._idle.clear()
        if self._stamps is not None:
            self._stamps.close()

    def hide(self, text: str) -> str:
        """``text`` with every credential of the base URL (learned by ``split_base_url``) and
        the API key replaced."""
        return hide_secrets(mask_text(text), self._key)

    async def probe(self, model: str) -> list[str]:
        """GET ``/models`` within ``probe_timeout_s``: raises ``EndpointUnreachableError`` /
        ``ModelNotFoundError``."""
        shown = redact_url(self._models_url)
        limit = self.probe_timeout_s
        try:
            async with asyncio.timeout(limit):
                r = await self._client.get(self._models_url, timeout=limit)
        except (TimeoutError, httpx.TimeoutException) as exc:
            what = (
                "no connection"
                if isinstance(exc, httpx.ConnectTimeout)
                else "connected, but no answer"
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
                self.hide(f"{shown}: endpoint unreachable ({type(exc).__name__}: {exc}){hint}")
            ) from None
        if r.status_code in (401, 403):
            raise EndpointError(self.hide(refused_key_message(shown, r.status_code, r.content)))
        if r.status_code != 200:
            raise EndpointUnreachableError(f"{shown}: HTTP {r.status_code} from the models list")
        try:
            ids = [str(m["id"]) for m in r.json().get("data", [])]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EndpointUnreachableError(f"{shown}: not an OpenAI models list") from None
        if model not in ids:
            raise ModelNotFoundError(
                self.hide(
                    f"{shown}: model {model!r} not served; available: {', '.join(ids) or 'none'}"
                )
            )
        return ids

    async def warm(self, n: int, parallel: int = 64) -> int:
        """Open up to ``n`` pooled connections ahead of the load (one ``GET /models`` each), so
        connection setup is not inside the first requests' TTFT; returns how many opened.
        Best effort, and done within ``probe_timeout_s``: a connection not open by then is
        closed, and the load opens it when it needs it."""
        want = max(0, min(n, self.max_connections) - len(self._all))
        gate = asyncio.Semaphore(parallel)
        limit = self.probe_timeout_s
        clients = [self._new_client(1) for _ in range(want)]

        async def one(client: httpx.AsyncClient) -> bool:
            async with gate:
                r = await client.get(self._models_url, timeout=limit)
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
                self._all.append(client)
                self._idle.append(client)
                self._served.add(id(client))  # its connection answered: the next is a reuse
                opened += 1
            else:
                await client.aclose()
        return opened

    async def speaks(self, api: str, model: str) -> tuple[bool, str]:
        """Whether the target answers ``api`` (``responses``, ``messages``): one small
        non-streamed request within ``probe_timeout_s``; (answered, what it said)."""
        small: dict[str, Any] = (
            {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
            if api == "messages"
            else {"model": model, "max_output_tokens": 16, "input": "hi"}
        )
        headers = self._messages_headers if api == "messages" else None
        limit = self.probe_timeout_s
        try:
            async with asyncio.timeout(limit):
                r = await self._client.post(
                    self._urls[api], content=orjson.dumps(small), headers=headers, timeout=limit
                )
        except (TimeoutError, httpx.HTTPError) as exc:
            return False, self.hide(f"{type(exc).__name__}")
        return r.status_code == 200, f"HTTP {r.status_code}"

    async def chat(
        self, body: bytes, headers: Mapping[str, str] | None = None, api: str = "chat"
    ) -> Outcome:
        """Send one streaming request (in ``api``: chat, or a call's recorded Responses or
        Messages), within ``timeout_s`` from now (a wait for a free connection included);
        never raises for endpoint failures."""
        clock = self.clock
        out = Outcome(send_ns=clock())
        try:
            async with asyncio.timeout(self.timeout_s), self._slots:
                client = self._idle.pop() if self._idle else None
                if client is None:
                    client = self._new_client(1)
                    self._all.append(client)
                out.send_ns = clock()
                if api == "messages":
                    headers = {**self._messages_headers, **(headers or {})}
                try:
                    await self._chat(client, body, headers, out, api)
                finally:
                    self._idle.append(client)
        except TimeoutError:
            out.error_kind, out.error = "timeout", f"no complete answer in {self.timeout_s:g}s"
        out.end_ns = clock()
        if out.error is not None:
            out.error = clip(self.hide(out.error))
        return out

    async def _chat(
        self,
        client: httpx.AsyncClient,
        body: bytes,
        headers: Mapping[str, str] | None,
        out: Outcome,
        api: str = "chat",
    ) -> None:
        try:
            clock = self.clock

            async def trace(event: str, info: Any) -> None:
                # The send time is when the request's first bytes go to the socket, not
                # when the client started preparing it.
                if event == "http11.send_request_headers.started":
                    out.send_ns = clock()

            req = client.build_request(
                "POST", self._urls[api], content=body, headers=headers, extensions={"trace": trace}
            )
            try:
                resp = await client.send(req, stream=True)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as first:
                if id(client) not in self._served:
                    raise
                # The server closed this kept-alive connection as the request went out (its idle
                # timeout), before answering a byte: as HTTP clients do (RFC 9112 9.3.1), the
                # request goes once more, on a new connection. A fresh one is never retried.
                # If the retry fails too, the request failed as the first try did (a reset): the
                # server may have read it before it went away.
                self._served.discard(id(client))
                try:
                    resp = await client.send(req, stream=True)
                except httpx.HTTPError:
                    raise first from None
            self._served.add(id(client))
            try:
                out.status = resp.status_code
                if resp.status_code != 200:
                    text = (await resp.aread())[:2000]
                    out.error_kind = (
                        "context_overflow"
                        if resp.status_code in (400, 413, 422) and is_context_overflow(text)
                        else f"http_{resp.status_code}"
                    )
                    out.error = clip(text.decode("utf-8", "replace"))
                elif api == "chat":
                    await self._read_stream(resp, out)
                else:
                    await self._read_native(resp, out, api)
            finally:
                await resp.aclose()
        except httpx.TimeoutException as exc:
            out.error_kind, out.error = "timeout", f"{type(exc).__name__}"
        except httpx.ConnectError as exc:
            out.error_kind, out.error = "connect", f"{type(exc).__name__}: {exc}"
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            out.error_kind, out.error = "reset", f"{type(exc).__name__}: {exc}"
        except httpx.HTTPError as exc:
            out.error_kind, out.error = "client_error", f"{type(exc).__name__}: {exc}"
        except OSError as exc:
            out.error_kind, out.error = "connect", f"{type(exc).__name__}: {exc}"

    async def _read_stream(self, resp: httpx.Response, out: Outcome) -> None:
        clock = self.clock
        chunks = out.chunk_ns
        append = chunks.append
        buf = b""
        done = False
        loads = orjson.loads
        rx = resp.extensions.get("network_stream")
        if not (type(rx) is SocketStream and rx.stamped):
            rx = None
        send = out.send_ns
        async for raw in resp.aiter_raw():
            now = clock()
            if rx is not None and send < rx.rx_ns < now:
                now = rx.rx_ns
            buf += raw
            if b"\n" not in raw:
                continue
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    done = True
                    continue
                # Fast path once streaming: a compact mid-stream delta (finish_reason null, no
                # usage object, no error) is classified by bytes alone; anything else (other
                # spacing included) is parsed with orjson.
                if (
                    chunks
                    and b'"finish_reason":null' in payload
                    and b'"usage":{' not in payload
                    and b'"error"' not in payload
                ):
                    if (b'"content":"' in payload and b'"content":""' not in payload) or (
                        b'"tool_calls":[' in payload or b'"reasoning_content":"' in payload
                    ):
                        append(now)
                    continue
                try:
                    ev: Any = loads(payload)
                except orjson.JSONDecodeError:
                    out.error_kind, out.error = "stream_error", "unparseable SSE event"
                    continue
                if _event(ev, out):
                    append(now)
        if chunks:
            out.first_ns = chunks[0]
        if out.error_kind is None and not done and out.finish_reason is None:
            out.error_kind, out.error = "truncated", "stream ended without [DONE]"

    async def _read_native(self, resp: httpx.Response, out: Outcome, api: str) -> None:
        """A Responses or Messages stream, read by ``agentload.wire``: one chunk time per
        event that carries output (text, a tool name or arguments)."""
        clock = self.clock
        append = out.chunk_ns.append
        rx = resp.extensions.get("network_stream")
        if not (type(rx) is SocketStream and rx.stamped):
            rx = None
        send = out.send_ns
        reader = stream_reader(api)  # type: ignore[arg-type]
        async for raw in resp.aiter_raw():
            now = clock()
            if rx is not None and send < rx.rx_ns < now:
                now = rx.rx_ns
            try:
                n = reader.feed(raw)
            except WireError as exc:
                out.error_kind, out.error = "stream_error", str(exc)
                continue
            for _ in range(n):
                append(now)
        reply = reader.reply()
        _usage(reply.usage or {}, out)
        out.finish_reason = reply.finish_reason
        if reply.error and out.error_kind is None:
            text = reply.error.encode()
            out.error_kind = "context_overflow" if is_context_overflow(text) else "stream_error"
            out.error = clip(reply.error)
        if out.chunk_ns:
            out.first_ns = out.chunk_ns[0]
        if out.error_kind is None and not reader.done:
            out.error_kind, out.error = "truncated", "stream ended before its last event"


def _count(usage: Any, key: str, out: Outcome) -> int | None:
    """``usage[key]``: a token count 0..``MAX_CALL_TOKENS`` (what a call of a trace may hold),
    or None when absent; anything
    else (negative, fractional, huge, not a number) fails the request as ``invalid_usage``,
    so the report is counted, never stored, and the run goes on."""
    v = usage.get(key) if isinstance(usage, dict) else None
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if type(v) is int and 0 <= v <= MAX_CALL_TOKENS:
        return v
    if out.error_kind is None:
        out.error_kind = "invalid_usage"
        out.error = f"usage.{key}: {clip(repr(v), 40)} is not a token count"
    return None


def _usage(usage: Any, out: Outcome) -> None:
    """Fold a usage report (Chat Completions' ``usage``, or a native reply's) into ``out``."""
    out.prompt_tokens = _count(usage, "prompt_tokens", out)
    out.completion_tokens = _count(usage, "completion_tokens", out)
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    cached = _count(details, "cached_tokens", out)
    if cached is not None:
        out.cached_tokens = cached


def _event(ev: Any, out: Outcome) -> bool:
    """Fold one SSE event into ``out``; True when it carries content."""
    if not isinstance(ev, dict):
        return False
    err = ev.get("error")
    if err:
        text = orjson.dumps(err)
        out.error_kind = "context_overflow" if is_context_overflow(text) else "stream_error"
        out.error = clip(text.decode())
        return False
    usage = ev.get("usage")
    if usage:
        _usage(usage, out)
    timings = ev.get("timings")
    if out.cached_tokens is None and isinstance(timings, dict):
        # llama.cpp's own account of the prompt tokens reused from its cache (older builds
        # report it only here, not in usage.prompt_tokens_details)
        n = timings.get("cache_n")
        if isinstance(n, int) and n >= 0:
            out.cached_tokens = n
    choices = ev.get("choices")
    if not choices:
        return False
    ch = choices[0]
    fr = ch.get("finish_reason")
    if fr:
        out.finish_reason = fr
    delta = ch.get("delta")
    if not delta:
        return False
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))
