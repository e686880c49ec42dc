"""What the relay hands the recorder process (``recorder_process``) of a recorded call, and in what words.

``Sink`` is where it goes: ``begin`` when the request went upstream, ``end`` with the ``Answer``
(status, the headers that tell how to read the body, the payload with each read's arrival time,
the error that ended it), ``note`` for an event of the trace (a ``trace.events`` payload). An error is one clipped line with
secrets masked (``describe``); ``CLIENT_LEFT`` is a call whose agent left first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agentload.errortext import clip
from agentload.masking import mask_text
from agentload.trace.events import Eval, EventPayload
from agentload.wire import Api

__all__ = ["CLIENT_LEFT", "Answer", "Recorded", "SessionOutcome", "Sink", "describe"]

CLIENT_LEFT = "client disconnected before the answer ended"
"""The error of a call whose agent left first (the recorder drops it when the streamed answer
had reached its last event: the agent had it all, it only did not wait for the framing's end)."""


class Sink(Protocol):
    """Where the facts of a recorded call go (the recorder process)."""

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
        """A recorded request went out; ``session``: the session its listener stands for
        (``Relay.listen``), which outranks whatever its headers say; ``path``: its request
        path in ``wire.match_path``'s form (a Gemini call's model and streaming, an Azure
        deployment are there)."""

    def end(self, cid: int, answer: Answer) -> None: ...

    def note(self, event: EventPayload, ns: int) -> None:
        """An event for the trace (a WebSocket's unread messages, its end)."""


@dataclass(frozen=True)
class SessionOutcome:
    """How a session that a listener stood for ended (``generate --agent``): the agent's end
    (``end_reason``), the success check's ``eval`` event, more facts for the session record's
    ``meta``; ``ns``: when it ended. A session that made no call still gets its record."""

    session: str
    ns: int
    end_reason: str
    eval: Eval | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    start_ns: int | None = None
    """When it started (the session record of one that made no call starts there)."""
    sandbox: str | None = None
    """The sandbox it ran in: ``docker`` or ``local``."""


@dataclass(frozen=True)
class Recorded:
    """What the recorder wrote of one call or of the tool runs it closed, as it wrote it (the
    recorder process's ``recorded`` status lines; ``generate --agent`` shows them live):
    ``session`` (the trace's session id), ``agent`` (its agent id), whether that agent is the
    session's root, the call's prompt and completion tokens (0 for a tool line) and tool calls
    asked for, and the ns the closed tool runs took (sub-agent runs left out); ``call``: a call's
    line (else a tool line)."""

    session: str
    agent: str
    root: bool
    call: bool = True
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    tool_ns: int = 0


@dataclass
class Answer:
    """What a recorded call got: the upstream's status and headers that tell how to read the
    body (None: no answer came), the payload as it came (each read with its arrival time, ns),
    when it ended, and the error that ended it, if one did."""

    status: int | None
    content_type: str
    content_encoding: str
    pieces: list[tuple[int, bytes]]
    end_ns: int
    error: str | None


def describe(exc: BaseException | None, default: str = "") -> str:
    """An exception as one clipped line with secrets masked (``default`` for None)."""
    if exc is None:
        return default
    return mask_text(clip(str(exc) or type(exc).__name__))
