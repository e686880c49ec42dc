"""An answer in the chat shape, and the incremental reader of an SSE answer stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from agentload.errors import WireError

__all__ = ["ShapeError", "StreamReader", "WireReply", "placeholder"]


@dataclass
class WireReply:
    """One answer read into the chat shape (whatever API carried it).

    ``tool_calls`` are OpenAI-shaped (``{"id", "type": "function", "function": {"name",
    "arguments"}}``, arguments a JSON text); ``finish_reason`` is in chat's words (``stop``,
    ``length``, ``tool_calls``, ``content_filter``); ``usage`` uses chat's keys
    (``prompt_tokens`` counts every input token, cached or not; ``completion_tokens``;
    ``prompt_tokens_details.cached_tokens``; Messages' ``cache_creation_input_tokens`` as
    ``cache_creation_tokens``), None when the answer carried none; ``error`` is the text of an
    error the stream or body carried instead of (or after part of) an answer."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    response_id: str | None = None
    error: str | None = None


class StreamReader:
    """Reads one SSE answer stream as it arrives.

    ``feed(chunk)`` takes the bytes of one network chunk (events may be split anywhere across
    chunks) and returns how many of the events it completed carried output (text, tool name or
    arguments): the proxy stamps the first token at the first chunk that returns > 0.
    ``reply()`` is the answer so far (complete once the stream ended). Subclasses implement
    ``event(name, data)`` for one complete event (``name`` from its ``event:`` line, None if it
    had none; ``data`` its ``data:`` lines joined by newlines) and return whether it carried
    output; a malformed event raises ``WireError``.
    """

    def __init__(self) -> None:
        self._buf = b""
        self.out = WireReply()
        self.done = False
        self.events = 0
        """How many events were read (chat's closing ``[DONE]`` not counted)."""

    def feed(self, chunk: bytes) -> int:
        buf = self._buf + chunk
        buf = buf.replace(b"\r\n", b"\n") if b"\r" in buf else buf
        n = 0
        while True:
            cut = buf.find(b"\n\n")
            if cut < 0:
                break
            raw, buf = buf[:cut], buf[cut + 2 :]
            name: str | None = None
            data: list[bytes] = []
            for line in raw.split(b"\n"):
                if line.startswith(b"data:"):
                    data.append(line[5:].removeprefix(b" "))
                elif line.startswith(b"event:"):
                    name = line[6:].strip().decode("utf-8", "replace")
            if not data and name is None:
                continue
            joined = b"\n".join(data)
            if joined != b"[DONE]":
                self.events += 1
            if self.event(name, joined):
                n += 1
        self._buf = buf
        return n

    def event(self, name: str | None, data: bytes) -> bool:
        raise NotImplementedError

    def reply(self) -> WireReply:
        return self.out


def event_object(name: str | None, data: bytes) -> dict[str, Any]:
    """One SSE event's data as a JSON object; else ``WireError`` naming the event."""
    what = f"stream event {name}" if name else "stream event"
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"{what}: malformed JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise WireError(f"{what}: expected an object, got {type(obj).__name__}")
    return obj


def str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def error_text(err: Any) -> str:
    """The text of an OpenAI-shaped ``error`` value (its ``message``, else the value)."""
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


class ShapeError(WireError):
    """A body broken in shape: ``field`` (``messages[1].content[0].text``; ``body`` for the
    whole body) is missing (``got`` is ``NoneType``) or not of a type it may have
    (``expected``: the types' names). A server answers it in its own API's words."""

    def __init__(self, field: str, expected: tuple[str, ...], got: Any) -> None:
        self.field = field
        self.expected = expected
        self.got = type(got).__name__
        super().__init__(f"{field}: expected {' or '.join(expected)}, got {self.got}")


def placeholder(kind: str) -> str:
    """The typed placeholder text of a part with no chat equivalent (``[image]``)."""
    return f"[{kind}]"


def need(obj: Any, key: str, types: type | tuple[type, ...], where: str) -> Any:
    """``obj[key]`` checked to be of ``types``; else ``ShapeError`` naming ``where.key``."""
    if not isinstance(obj, dict):
        raise ShapeError(where, ("an object",), obj)
    v = obj.get(key)
    if not isinstance(v, types):
        raise ShapeError(f"{where}.{key}", _names(types), v)
    return v


def _names(types: type | tuple[type, ...]) -> tuple[str, ...]:
    ts = types if isinstance(types, tuple) else (types,)
    return tuple(t.__name__ for t in ts)
