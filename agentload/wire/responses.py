"""OpenAI Responses (``/v1/responses``) read into the chat shape.

A request's ``instructions`` become a leading system message and its ``input`` items chat
messages: ``message`` items by role, a run of assistant ``message`` and ``function_call`` items
one assistant message (text joined, every call a tool call with ``call_id`` as its id and the
``arguments`` text as sent), ``function_call_output`` a tool message; ``reasoning`` and unknown
items are skipped. An answer (a ``response`` object or its event stream) reads into the same
assistant message: the text of its ``message`` items joined, its ``function_call`` items in
order. ``max_output_tokens`` becomes ``max_tokens``; ``temperature``, ``top_p``,
``parallel_tool_calls``, ``stream`` and the engines' length fields (``apis.ENGINE_FIELDS``)
carry over. ``previous_response_id`` cannot be resolved here (the earlier turns live with
whoever saw them): ``to_chat`` keeps the messages as given, ``previous_response_id(body)`` names
it, and ``continue_from`` joins the stored conversation and the new items.
"""

from __future__ import annotations

from typing import Any

from agentload.errors import WireError
from agentload.wire.apis import ENGINE_FIELDS
from agentload.wire.reply import (
    StreamReader,
    WireReply,
    error_text,
    event_object,
    need,
    str_or_none,
)

__all__ = [
    "Stream",
    "continue_from",
    "previous_response_id",
    "reply_from_json",
    "to_chat",
]

_TEXT_PARTS = ("input_text", "output_text", "text")
_PLACEHOLDERS = {"input_image": "[image]", "input_file": "[file]", "input_audio": "[audio]"}
_ROLES = ("user", "system", "developer", "assistant")
_CHOICES = ("auto", "none", "required")


def previous_response_id(body: dict[str, Any]) -> str | None:
    """The ``previous_response_id`` a request continues from (None when it carries its whole
    conversation): the proxy resolves it from the responses it has seen."""
    v = body.get("previous_response_id")
    return v if isinstance(v, str) and v else None


def continue_from(
    earlier: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The chat messages of a request that continues a stored response: that response's
    conversation (its reply last), then the request's own items; the request's instructions
    (its leading system message) replace the earlier ones, which the API does not carry over."""
    system = messages[:1] if messages and messages[0].get("role") == "system" else []
    history = earlier[1:] if earlier and earlier[0].get("role") == "system" else earlier
    return [*system, *history, *messages[len(system) :]]


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The Chat Completions body a Responses request means (see the module docstring);
    ``WireError`` naming the field (``input[3].call_id: ...``) for one that cannot be read."""
    if not isinstance(body, dict):
        raise WireError(f"body: expected an object, got {type(body).__name__}")
    out: dict[str, Any] = {}
    if "model" in body:
        out["model"] = body["model"]
    messages: list[dict[str, Any]] = []
    instr = body.get("instructions")
    if isinstance(instr, str) and instr:
        messages.append({"role": "system", "content": instr})
    elif instr is not None and not isinstance(instr, (str, list)):
        raise WireError(f"body.instructions: expected a string, got {type(instr).__name__}")
    inp = body.get("input")
    if isinstance(inp, str):
        messages.append({"role": "user", "content": inp})
    elif isinstance(inp, list):
        messages.extend(_items(inp))
    elif inp is not None:
        raise WireError(f"body.input: expected a string or a list, got {type(inp).__name__}")
    out["messages"] = messages
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise WireError(f"body.tools: expected a list, got {type(tools).__name__}")
        out["tools"] = [_tool(t, i) for i, t in enumerate(tools) if _is_function(t, i)]
    if body.get("tool_choice") is not None:
        choice = _tool_choice(body["tool_choice"])
        if choice is not None:
            out["tool_choice"] = choice
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p", "parallel_tool_calls", "stream", *ENGINE_FIELDS):
        if body.get(key) is not None:
            out[key] = body[key]
    if body.get("stream") is True:
        out["stream_options"] = {"include_usage": True}
    return out


def _items(items: list[Any]) -> list[dict[str, Any]]:
    """Chat messages of a list of input items; a run of assistant text and function calls is
    one assistant message (so it equals the answer that produced it)."""
    msgs: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None  # the assistant message being built
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise WireError(f"{where}: expected an object, got {type(item).__name__}")
        kind = need(item, "type", str, where) if "type" in item else "message"
        if kind == "message":
            role = need(item, "role", str, where)
            if role not in _ROLES:
                raise WireError(f"{where}.role: expected one of {', '.join(_ROLES)}, got {role!r}")
            text = _text(item.get("content"), f"{where}.content")
            if role == "assistant":
                turn = turn if turn is not None else _turn(msgs)
                if text:
                    turn["content"] = (turn["content"] or "") + text
                continue
            turn = None
            msgs.append({"role": role, "content": text})
        elif kind == "function_call":
            turn = turn if turn is not None else _turn(msgs)
            call = {
                "id": need(item, "call_id", str, where),
                "type": "function",
                "function": {
                    "name": need(item, "name", str, where),
                    "arguments": need(item, "arguments", str, where),
                },
            }
            turn.setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            turn = None
            call_id = need(item, "call_id", str, where)
            content = _text(item.get("output"), f"{where}.output")
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return msgs


def _turn(msgs: list[dict[str, Any]]) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": "assistant", "content": None}
    msgs.append(turn)
    return turn


def _text(content: Any, where: str) -> str:
    """A string, or the text of a list of content parts joined (images as ``[image]``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise WireError(f"{where}: expected a string or a list, got {type(content).__name__}")
    out: list[str] = []
    for j, part in enumerate(content):
        kind = need(part, "type", str, f"{where}[{j}]")
        if kind in _TEXT_PARTS:
            out.append(need(part, "text", str, f"{where}[{j}]"))
        elif kind in _PLACEHOLDERS:
            out.append(_PLACEHOLDERS[kind])
    return "".join(out)


def _is_function(tool: Any, i: int) -> bool:
    kind: str = need(tool, "type", str, f"tools[{i}]")
    return kind == "function"


def _tool(tool: dict[str, Any], i: int) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": need(tool, "name", str, f"tools[{i}]")}
    for key in ("description", "parameters", "strict"):
        if tool.get(key) is not None:
            fn[key] = tool[key]
    return {"type": "function", "function": fn}


def _tool_choice(choice: Any) -> str | dict[str, Any] | None:
    if isinstance(choice, str):
        if choice not in _CHOICES:
            raise WireError(
                f"body.tool_choice: expected one of {', '.join(_CHOICES)}, got {choice!r}"
            )
        return choice
    kind = need(choice, "type", str, "body.tool_choice")
    if kind == "function":
        return {
            "type": "function",
            "function": {"name": need(choice, "name", str, "body.tool_choice")},
        }
    return None  # a built-in tool or an allowed-tools list: no chat meaning


# -- the answer ---------------------------------------------------------------------------------


def reply_from_json(obj: Any) -> WireReply:
    """A ``response`` object (or an ``{"error": ...}`` body)."""
    if isinstance(obj, dict) and obj.get("error") is not None and "output" not in obj:
        return WireReply(error=error_text(obj["error"]))
    output = need(obj, "output", list, "body")
    out = WireReply(response_id=str_or_none(obj.get("id")), usage=_usage(obj.get("usage")))
    if obj.get("error") is not None:
        out.error = error_text(obj["error"])
    text: list[str] = []
    for i, item in enumerate(output):
        kind = need(item, "type", str, f"output[{i}]")
        if kind == "message":
            content = item.get("content") or []
            text.append(_text(content, f"output[{i}].content"))
        elif kind == "function_call":
            out.tool_calls.append(_call(item, f"output[{i}]"))
    joined = "".join(text)
    out.content = joined or None
    out.finish_reason = _finish(obj, bool(out.tool_calls))
    return out


def _call(item: dict[str, Any], where: str) -> dict[str, Any]:
    return {
        "id": need(item, "call_id", str, where),
        "type": "function",
        "function": {
            "name": need(item, "name", str, where),
            "arguments": str(item.get("arguments") or ""),
        },
    }


def _finish(obj: dict[str, Any], calls: bool) -> str | None:
    status = obj.get("status")
    if status == "completed":
        return "tool_calls" if calls else "stop"
    if status == "incomplete":
        details = obj.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return "content_filter" if reason == "content_filter" else "length"
    return None


def _usage(u: Any) -> dict[str, Any] | None:
    if not isinstance(u, dict):
        return None
    prompt, completion = int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0)
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": int(u.get("total_tokens") or prompt + completion),
    }
    cached = (u.get("input_tokens_details") or {}).get("cached_tokens")
    if isinstance(cached, int):
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    reasoning = (u.get("output_tokens_details") or {}).get("reasoning_tokens")
    if isinstance(reasoning, int):
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


_FINAL = ("response.completed", "response.incomplete", "response.failed")


class Stream(StreamReader):
    """``response.*`` events: the output items built from their deltas, then the final
    ``response`` object (its usage and status; its output items win when it lists them)."""

    def __init__(self) -> None:
        super().__init__()
        self._text: dict[int, dict[int, list[str]]] = {}  # output_index -> content_index -> text
        self._calls: dict[int, dict[str, Any]] = {}  # output_index -> tool call
        self._order: list[int] = []
        self._final_response: dict[str, Any] | None = None

    def event(self, name: str | None, data: bytes) -> bool:
        obj = event_object(name, data)
        kind = obj.get("type") or name
        if kind == "response.output_text.delta":
            return self._delta(obj)
        if kind == "response.function_call_arguments.delta":
            call = self._calls.get(_index(obj))
            delta = obj.get("delta")
            if call is None or not isinstance(delta, str) or not delta:
                return False
            call["function"]["arguments"] += delta
            return True
        if kind == "response.output_item.added":
            return self._item(obj.get("item"), _index(obj))
        if kind == "response.output_item.done":
            self._item(obj.get("item"), _index(obj), done=True)
        elif kind in ("response.created", "response.in_progress"):
            r = obj.get("response")
            if isinstance(r, dict) and self.out.response_id is None:
                self.out.response_id = str_or_none(r.get("id"))
        elif kind in _FINAL:
            self._final(obj.get("response"))
        elif kind == "error":
            self.out.error = str(obj.get("message") or obj.get("code") or obj)
        return False

    def _delta(self, obj: dict[str, Any]) -> bool:
        delta = obj.get("delta")
        if not isinstance(delta, str) or not delta:
            return False
        idx = _index(obj)
        if idx not in self._text:
            self._text[idx] = {}
            self._order.append(idx)
        self._text[idx].setdefault(int(obj.get("content_index") or 0), []).append(delta)
        return True

    def _item(self, item: Any, idx: int, done: bool = False) -> bool:
        """An output item that starts (or ends: its final form replaces what deltas built)."""
        if not isinstance(item, dict):
            return False
        if item.get("type") == "function_call":
            call = _call(item, f"output[{idx}]")
            if idx not in self._calls:
                self._order.append(idx)
            elif not done:
                return False
            self._calls[idx] = call
            return bool(call["function"]["name"]) and not done
        if item.get("type") == "message" and done and isinstance(item.get("content"), list):
            if idx not in self._text:
                self._order.append(idx)
            self._text[idx] = {0: [_text(item["content"], f"output[{idx}].content")]}
        return False

    def _final(self, r: Any) -> None:
        if not isinstance(r, dict):
            return
        self.done = True
        final = reply_from_json(r) if isinstance(r.get("output"), list) else None
        if final is not None and (r["output"] or not self._order):
            self._text = {0: {0: [final.content or ""]}}
            self._calls = dict(enumerate(final.tool_calls, start=1))
            self._order = [0, *self._calls]
        self.out.response_id = self.out.response_id or str_or_none(r.get("id"))
        self.out.usage = _usage(r.get("usage")) or self.out.usage
        if r.get("error") is not None:
            self.out.error = error_text(r["error"])
        self._final_response = r

    def reply(self) -> WireReply:
        text = "".join(
            "".join("".join(parts[k]) for k in sorted(parts))
            for i in self._order
            if (parts := self._text.get(i))
        )
        self.out.content = text or None
        self.out.tool_calls = [self._calls[i] for i in self._order if i in self._calls]
        if self._final_response is not None:
            self.out.finish_reason = _finish(self._final_response, bool(self.out.tool_calls))
        return self.out


def _index(obj: dict[str, Any]) -> int:
    v = obj.get("output_index")
    return v if isinstance(v, int) else 0
