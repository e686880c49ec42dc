"""The recorder process: everything the recording proxy does besides forwarding.

The proxy (``relay``) forwards bytes and notes, per recorded call, the request and the answer's
payload with the time each read of it came. Reading them — the request's JSON, the placing of
the call in its session (``threads``), the answer's SSE events, our token counts, the blobs,
the trace's compression and writes — costs a hundred times more CPU than forwarding, so it runs
here, in a process of its own at a lower CPU priority (``NICE``): on a busy machine it never
delays a chunk the agent is waiting for. It reads frames from its stdin in the order the proxy
saw things happen and writes the trace exactly as before.

* ``RecorderProcess`` is the proxy's end: ``start()`` (the trace is open when it returns),
  ``begin`` / ``end`` (non-blocking), ``close()`` (the trace is closed; the counts). The
  process's own end is ``recorder_child`` (``python -m agentload.record.recorder_child``).
* Frames: 4-byte big-endian length + a pickle of a tuple: ``("b", cid, api, body size,
  headers, submit_ns, credentials, path)`` followed by the body's bytes as they are (never
  copied into a pickle), ``("e", cid, Answer fields...)``, ``("n", event, ns)`` (an event's
  payload: a WebSocket's unread message, its end), ``("s", SessionOutcome)`` (how a session a
  listener stood for ended); the first frame is the configuration. They are written as the
  pipe takes them, a slice at a time (``_flush``), so a large body is never copied whole.
* Status lines on its stdout: ``ready``, ``sessions N`` as sessions appear, ``recorded {json}``
  for each call written and each request that closed tool runs (``sink.Recorded``: what
  ``generate --agent`` shows live), ``disk REASON`` when a trace write failed (a full disk: the
  writer holds the lines in memory and tries again) and ``disk`` once one went through again,
  ``done {json}`` at the end, ``error ...`` (one line) when it cannot start. The proxy refuses
  new calls while a write fails (``diskguard``).
* It ignores SIGINT and SIGTERM (Ctrl-C reaches the whole process group; the proxy stops first
  and then closes its stdin). If the proxy dies (``kill -9``), its stdin ends and it closes the
  trace with everything it was sent; if both die, the trace is readable to its last complete
  frame, as for ``generate``.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from agentload.errors import EndpointError
from agentload.masking import is_secret_header, known_secrets
from agentload.record.native import NATIVE_HEADERS
from agentload.record.sink import Answer, Recorded, SessionOutcome
from agentload.trace.events import EventPayload
from agentload.wire import Api

if TYPE_CHECKING:
    pass

__all__ = ["NICE", "RecordStats", "RecorderProcess"]

NICE = 10
"""How much lower the recorder's CPU priority is than the proxy's."""
_PIPE_SLICE = 256 << 10
"""Frames go to the recorder's stdin this much at a time, as its pipe takes them."""


@dataclass
class RecordStats:
    """What the recorder wrote."""

    calls: int = 0
    sessions: int = 0
    errors: int = 0
    unread: int = 0
    """Requests not turned into calls (``unread_request`` and ``record_error`` events)."""
    unread_first: str | None = None
    """Why the first of them was not."""
    websockets: int = 0
    """WebSocket connections relayed (their messages are among ``unread``)."""
    embeddings: int = 0
    """Embeddings requests relayed (no calls, and not among ``unread``)."""
    delayed: int = 0
    """Trace lines a full disk refused at first, written later (at the latest at close)."""
    lost: int = 0
    """Trace lines never written: the disk still refused them at close."""
    disk_error: str | None = None
    """Why the trace's last write failed, if the disk refused it."""


def _frame(obj: tuple[Any, ...] | dict[str, Any]) -> bytes:
    data = pickle.dumps(obj, protocol=5)
    return len(data).to_bytes(4, "big") + data


@dataclass
class RecorderProcess:
    """The proxy's end of the recorder process (see the module docstring)."""

    trace_path: Path
    header: dict[str, Any]
    session_header: str | None
    agent_header: str | None
    stats: RecordStats = field(default_factory=RecordStats)
    on_recorded: Callable[[Recorded], None] | None = None
    """Called (in the proxy's event loop) with each ``recorded`` line, in the recorder's order."""
    _proc: asyncio.subprocess.Process | None = None
    _lines: asyncio.Task[None] | None = None
    _done: bool = False
    _out: deque[bytes | memoryview] = field(default_factory=deque)
    """What is still to be written to its stdin, in order (``_flush``)."""
    _pump: asyncio.Task[None] | None = None
    disk_error: str | None = None
    """Why the recorder's last trace write failed, while it holds lines (``disk`` lines)."""

    def __post_init__(self) -> None:
        self._wanted = {h.encode() for h in (self.session_header, self.agent_header) if h}
        self._wanted.add(b"content-encoding")  # a compressed body is read decoded
        if self.session_header:  # the headers agents name themselves by (record/native.py)
            self._wanted |= {h.encode() for h in NATIVE_HEADERS}

    async def start(self, timeout_s: float = 60.0) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agentload.record.recorder_child",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(
            _frame(
                {
                    "path": str(self.trace_path),
                    "header": self.header,
                    "session_header": self.session_header,
                    "agent_header": self.agent_header,
                    "secrets": known_secrets(),  # what it must mask (the upstream URL's, say)
                    "report": self.on_recorded is not None,
                }
            )
        )
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), timeout_s)
        except TimeoutError:
            line = b"error recorder process did not start in time"
        text = line.decode("utf-8", "replace").strip()
        if text != "ready":
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()
            why = (
                text.removeprefix("error ") or f"recorder process exited ({self._proc.returncode})"
            )
            raise EndpointError(f"cannot record into {self.trace_path}: {why}")
        self._lines = asyncio.create_task(self._read_lines())

    async def _read_lines(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        async for raw in self._proc.stdout:
            kind, _, rest = raw.decode("utf-8", "replace").strip().partition(" ")
            if kind == "recorded":
                if self.on_recorded is not None:
                    self.on_recorded(Recorded(**orjson.loads(rest)))
            elif kind == "sessions":
                self.stats.sessions = int(rest)
            elif kind == "disk":
                self.disk_error = rest or None
            elif kind == "done":
                self.stats = RecordStats(**orjson.loads(rest))
                self._done = True

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    def _send(self, obj: tuple[Any, ...], raw: bytes = b"") -> None:
        """One frame (its length, then its pickle), and ``raw`` after it as it is (a request's
        body: never copied into the pickle), written at once as far as the pipe takes them."""
        stdin = self._proc.stdin if self._proc is not None else None
        if stdin is not None and not stdin.is_closing():
            data = pickle.dumps(obj, protocol=5)
            self._out += (len(data).to_bytes(4, "big"), memoryview(data))
            if raw:
                self._out.append(memoryview(raw))
            self._flush()

    def _flush(self, *, pump: bool = True) -> None:
        """Write what waits, a slice at a time, while the pipe's buffer is under its high-water
        mark (so it never holds a second copy of a large body); the rest once it drained."""
        stdin = self._proc.stdin if self._proc is not None else None
        out = self._out
        if stdin is None or stdin.is_closing():
            out.clear()
            return
        while out and stdin.transport.get_write_buffer_size() < _PIPE_SLICE:
            item = out.popleft()
            if len(item) > _PIPE_SLICE:
                out.appendleft(item[_PIPE_SLICE:])
                item = item[:_PIPE_SLICE]
            stdin.write(item)
        if out and pump and self._pump is None:
            self._pump = asyncio.get_running_loop().create_task(self._drain(stdin))

    async def _drain(self, stdin: asyncio.StreamWriter) -> None:
        try:
            while self._out and not stdin.is_closing():
                await stdin.drain()
                self._flush(pump=False)
        except (ConnectionError, RuntimeError):
            self._out.clear()  # the recorder is gone: close() says so
        finally:
            self._pump = None

    def begin(
        self,
        cid: int,
        api: Api,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        submit_ns: int,
        session: str | None = None,
        path: str = "",
    ) -> None:
        """A recorded request went out. The session and agent headers are passed on (the
        listener's ``session``, when it stands for one, as the session header); the values of
        credential headers too, only so that the recorder masks them wherever an answer echoes
        them (they are never written)."""
        picked: dict[str, str] = {}
        creds: list[str] = []
        for k, v in headers:
            if k in self._wanted:
                picked[k.decode("latin-1")] = v.decode("latin-1")
            elif is_secret_header(k):
                creds.append(v.decode("latin-1"))
        if session is not None and self.session_header:
            picked[self.session_header] = session
        self._send(("b", cid, api, len(body), picked, submit_ns, creds, path), body)

    def end(self, cid: int, a: Answer) -> None:
        """A recorded call is over."""
        fields = (a.status, a.content_type, a.content_encoding, a.pieces, a.end_ns, a.error)
        self._send(("e", cid, *fields))

    def note(self, event: EventPayload, ns: int) -> None:
        """An event for the trace (``Recorder.note``)."""
        self._send(("n", event, ns))

    def outcome(self, outcome: SessionOutcome) -> None:
        """How a session ended (``Recorder.outcome``)."""
        self._send(("s", outcome))

    async def close(self, timeout_s: float = 120.0) -> RecordStats:
        """Close its stdin and wait until it has written and closed the trace."""
        proc = self._proc
        if proc is None:
            return self.stats
        if self._pump is not None:  # what waits goes first
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._pump), timeout_s)
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        if self._lines is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._lines, 5)
        if not self._done and proc.returncode:
            raise EndpointError(
                f"recorder process exited with {proc.returncode}; the trace "
                f"{self.trace_path} holds what it wrote before"
            )
        return self.stats


# ---------------------------------------------------------------- the process itself -----
