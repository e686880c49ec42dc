"""A misbehaving OpenAI-style chat endpoint for the reliability suite: raw sockets, 127.0.0.1.

``FaultServer(plan)`` answers ``GET /v1/models`` and ``POST /v1/chat/completions``; the n-th
chat request (0-based, counted over the server's life) gets ``plan.chat[n % len(plan.chat)]``:

==============  ==========================================================================
``ok``          a streamed reply: ``plan.tokens`` content chunks, usage, ``[DONE]``
``500``         HTTP 500 with an OpenAI-shaped error body that echoes the request line
``429``         HTTP 429 with ``Retry-After: plan.retry_after_s``
``reset``       half the chunks, then a TCP reset (``SO_LINGER`` 0)
``stall``       the status line and headers, one chunk, then nothing until the client leaves
``blackhole``   reads the request and never writes a byte
``drip``        a valid reply written one byte per ``plan.drip_s`` seconds
``malformed``   a 200 event stream whose events are not JSON
``endless``     a 200 event stream of content chunks that never ends (no ``[DONE]``)
``401``         HTTP 401 whose message echoes the ``Authorization`` header it was sent (as
                some servers quote the key they refuse)
``length``      a streamed text reply cut at the length limit (``finish_reason: length``)
``cutcall``     a streamed ``read_file`` tool call whose arguments are cut mid-JSON, then
                ``finish_reason: length`` (a reply cut at ``max_tokens`` inside a tool call)
``500parse``    HTTP 500 with llama.cpp's body for a history it cannot parse ("Failed to
                parse tool call arguments as JSON: ...")
``500long``     HTTP 500 whose message is 1,100 characters long
``dropkept``    as a server whose idle timeout closes a kept-alive connection just as a request
                arrives: on a connection that answered before, reads the request and closes
                it without a byte (counted as ``dropkept_closed``); on a new one, ``ok``
``strict``      as llama.cpp does: parses every assistant tool call's arguments in the
                request's history; ``500parse`` when one is not a JSON object, else ``ok``
                (each refusal counted as ``strict_refused``)
==============  ==========================================================================

``plan.models`` is ``ok`` or ``blackhole`` (the ``/models`` probe itself never answers);
``usage=TEXT`` replaces the usage object every streamed reply ends with by that raw JSON text
(``'{"prompt_tokens": 1e30}'``: a server that reports nonsense); ``accept_only=True`` makes the
listener accept connections and never read or write (a load
balancer's black hole). Every request is counted by path and fault (``counts``); ``stop()``
closes every connection. Each connection handles requests one after another (keep-alive).
``requests`` logs each request's method, raw path (query included) and headers. ``port=N``
listens on that port (``SO_REUSEADDR``): a stopped server can be replaced by a new one on the
same address, as an endpoint that restarts. ``targets`` is the request targets alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

__all__ = ["CUT_ARGUMENTS", "FAULTS", "PARSE_ERROR", "FaultPlan", "FaultServer"]

FAULTS = (
    *("ok", "500", "429", "reset", "stall", "blackhole", "drip", "malformed", "endless", "401"),
    "dropkept",
    *("length", "cutcall", "500parse", "500long", "strict"),
)
CUT_ARGUMENTS = '{"path": "email/__init__.py", "start_line": 1, "end_li'
"""The arguments ``cutcall`` streams: cut mid-JSON, as a reply stopped by max_tokens leaves them."""
PARSE_ERROR = (
    "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at "
    "line 1, column 55: syntax error while parsing value - invalid string: missing closing quote"
)
_CAP_S = 600.0
"""No handler outlives this, whatever the client does (bounded loops)."""


@dataclass
class FaultPlan:
    chat: Sequence[str] = ("ok",)
    models: str = "ok"
    model: str = "fault-model"
    tokens: int = 8
    retry_after_s: int = 1
    drip_s: float = 0.2
    accept_only: bool = False
    usage: str | None = None

    def __post_init__(self) -> None:
        bad = [f for f in self.chat if f not in FAULTS]
        if bad or not self.chat or self.models not in ("ok", "blackhole"):
            raise ValueError(f"unknown faults {bad} (known: {FAULTS})")


@dataclass
class _Conn:
    writer: asyncio.StreamWriter
    task: asyncio.Task[None] | None = None


@dataclass
class FaultServer:
    plan: FaultPlan = field(default_factory=FaultPlan)
    counts: Counter[str] = field(default_factory=Counter)
    bodies: list[bytes] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    port: int = 0

    @property
    def targets(self) -> list[str]:
        """Each request's target (path and query), in arrival order."""
        return [target for _, target, _ in self.requests]

    def __post_init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()
        self._conns: list[_Conn] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", self.port))
        self.port: int = self._sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FaultServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault server did not start")
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(Exception):
            fut.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._listen())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _listen(self) -> None:
        self._closing = asyncio.Event()
        self._sock.listen(256)
        self._server = await asyncio.start_server(self._serve, sock=self._sock)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._closing.set()
        tasks = [c.task for c in self._conns if c.task is not None]
        for conn in list(self._conns):
            _abort(conn.writer)
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    async def _hold(self) -> None:
        """Say nothing until the server stops (or the cap passes)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), _CAP_S)

    # -- requests ----------------------------------------------------------------------------
    @property
    def chat_requests(self) -> int:
        return sum(n for k, n in self.counts.items() if k.startswith("chat:"))

    def _next_fault(self) -> str:
        with self._lock:
            n = self._n
            self._n += 1
        return self.plan.chat[n % len(self.plan.chat)]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer, asyncio.current_task())  # type: ignore[arg-type]
        sock = writer.get_extra_info("socket")
        if sock is not None:  # each write goes out at once, as a real server's would
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conns.append(conn)
        try:
            async with asyncio.timeout(_CAP_S):
                if self.plan.accept_only:
                    self.counts["accept_only"] += 1
                    await self._hold()
                served = 0
                while await self._one(reader, writer, served):
                    served += 1
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, OSError):
            pass
        finally:
            self._conns.remove(conn)
            _abort(writer)

    async def _one(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, served: int = 0
    ) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = [*lines[0].split(" "), "", ""][:3]
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        body = await reader.readexactly(int(headers.get("content-length") or 0))
        self.requests.append((method, path, headers))
        target, path = path, path.split("?", 1)[0]
        if method == "GET" and path.endswith("/models"):
            self.counts[f"models:{self.plan.models}"] += 1
            if self.plan.models == "blackhole":
                await self._hold()
            listing = {"object": "list", "data": [{"id": self.plan.model, "object": "model"}]}
            await _send(writer, 200, orjson.dumps(listing))
            return True
        if method != "POST" or not path.endswith("/chat/completions"):
            await _send(writer, 404, orjson.dumps({"error": {"message": f"no route {path}"}}))
            return True
        fault = self._next_fault()
        self.counts[f"chat:{fault}"] += 1
        self.bodies.append(body)
        if fault == "dropkept":
            if served:
                self.counts["dropkept_closed"] += 1
                return False  # closed: no status line, no byte
            fault = "ok"
        if fault == "strict":
            fault = "ok" if _history_is_valid(body) else "500parse"
            if fault != "ok":
                self.counts["strict_refused"] += 1
        return await self._chat(fault, writer, headers, f"{method} {target}")

    async def _chat(
        self, fault: str, writer: asyncio.StreamWriter, headers: dict[str, str], request: str
    ) -> bool:
        plan = self.plan
        if fault == "401":
            sent = headers.get("authorization", "no header")
            # as hosted APIs do: the key quoted alone, without its "Bearer" (OpenAI, Groq)
            said = f"invalid key in {sent!r}: Incorrect API key provided: {sent.split()[-1]}"
            await _send(writer, 401, _error(said))
            return True
        if fault == "500":
            await _send(writer, 500, _error(f"internal error (fault server) at {request}"))
            return True
        if fault == "500parse":
            await _send(writer, 500, _error(PARSE_ERROR, "server_error"))
            return True
        if fault == "500long":
            await _send(writer, 500, _error("overloaded: " + "x" * 1088))
            return True
        if fault == "429":
            extra = f"Retry-After: {plan.retry_after_s}\r\n"
            await _send(writer, 429, _error("rate limited (fault server)"), extra)
            return True
        if fault == "blackhole":
            await self._hold()
            return False
        events = _events(plan.tokens, plan.model, fault, plan.usage)
        if fault == "malformed":
            events = [b"data: {not json at all\n\n", b"data: \x00\xff garbage\n\n"]
        writer.write(_STREAM_HEAD)
        if fault == "drip":
            for byte in b"".join(_chunk(e) for e in events) + b"0\r\n\r\n":
                writer.write(bytes([byte]))
                await writer.drain()
                if self._closing.is_set():
                    return False
                await asyncio.sleep(plan.drip_s)
            return True
        if fault == "stall":
            writer.write(_chunk(events[0]))
            await writer.drain()
            await self._hold()
            return False
        if fault == "endless":
            ev = events[1]
            deadline = time.monotonic() + _CAP_S
            while time.monotonic() < deadline and not self._closing.is_set():
                writer.write(_chunk(ev))
                await writer.drain()
                await asyncio.sleep(0.01)
            return False
        if fault == "reset":
            for ev in events[: len(events) // 2]:
                writer.write(_chunk(ev))
            await writer.drain()
            _reset(writer)
            return False
        for ev in events:
            writer.write(_chunk(ev))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n"
)


def _error(message: str, kind: str = "fault") -> bytes:
    return orjson.dumps({"error": {"message": message, "type": kind, "code": None}})


def _history_is_valid(body: bytes) -> bool:
    """Every assistant tool call in the request's messages has a JSON object as arguments."""
    try:
        messages = orjson.loads(body).get("messages") or []
        for m in messages:
            for tc in m.get("tool_calls") or ():
                if not isinstance(orjson.loads(tc["function"]["arguments"]), dict):
                    return False
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
        return False
    return True


async def _send(writer: asyncio.StreamWriter, status: int, body: bytes, extra: str = "") -> None:
    reason = {
        200: "OK",
        401: "Unauthorized",
        404: "Not Found",
        429: "Too Many Requests",
        500: "Internal Server Error",
    }
    head = (
        f"HTTP/1.1 {status} {reason.get(status, 'Status')}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()


def _events(tokens: int, model: str, fault: str = "ok", usage: str | None = None) -> list[bytes]:
    def event(delta: dict[str, object], finish: str | None = None) -> bytes:
        obj = {
            "id": "chatcmpl-fault",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    out = [event({"role": "assistant", "content": ""})]
    out += [event({"content": f"word{i} "}) for i in range(tokens)]
    if fault == "cutcall":
        call = {"index": 0, "id": "call_cut", "type": "function"}
        out.append(event({"tool_calls": [{**call, "function": {"name": "read_file"}}]}))
        for i in range(0, len(CUT_ARGUMENTS), 8):
            part = {"index": 0, "function": {"arguments": CUT_ARGUMENTS[i : i + 8]}}
            out.append(event({"tool_calls": [part]}))
    out.append(event({}, "length" if fault in ("length", "cutcall") else "stop"))
    counts = {"prompt_tokens": 100, "completion_tokens": tokens, "total_tokens": 100 + tokens}
    raw = usage.encode() if usage is not None else orjson.dumps(counts)
    out.append(b'data: {"id": "chatcmpl-fault", "choices": [], "usage": ' + raw + b"}\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.transport.abort()
