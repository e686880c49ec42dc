"""Anthropic Messages (``/v1/messages``) read into the chat shape.

``to_chat`` maps a request body to the Chat Completions body it means:

* ``system`` (a string, or a list of text blocks whose texts are joined with ``"\\n\\n"``;
  ``cache_control`` ignored) → one leading ``system`` message;
* a ``user`` turn → one ``tool`` message per ``tool_result`` block, in order (``tool_call_id``
  = ``tool_use_id``; content its text, text blocks joined with ``"\\n\\n"``, an ``is_error``
  result keeps its text), then one ``user`` message with the turn's other text (text blocks
  joined with ``"\\n\\n"``; an image or document block reads as ``[image]`` / ``[document]``)
  when there is any;
* an ``assistant`` turn → ``agentload.recorder.capture.assistant_message``: its text blocks
  joined with ``""`` (None when there is none), each ``tool_use`` a tool call whose arguments
  are ``orjson.dumps(input)``; ``thinking`` / ``redacted_thinking`` and server-tool blocks drop;
* ``tools`` → function tools (server tools, which have no ``input_schema``, drop);
  ``tool_choice`` ``auto``/``any``/``tool``/``none`` → ``auto``/``required``/a function/
  ``none`` (``disable_parallel_tool_use`` → ``parallel_tool_calls: false``); ``max_tokens``,
  ``temperature``, ``top_p``, ``stream`` and the engines' length fields (``apis.ENGINE_FIELDS``)
  carry over, ``stop_sequences`` → ``stop``, and a
  streamed request asks for usage (``stream_options.include_usage``).

A block of a type this module does not know maps to nothing; a body that is broken in shape
(``messages`` not a list, a role other than ``user``/``assistant``, a block that is not an
object or has no string ``type``) raises ``WireError`` naming the field.

Answers: ``reply_from_json`` reads a ``message`` object (or an ``error`` body), ``Stream`` its
SSE events; usage in chat's keys (``prompt_tokens`` = input + cache read + cache creation).
"""

from __future__ import annotations

from typing import Any

import orjson

from agentload.errors import WireError
from agentload.recorder.capture import assistant_message
from agentload.wire.apis import ENGINE_FIELDS
from agentload.wire.reply import StreamReader, WireReply, event_object, need

__all__ = ["Stream", "reply_from_json", "to_chat"]

_PLACEHOLDERS = {"image": "[image]", "document": "[document]"}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


# -- requests --------------------------------------------------------------------------------
def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The Chat Completions body a Messages request means (see the module docstring)."""
    turns = need(body, "messages", list, "body")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        text = system if isinstance(system, str) else _joined(system, "system", "\n\n")
        messages.append({"role": "system", "content": text})
    for i, turn in enumerate(turns):
        messages.extend(_turn(turn, f"messages[{i}]"))
    out: dict[str, Any] = {"messages": messages}
    for key in ("model", "max_tokens", "temperature", "top_p", "stream", *ENGINE_FIELDS):
        if key in body:
            out[key] = body[key]
    if body.get("stop_sequences") is not None:
        out["stop"] = need(body, "stop_sequences", list, "body")
    if body.get("stream") is True:
        out["stream_options"] = {"include_usage": True}
    if body.get("tools") is not None:
        tools = need(body, "tools", list, "body")
        out["tools"] = [_tool(t, f"tools[{j}]") for j, t in enumerate(tools) if _is_fn(t)]
    if body.get("tool_choice") is not None:
        _tool_choice(body["tool_choice"], out)
    return out


def _turn(turn: Any, where: str) -> list[dict[str, Any]]:
    role = need(turn, "role", str, where)
    content = turn.get("content")
    if role not in ("user", "assistant"):
        raise WireError(f"{where}.role: expected 'user' or 'assistant', got {role!r}")
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = content
    else:
        raise WireError(f"{where}.content: expected str or list, got {type(content).__name__}")
    if role == "assistant":
        return [_assistant(blocks, f"{where}.content")]
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for j, b in enumerate(blocks):
        kind = _kind(b, f"{where}.content[{j}]")
        if kind == "tool_result":
            out.append(_tool_result(b, f"{where}.content[{j}]"))
        elif kind == "text":
            texts.append(need(b, "text", str, f"{where}.content[{j}]"))
        elif kind in _PLACEHOLDERS:
            texts.append(_PLACEHOLDERS[kind])
    if texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _assistant(blocks: list[Any], where: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, b in enumerate(blocks):
        kind = _kind(b, f"{where}[{j}]")
        if kind == "text":
            texts.append(need(b, "text", str, f"{where}[{j}]"))
        elif kind == "tool_use":
            calls.append(_call(b, f"{where}[{j}]"))
    text = "".join(texts)
    return assistant_message(text or None, calls)


def _call(b: dict[str, Any], where: str) -> dict[str, Any]:
    inp = b.get("input")
    if inp is None:
        inp = {}
    elif not isinstance(inp, dict):
        raise WireError(f"{where}.input: expected dict, got {type(inp).__name__}")
    return _openai_call(need(b, "id", str, where), need(b, "name", str, where), inp)


def _openai_call(cid: str, name: str, inp: Any) -> dict[str, Any]:
    args = orjson.dumps(inp).decode()
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _tool_result(b: dict[str, Any], where: str) -> dict[str, Any]:
    cid = need(b, "tool_use_id", str, where)
    content = b.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    else:
        text = _joined(content, f"{where}.content", "\n\n")
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _joined(blocks: Any, where: str, sep: str) -> str:
    """The text of a list of content blocks (placeholders for images and documents)."""
    if not isinstance(blocks, list):
        raise WireError(f"{where}: expected str or list, got {type(blocks).__name__}")
    texts: list[str] = []
    for j, b in enumerate(blocks):
        kind = _kind(b, f"{where}[{j}]")
        if kind == "text":
            texts.append(need(b, "text", str, f"{where}[{j}]"))
        elif kind in _PLACEHOLDERS:
            texts.append(_PLACEHOLDERS[kind])
    return sep.join(texts)


def _kind(b: Any, where: str) -> str:
    kind: str = need(b, "type", str, where)
    return kind


def _is_fn(t: Any) -> bool:
    return not isinstance(t, dict) or "input_schema" in t


def _tool(t: Any, where: str) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": need(t, "name", str, where)}
    if isinstance(t.get("description"), str):
        fn["description"] = t["description"]
    fn["parameters"] = need(t, "input_schema", dict, where)
    return {"type": "function", "function": fn}


def _tool_choice(choice: Any, out: dict[str, Any]) -> None:
    kind = need(choice, "type", str, "tool_choice")
    if kind == "tool":
        name = need(choice, "name", str, "tool_choice")
        out["tool_choice"] = {"type": "function", "function": {"name": name}}
    elif kind in _CHOICES:
        out["tool_choice"] = _CHOICES[kind]
    else:
        raise WireError(f"tool_choice.type: expected auto, any, tool or none, got {kind!r}")
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False


# -- answers ---------------------------------------------------------------------------------
def _finish(stop_reason: Any) -> str | None:
    """A Messages ``stop_reason`` in chat's words (an unknown one as it came; None if none)."""
    if not isinstance(stop_reason, str):
        return None
    return _FINISH.get(stop_reason, stop_reason)


def _chat_usage(u: dict[str, Any]) -> dict[str, Any]:
    """Messages usage in chat's keys: ``prompt_tokens`` counts input, cache-read and
    cache-creation tokens; missing or null counts are 0."""
    read = _n(u.get("cache_read_input_tokens"))
    made = _n(u.get("cache_creation_input_tokens"))
    prompt = _n(u.get("input_tokens")) + read + made
    out = _n(u.get("output_tokens"))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": out,
        "total_tokens": prompt + out,
        "prompt_tokens_details": {"cached_tokens": read},
        "cache_creation_tokens": made,
    }


def _n(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _error_text(obj: dict[str, Any]) -> str:
    err = obj.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    return str(err)


def reply_from_json(obj: Any) -> WireReply:
    """A ``message`` object (or an ``{"type": "error", "error": ...}`` body)."""
    if isinstance(obj, dict) and "error" in obj and "content" not in obj:
        return WireReply(error=_error_text(obj))
    turn = _assistant(need(obj, "content", list, "body"), "content")  # as the history reads it
    usage = obj.get("usage")
    rid = obj.get("id")
    return WireReply(
        content=turn["content"],
        tool_calls=turn.get("tool_calls", []),
        finish_reason=_finish(obj.get("stop_reason")),
        usage=_chat_usage(usage) if isinstance(usage, dict) else None,
        response_id=rid if isinstance(rid, str) else None,
    )


class _Block:
    """One content block of a streamed answer, as far as it has come."""

    __slots__ = ("id", "input", "kind", "name", "parts")

    def __init__(self, kind: str, start: dict[str, Any]) -> None:
        self.kind = kind
        self.id = str(start.get("id") or "")
        self.name = str(start.get("name") or "")
        self.input = start.get("input")
        text = start.get("text")
        self.parts: list[str] = [text] if isinstance(text, str) and text else []

    def call(self) -> dict[str, Any]:
        """The tool call (arguments: the joined ``partial_json`` parsed and re-dumped; the
        block's start ``input`` when no delta came; the raw text if it does not parse)."""
        raw = "".join(self.parts)
        if not raw:
            return _openai_call(self.id, self.name, self.input or {})
        try:
            return _openai_call(self.id, self.name, orjson.loads(raw))
        except orjson.JSONDecodeError:
            fn = {"name": self.name, "arguments": raw}
            return {"id": self.id, "type": "function", "function": fn}


class Stream(StreamReader):
    """Messages SSE events: ``message_start``, per block ``content_block_start`` /
    ``content_block_delta`` / ``content_block_stop``, ``message_delta``, ``message_stop``;
    ``ping`` and unknown events are ignored, an ``error`` event fills ``out.error``.

    Output-bearing (the proxy's first token): the start of a text, thinking or tool_use block,
    and any non-empty text, thinking or tool-argument delta. Thinking is not content."""

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, Any] = {}

    def event(self, name: str | None, data: bytes) -> bool:
        obj = event_object(name, data)
        kind = obj.get("type") or name
        if kind == "content_block_delta":
            return self._delta(obj)
        if kind == "content_block_start":
            return self._start(obj)
        if kind == "message_start":
            msg = obj.get("message")
            if isinstance(msg, dict):
                if isinstance(msg.get("id"), str):
                    self.out.response_id = msg["id"]
                self._add_usage(msg.get("usage"))
        elif kind == "message_delta":
            delta = obj.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                self.out.finish_reason = _finish(delta["stop_reason"])
            self._add_usage(obj.get("usage"))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.out.error = _error_text(obj)
        return False

    def _start(self, obj: dict[str, Any]) -> bool:
        cb = obj.get("content_block")
        idx = obj.get("index", len(self._blocks))
        if not isinstance(cb, dict) or not isinstance(idx, int):
            return False
        kind = str(cb.get("type") or "")
        self._blocks[idx] = _Block(kind, cb)
        return kind in ("text", "tool_use", "thinking", "redacted_thinking")

    def _delta(self, obj: dict[str, Any]) -> bool:
        delta, idx = obj.get("delta"), obj.get("index")
        block = self._blocks.get(idx) if isinstance(idx, int) else None
        if not isinstance(delta, dict):
            return False
        kind = delta.get("type")
        if kind == "thinking_delta":
            return bool(delta.get("thinking"))
        piece = delta.get("text" if kind == "text_delta" else "partial_json")
        if kind not in ("text_delta", "input_json_delta") or not isinstance(piece, str):
            return False
        if block is not None and piece:
            block.parts.append(piece)
        return bool(piece)

    def _add_usage(self, u: Any) -> None:
        if isinstance(u, dict):
            self._usage.update({k: v for k, v in u.items() if v is not None})
            self.out.usage = _chat_usage(self._usage)

    def reply(self) -> WireReply:
        blocks = [self._blocks[k] for k in sorted(self._blocks)]
        text = "".join(p for b in blocks if b.kind == "text" for p in b.parts)
        self.out.content = text or None
        self.out.tool_calls = [b.call() for b in blocks if b.kind == "tool_use"]
        return self.out
