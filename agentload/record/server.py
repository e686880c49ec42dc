"""``RecordServer``: the recording proxy (``relay``) and its recorder process (``recorder_process``), until
told to stop.

    with RecordServer("http://127.0.0.1:8000", out_dir) as rs:   # in a background thread
        ...  # point agents at rs.url + "/v1"
    rs.trace_path                                                 # closed, readable

``run()`` serves in the calling thread (``agentload record``) until ``stop()``, a signal,
``--idle-timeout`` seconds with no request in flight, or ``--max-sessions`` sessions recorded
and quiet for ``QUIET_S``. The trace is written as ``generate`` writes one (complete zstd frames
every second) by the recorder process, so a proxy killed at any moment leaves it readable to
its last complete record (and closed, with all it was sent, when only the proxy was killed).

A full disk loses no answered call: the proxy refuses to start on a disk with less than
``RecordOptions.min_free`` free, and refuses each new recorded call with a 507 (never forwarded)
once the disk is that full or a trace write failed (``diskguard``); what the recorder could not
write of the calls already answered it holds in memory and writes as soon as it can, at the
latest at close (``RecordStats.delayed``, ``lost``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from agentload import __version__
from agentload.endpoint.server.server import bind_socket
from agentload.errors import ConfigError, EndpointError
from agentload.masking import redact_url
from agentload.outfile import output_dir
from agentload.record.diskguard import DiskGuard
from agentload.record.native import AGENT_HEADER, SESSION_HEADER
from agentload.record.recorder_process import RecorderProcess, RecordStats
from agentload.record.relay import Relay
from agentload.record.sink import Recorded, SessionOutcome
from agentload.record.upstream import Upstream
from agentload.tokenizer import DEFAULT_TOKENIZER
from agentload.trace.schema import ClockAnchor, Header, HostFacts

__all__ = ["QUIET_S", "RecordOptions", "RecordServer", "parse_listen"]

MIN_FREE = 64 << 20
"""``--min-free``'s default: room for what the recorder writes of the calls in flight."""
QUIET_S = 2.0
"""With ``--max-sessions``: how long the recorded sessions must send nothing before the proxy
stops."""


@dataclass(frozen=True)
class RecordOptions:
    """What ``agentload record`` was asked to do."""

    upstream: str
    out: Path = Path("traces")
    host: str = "127.0.0.1"
    port: int = 8100
    session_header: str | None = SESSION_HEADER
    agent_header: str | None = AGENT_HEADER
    max_sessions: int | None = None
    idle_timeout_s: float | None = None
    tokenizer: str = DEFAULT_TOKENIZER
    name: str = "record"
    min_free: int = MIN_FREE
    """Free bytes the trace's disk must keep: below, new calls are refused (``diskguard``)."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6, ``:PORT`` for 127.0.0.1) → (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8100")
    return (host.strip("[]") or "127.0.0.1"), int(port)


class RecordServer:
    """The proxy and its trace (see the module docstring)."""

    def __init__(
        self,
        opts: RecordOptions,
        *,
        trace_path: Path | None = None,
        header: Header | None = None,
        on_recorded: Callable[[Recorded], None] | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        """``trace_path`` / ``header``: the trace file and its header when the caller has its
        own (``generate --agent``: the run's); by default a new file under ``opts.out`` and a
        recording's header. ``on_recorded`` (run in the proxy's thread) is told what the
        recorder wrote of each call as it wrote it (``generate --agent``'s live progress);
        ``warn`` is told the line of the first call a full disk refused (``diskguard``)."""
        self._on_recorded = on_recorded
        self.opts = opts
        self.upstream = Upstream.from_url(opts.upstream)  # checked once: a ConfigError line
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        # a bad or full --out: one line before listening
        output_dir(opts.out, option="--out", need=opts.min_free)
        self.trace_path = trace_path or (
            opts.out / f"{opts.name}-{stamp}-{os.getpid()}.agentload.jsonl.zst"
        )
        self._given_header = header
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port = opts.port
        self.recorder: RecorderProcess | None = None
        self.relay: Relay | None = None
        self.stats = RecordStats()
        """What the recorder wrote (final once ``serve`` returned)."""
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self.guard = DiskGuard(self.trace_path.parent, opts.min_free, warn=warn)
        """Refuses new calls while the trace's disk is full; ``refused`` counts them."""
        self.stop_reason: str | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT``: the root agents' base URLs start with (OpenAI SDKs: + /v1)."""
        host = f"[{self.opts.host}]" if ":" in self.opts.host else self.opts.host
        return f"http://{host}:{self.port}"

    def _header(self) -> Header:
        if self._given_header is not None:
            recorder = {"proxy": True, "listen": self.url}
            given = self._given_header.model_dump(mode="json", by_alias=True)
            return Header.model_validate({**given, "recorder": recorder})
        return Header(
            tool_version=__version__,
            created_at=datetime.now(UTC).isoformat(),
            clock=ClockAnchor(unix_ns=time.time_ns(), mono_ns=time.perf_counter_ns()),
            tokenizer=self.opts.tokenizer,
            endpoint=redact_url(self.opts.upstream),
            host=HostFacts(
                python=platform.python_version(),
                os=platform.platform(),
                cpu_count=os.cpu_count() or 1,
            ),
            recorder={"proxy": True, "listen": self.url},  # type: ignore[call-arg]
        )

    # -- serving -----------------------------------------------------------------------------
    def bind(self) -> None:
        self._sock = bind_socket(self.opts.host, self.opts.port)
        self.port = self._sock.getsockname()[1]

    async def serve(self, on_started: Callable[[], None] | None = None) -> None:
        """Serve until stopped; closes the trace on the way out, whatever ended it."""
        if self._sock is None:
            self.bind()
        assert self._sock is not None
        o = self.opts
        self._loop = asyncio.get_running_loop()
        header = self._header().model_dump(mode="json")
        self.recorder = RecorderProcess(
            self.trace_path, header, o.session_header, o.agent_header, on_recorded=self._on_recorded
        )
        await self.recorder.start()
        recorder = self.recorder
        self.guard.recorder_error = lambda: recorder.disk_error
        self.relay = Relay(self.upstream, self.recorder, self.guard)
        try:
            await self.relay.start(self._sock)
            if on_started is not None:
                on_started()
            await self._until_done()
        finally:
            await self.relay.aclose()
            self.stats = await self.recorder.close()

    async def _until_done(self) -> None:
        o = self.opts
        assert self.relay is not None and self.recorder is not None
        while True:
            await asyncio.sleep(0.05)
            if self._stop.is_set():
                self.stop_reason = self.stop_reason or "stopped"
                return
            if not self.recorder.alive:
                raise EndpointError(
                    f"the recorder process died; {self.trace_path} holds what it wrote before"
                )
            idle_s = (time.perf_counter_ns() - self.relay.last_activity_ns) / 1e9
            if self.relay.in_flight:
                continue
            if o.idle_timeout_s is not None and idle_s >= o.idle_timeout_s:
                self.stop_reason = f"idle for {o.idle_timeout_s:g}s"
                return
            seen = self.recorder.stats.sessions
            if o.max_sessions is not None and seen >= o.max_sessions and idle_s >= QUIET_S:
                self.stop_reason = f"{seen} sessions recorded"
                return

    # -- in a background thread (tests, embedding) -------------------------------------------
    def start(self, timeout_s: float = 30.0) -> RecordServer:
        """Serve in a daemon thread; returns when the proxy accepts connections."""
        self.bind()
        started = threading.Event()

        def run() -> None:
            try:
                asyncio.run(self.serve(started.set))
            except BaseException as exc:
                self._errors.append(exc)
                started.set()

        self._thread = threading.Thread(target=run, name="agentload-record", daemon=True)
        self._thread.start()
        if not started.wait(timeout_s) or self._errors:
            self.stop()
            raise EndpointError(f"recording proxy failed to start on {self.url}: {self._errors}")
        return self

    def stop(self, timeout_s: float = 15.0) -> Path:
        """Stop serving, close the trace, join the thread; the trace's path."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
        return self.trace_path

    async def listen(
        self, sock: socket.socket, session: str, on_call: Callable[[], None] | None = None
    ) -> Callable[[], None]:
        """From another thread's event loop: serve ``sock`` too, its requests recorded as of
        ``session`` (``Relay.listen``; ``on_call`` runs in the proxy's thread); returns the
        function that closes that listener."""
        loop, relay = self._loop, self.relay
        if loop is None or relay is None:
            raise EndpointError("the recording proxy is not serving")
        done = asyncio.run_coroutine_threadsafe(relay.listen(sock, session, on_call), loop)
        server = await asyncio.wrap_future(done)

        def close() -> None:
            with contextlib.suppress(RuntimeError):  # the proxy's loop already ended
                loop.call_soon_threadsafe(server.close)

        return close

    def outcome(self, outcome: SessionOutcome) -> None:
        """From any thread: how a session a listener stood for ended (written to the trace)."""
        loop, recorder = self._loop, self.recorder
        if loop is not None and recorder is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(recorder.outcome, outcome)

    def request_stop(self) -> None:
        """Ask a serving proxy to stop (from a signal handler or another thread)."""
        self._stop.set()

    def __enter__(self) -> RecordServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
