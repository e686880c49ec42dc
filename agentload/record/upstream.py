"""The upstream of the recording proxy: where requests go, and one connection to it.

``Upstream`` is the ``--upstream`` URL, checked once (visible ASCII only, so nothing from it can
break a request head), with the target it gives each request. ``UpstreamConn`` is one connection
to it: the relay keeps idle ones for reuse (``relay.Relay``), and while an exchange uses one,
every read goes to that exchange (``AnswerReader``); bytes on an idle connection mean it is out
of step, and it is never reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from agentload.errors import ConfigError
from agentload.masking import redact_url, remember_url
from agentload.options.values import endpoint_problem

__all__ = ["AnswerReader", "Upstream", "UpstreamConn", "nodelay"]


@dataclass(frozen=True)
class Upstream:
    """Where requests go: ``http(s)://host[:port][/prefix][?query]`` (a trailing ``/v1`` is
    dropped: the agent's paths carry it; a query, e.g. Azure's ``api-version``, is added to
    every request's). The URL is checked once here: only visible ASCII, so nothing from it can
    break a request head."""

    host: str
    port: int
    tls: ssl.SSLContext | None
    prefix: bytes
    host_header: bytes
    query: bytes = b""

    @classmethod
    def from_url(cls, url: str) -> Upstream:
        remember_url(url)
        shown = redact_url(url)
        if not url.isascii() or not url.isprintable() or " " in url:
            raise ConfigError(
                f"--upstream {shown!r}: a URL holds visible ASCII only (no spaces, CR, LF or "
                "control characters; percent-encode the rest, punycode for a host)"
            )
        try:
            u = urlsplit(url)
        except ValueError:
            raise ConfigError(f"--upstream {shown!r}: its host does not parse") from None
        problem = endpoint_problem(url) if u.scheme in ("http", "https") else None
        if problem is not None:
            raise ConfigError(f"--upstream {shown!r}: {problem}")
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ConfigError(
                f"--upstream {shown!r}: expected an http(s):// URL, http(s)://HOST[:PORT][/PATH]"
            )
        try:
            port = u.port
        except ValueError:
            raise ConfigError(f"--upstream {shown!r}: the port must be 1-65535") from None
        if port == 0:
            raise ConfigError(f"--upstream {shown!r}: the port must be 1-65535")
        tls = ssl.create_default_context() if u.scheme == "https" else None
        host = u.hostname
        netloc = f"[{host}]" if ":" in host else host
        if port:
            netloc += f":{port}"
        prefix = u.path.rstrip("/").removesuffix("/v1").rstrip("/")
        return cls(
            host,
            port or (443 if tls else 80),
            tls,
            prefix.encode(),
            netloc.encode(),
            u.query.encode(),
        )

    def target(self, target: bytes) -> bytes:
        """The request target sent upstream for the agent's ``target`` (origin form)."""
        if not self.query:
            return self.prefix + target
        return self.prefix + target + (b"&" if b"?" in target else b"?") + self.query

    @property
    def label(self) -> str:
        return f"{self.host}:{self.port}"


def nodelay(transport: asyncio.BaseTransport) -> None:
    """Send small writes at once on a TCP connection (no Nagle delay): each chunk as it comes."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class AnswerReader(Protocol):
    """What reads an upstream connection in use: its exchange (``exchange.Exchange``)."""

    def up_data(self, data: bytes) -> None: ...

    def up_lost(self, exc: Exception | None) -> None: ...

    def up_flow(self) -> None:
        """The connection's writes were paused or resumed (``UpstreamConn.full``)."""


class UpstreamConn(asyncio.Protocol):
    """One connection to the upstream; it hands what it reads to its exchange."""

    transport: asyncio.Transport

    def __init__(self) -> None:
        self.exchange: AnswerReader | None = None
        self.closed = False
        self.full = False
        """Its writes are paused: the upstream does not take what was written as fast."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        nodelay(transport)

    def data_received(self, data: bytes) -> None:
        ex = self.exchange
        if ex is not None:
            ex.up_data(data)
        else:  # bytes on an idle connection: it is out of step, never reuse it
            self.closed = True
            self.transport.close()

    def pause_writing(self) -> None:
        self.full = True
        if self.exchange is not None:
            self.exchange.up_flow()

    def resume_writing(self) -> None:
        self.full = False
        if self.exchange is not None:
            self.exchange.up_flow()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.exchange
        if ex is not None:
            ex.up_lost(exc)
