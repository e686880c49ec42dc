"""Anthropic Messages (``/v1/messages``) read into the chat shape.

``to_chat`` maps a request body to the Chat Completions body it means. Nothing a client sent is
lost: a block with no chat equivalent reads as its typed placeholder (``wire.reply.placeholder``:
``[image]``, ``[document]``, ``[search_result]``, ``[thinking]``, ``[server_tool_use]``,
``[web_search_tool_result]``, ``[mcp_tool_use]``, ``[container_upload]``, and so for any
type, known today or not); extra keys (``cache_control``, ``citations``, ``signature``...)
are ignored.

* ``system`` (a string, or a list of blocks read as below and joined with ``"\\n\\n"``)
  → one leading ``system`` message;
* a ``system`` turn (Claude Code sends them mid-conversation) → a ``system`` message at that
  position, its blocks read as a user turn's text;
* a ``user`` turn (and a turn of any other role) → one ``tool`` message per ``tool_result``
  block, in order (``tool_call_id`` = ``tool_use_id``; content its string, or its blocks of any
  type read as text and joined with ``"\\n\\n"``; an ``is_error`` result keeps its text),
  then one ``user`` message with the turn's other blocks (text blocks' text, other blocks'
  placeholders) joined with ``"\\n\\n"``, when there is any;
* an ``assistant`` turn → ``agentload.trace.capture.assistant_message``: each ``tool_use``
  a tool call whose arguments are ``orjson.dumps(input)``; every other block (text, and the
  placeholders of thinking, server-tool and server-tool-result blocks) joined with ``""`` as
  its text (None when there is none);
* ``tools`` → function tools (server tools, which have no ``input_schema``, drop: no call is
  offered to them); ``tool_choice`` ``auto``/``any``/``tool``/``none`` → ``auto``/``required``/
  a function/``none`` (another type: none; ``disable_parallel_tool_use`` →
  ``parallel_tool_calls: false``); ``max_tokens``, ``temperature``, ``top_p``, ``stream`` and
  the engines' length fields (``apis.ENGINE_FIELDS``) carry over, ``stop_sequences`` → ``stop``,
  and a streamed request asks for usage (``stream_options.include_usage``).

A body that is broken in shape (``messages`` not a list, a turn without a string ``role``, a
content that is neither a string nor a list, a block that is not an object or has no string
``type``, a text block without its string ``text``) raises ``ShapeError`` (a ``WireError``)
naming the field.

Answers: ``reply_from_json`` reads a ``message`` object (or an ``error`` body), ``Stream`` its
SSE events, both into the assistant message its history form reads as (placeholders included,
so a thinking block is ``[thinking]`` either way); usage in chat's keys (``prompt_tokens`` = input + cache read + cache creation).
"""

from __future__ import annotations

from typing import Any

import orjson

from agentload.trace.capture import assistant_message
from agentload.wire.apis import ENGINE_FIELDS
from agentload.wire.reply import (
    ShapeError,
    StreamReader,
    WireReply,
    event_object,
    need,
    placeholder,
)

__all__ = ["Stream", "reply_from_json", "to_chat"]

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
        messages.append({"role": "system", "content": _joined(system, "system", "\n\n")})
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
    blocks = _blocks(turn.get("content"), f"{where}.content")
    if role == "assistant":
        return [_assistant(blocks, f"{where}.content")]
    if role == "system":
        return [{"role": "system", "content": _joined(blocks, f"{where}.content", "\n\n")}]
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for j, b in enumerate(blocks):
        if _kind(b, f"{where}.content[{j}]") == "tool_result":
            out.append(_tool_result(b, f"{where}.content[{j}]"))
        else:
            texts.append(_block_text(b, f"{where}.content[{j}]"))
    if texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _blocks(content: Any, where: str) -> list[Any]:
    """A turn's content as a list of blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    raise ShapeError(where, ("str", "list"), content)


def _assistant(blocks: list[Any], where: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, b in enumerate(blocks):
        if _kind(b, f"{where}[{j}]") == "tool_use":
            calls.append(_call(b, f"{where}[{j}]"))
        else:
            texts.append(_block_text(b, f"{where}[{j}]"))
    text = "".join(texts)
    return assistant_message(text or None, calls)


def _block_text(b: dict[str, Any], where: str) -> str:
    """A block's text in the chat form: a text block's text, any other its placeholder."""
    kind = _kind(b, where)
    if kind == "text":
        text: str = need(b, "text", str, where)
        return text
    return placeholder(kind)


def _call(b: dict[str, Any], where: str) -> dict[str, Any]:
    inp = b.get("input")
    if inp is None:
        inp = {}
    elif not isinstance(inp, dict):
        raise ShapeError(f"{where}.input", ("dict",), inp)
    return _openai_call(need(b, "id", str, where), need(b, "name", str, where), inp)


def _openai_call(cid: str, name: str, inp: Any) -> dict[str, Any]:
    args = orjson.dumps(inp).decode()
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _tool_result(b: dict[str, Any], where: str) -> dict[str, Any]:
    cid = need(b, "tool_use_id", str, where)
    content = b.get("content")
    text = "" if content is None else _joined(content, f"{where}.content", "\n\n")
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _joined(blocks: Any, where: str, sep: str) -> str:
    """The text of a string or a list of content blocks (placeholders for the blocks that are
    not text)."""
    if isinstance(blocks, str):
        return blocks
    listed = _blocks(blocks, where)
    return sep.join(_block_text(b, f"{where}[{j}]") for j, b in enumerate(listed))


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
        text = "".join(_streamed_text(b) for b in blocks if b.kind and b.kind != "tool_use")
        self.out.content = text or None
        self.out.tool_calls = [b.call() for b in blocks if b.kind == "tool_use"]
        return self.out


def _streamed_text(b: _Block) -> str:
    """A streamed block's text in the chat form (as ``_block_text`` reads it in a history)."""
    return "".join(b.parts) if b.kind == "text" else placeholder(b.kind)
