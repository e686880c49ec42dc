"""What the relay writes of its own: heads rebuilt from what it parsed, and its own answers.

Nothing the relay did not read reaches the other side (``http1``): it forwards a request's head
rebuilt for the upstream (its target, ``host``, ``accept-encoding: identity``, its own
``content-length``, or its own chunks for a large chunked body it streams), an answer's head
rebuilt for the agent, and an upstream's checked WebSocket 101; each without the hop-by-hop
headers. Its own answers (a 502 for an upstream it cannot reach, a 400 or 408 for a request it
cannot read) are JSON in the API's error shape.
"""

from __future__ import annotations

import orjson

from agentload.client.http1 import Head
from agentload.record.upstream import Upstream
from agentload.wire import Api

__all__ = ["answer_head", "error_json", "json_response", "request_head", "switch_head"]

_HOP_OUT = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"upgrade",
    }
)
"""Answer headers not forwarded (the body goes on as framed: its framing headers stay)."""
_HOP = _HOP_OUT | {b"transfer-encoding", b"host", b"content-length", b"accept-encoding", b"expect"}
"""Request headers not forwarded (the relay frames the body itself)."""


def request_head(
    upstream: Upstream, head: Head, target: bytes, ws_key: bytes | None, length: int | None
) -> bytes:
    """The head of the agent's request as sent upstream, to ``target`` (its origin form) with a
    body of ``length`` bytes (None: of a length not known yet, sent in chunks as it arrives);
    ``ws_key``: a checked WebSocket upgrade's key, else None."""
    method = head.start[0]
    named = head.tokens(b"connection")
    lines = [
        method + b" " + upstream.target(target) + b" HTTP/1.1",
        b"host: " + upstream.host_header,
    ]
    lines += [k + b": " + v for k, v in head.headers if k not in _HOP and k not in named]
    lines.append(b"accept-encoding: identity")
    if ws_key is not None:
        lines += [b"connection: upgrade", b"upgrade: websocket"]
    if length is None:
        lines.append(b"transfer-encoding: chunked")
    elif length or method not in (b"GET", b"HEAD", b"DELETE", b"OPTIONS"):
        lines.append(b"content-length: %d" % length)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def answer_head(head: Head, *, unchunk: bool, keep_alive: bool) -> bytes:
    """The head of the upstream's answer as sent to the agent: without its chunked framing for
    an HTTP/1.0 agent (``unchunk``), and saying ``connection: close`` unless ``keep_alive``."""
    drop = _HOP_OUT | {b"transfer-encoding"} if unchunk else _HOP_OUT
    lines = [b" ".join(head.start)]
    lines += [k + b": " + v for k, v in head.headers if k not in drop]
    if not keep_alive:
        lines.append(b"connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def switch_head(head: Head) -> bytes:
    """The upstream's checked 101 as sent to the agent: a switch to the WebSocket it asked for."""
    skip = _HOP_OUT | {b"transfer-encoding", b"content-length"}
    lines = [b" ".join(head.start)]
    lines += [k + b": " + v for k, v in head.headers if k not in skip]
    lines += [b"connection: upgrade", b"upgrade: websocket"]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def error_json(api: Api | None, status: int, message: str) -> bytes:
    """An error body in the shape of ``api`` (Messages', Gemini's or OpenAI's)."""
    if api == "gemini":
        status_name = "UNAVAILABLE" if status >= 500 else "INVALID_ARGUMENT"
        return orjson.dumps({"error": {"code": status, "message": message, "status": status_name}})
    if api == "messages":
        kind = "api_error" if status >= 500 else "invalid_request_error"
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    return orjson.dumps(
        {"error": {"message": message, "type": "upstream_error", "param": None, "code": status}}
    )


def json_response(status: bytes, body: bytes, *, close: bool) -> bytes:
    """A whole JSON answer of the relay's own; ``status`` as in ``b"502 Bad Gateway"``."""
    conn = b"connection: close\r\n" if close else b""
    return b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
        status,
        len(body),
        conn,
        body,
    )
