"""OpenAI Responses (``/v1/responses``) read into the chat shape.

A request's ``instructions`` (a string, or a list of items) become a leading system message and
its ``input`` items chat messages; nothing a client sent is lost, and an item or part with no
chat equivalent reads as its typed placeholder (``wire.reply.placeholder``):

* ``message`` items by role (``user``, ``system``, ``developer``, ``assistant``; another
  role reads as ``user``), their content a string or parts: ``input_text``/``output_text``/
  ``text`` their text, ``refusal`` its refusal text, any other part its placeholder
  (``[image]``, ``[file]``, ``[audio]``, ``[<type>]``), joined with ``""``;
* ``agent_message`` (a Codex sub-agent's task, or its final answer in its parent's input): a
  message of its ``role`` (``user`` when it has none), its ``content`` (or ``text``) as above;
* calls, each a tool call (id its ``call_id``) of the assistant turn: ``function_call`` its
  ``name`` as the model called it (whatever its ``namespace``) and ``arguments`` text as sent,
  ``custom_tool_call`` its name and ``{"input": <its input>}``, ``local_shell_call`` /
  ``shell_call`` / ``apply_patch_call`` / ``computer_call`` the tool of that name
  (``local_shell``...) and the JSON of its ``action`` (or ``operation``);
* their outputs (``function_call_output``, ``custom_tool_call_output`` and the four above's
  ``*_output``) a tool message: a string as it is, parts as a message's, an object its
  placeholder (``[computer_screenshot]``);
* ``mcp_approval_response``, ``item_reference`` and ``compaction`` a user message of their
  placeholder; every other item (``reasoning``, ``web_search_call``, ``file_search_call``,
  ``code_interpreter_call``, ``mcp_call``, ``mcp_list_tools``, ``mcp_approval_request``,
  ``image_generation_call``, and any type not known today) its placeholder in the assistant
  turn.

A run of assistant items is one assistant message (text and placeholders joined, every call a
tool call). An answer (a ``response`` object or its event stream) reads into the same assistant
message, its output items read as those of a history. ``tools``: a ``function`` tool is a chat
function tool, a ``custom`` (freeform) one a function of one string ``input``, a ``namespace``
its inner tools (named as the model calls them); hosted tools (``web_search``, ``file_search``,
``code_interpreter``, ``computer``, ``mcp``, ``image_generation``, ``local_shell``, ``shell``,
``apply_patch``...) have no chat form (no call is offered to them). ``tool_choice`` naming a
function is that function, ``auto``/``none``/``required`` carry over, any other none.
``max_output_tokens`` becomes ``max_tokens``; ``temperature``, ``top_p``,
``parallel_tool_calls``, ``stream`` and the engines' length fields (``apis.ENGINE_FIELDS``)
carry over; other keys (``include``, ``store``, ``prompt_cache_key``, ``client_metadata``...)
are ignored. ``previous_response_id`` cannot be resolved here (the earlier turns live with
whoever saw them): ``to_chat`` keeps the messages as given, ``previous_response_id(body)`` names
it, and ``continue_from`` joins the stored conversation and the new items.

A body broken in shape (``input`` neither a string nor a list, an item or part that is not an
object or has no string ``type``, a call without its string ``call_id`` or ``name``) raises
``ShapeError`` (a ``WireError``) naming the field.
"""

from __future__ import annotations

from typing import Any

import orjson

from agentload.wire.apis import ENGINE_FIELDS
from agentload.wire.reply import (
    ShapeError,
    StreamReader,
    WireReply,
    error_text,
    event_object,
    need,
    str_or_none,
)
from agentload.wire.responses_items import read_call, read_item, read_items

__all__ = [
    "Stream",
    "continue_from",
    "previous_response_id",
    "reply_from_json",
    "to_chat",
]

_CHOICES = ("auto", "none", "required")
_CUSTOM_PARAMETERS = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
}
"""A custom (freeform) tool's chat form: a function of one string, ``input``."""


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
        raise ShapeError("body", ("an object",), body)
    out: dict[str, Any] = {}
    if "model" in body:
        out["model"] = body["model"]
    out["messages"] = _messages(body)
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise ShapeError("body.tools", ("a list",), tools)
        out["tools"] = [t for i, tool in enumerate(tools) for t in _tools(tool, f"tools[{i}]")]
    _parameters(body, out)
    return out


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's chat messages: its ``instructions`` (a system message, or items), then its
    ``input`` (a user message, or items)."""
    messages: list[dict[str, Any]] = []
    instr = body.get("instructions")
    if isinstance(instr, str) and instr:
        messages.append({"role": "system", "content": instr})
    elif isinstance(instr, list):
        messages.extend(read_items(instr, "instructions"))
    elif instr is not None and not isinstance(instr, str):
        raise ShapeError("body.instructions", ("a string", "a list"), instr)
    inp = body.get("input")
    if isinstance(inp, str):
        messages.append({"role": "user", "content": inp})
    elif isinstance(inp, list):
        messages.extend(read_items(inp))
    elif inp is not None:
        raise ShapeError("body.input", ("a string", "a list"), inp)
    return messages


def _parameters(body: dict[str, Any], out: dict[str, Any]) -> None:
    """Add to ``out`` the request's parameters that have a chat form: ``tool_choice``,
    ``max_tokens`` (``max_output_tokens``), those that carry over, ``stream_options``."""
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


def _tools(tool: Any, where: str) -> list[dict[str, Any]]:
    """A tool's chat function tools: a ``function`` itself, a ``custom`` (freeform) one a
    function of one string ``input``, a ``namespace`` its inner tools (named as the model
    calls them); a hosted tool (``web_search``, ``file_search``, ``mcp``...) none."""
    kind = need(tool, "type", str, where)
    if kind == "namespace":
        inner = need(tool, "tools", list, where)
        return [t for j, sub in enumerate(inner) for t in _tools(sub, f"{where}.tools[{j}]")]
    if kind not in ("function", "custom"):
        return []
    fn: dict[str, Any] = {"name": need(tool, "name", str, where)}
    for key in ("description", "parameters", "strict"):
        if tool.get(key) is not None:
            fn[key] = tool[key]
    if kind == "custom":
        fn["parameters"] = _CUSTOM_PARAMETERS
    return [{"type": "function", "function": fn}]


def _tool_choice(choice: Any) -> str | dict[str, Any] | None:
    if isinstance(choice, str):
        return choice if choice in _CHOICES else None
    kind = need(choice, "type", str, "body.tool_choice")
    if kind == "function":
        return {
            "type": "function",
            "function": {"name": need(choice, "name", str, "body.tool_choice")},
        }
    return None  # a built-in tool or an allowed-tools list: no chat meaning


# -- the answer ---------------------------------------------------------------------------------


def reply_from_json(obj: Any) -> WireReply:
    """A ``response`` object (or an ``{"error": ...}`` body): its output items read as a
    history's items are (``read_items``), so the answer is the assistant message the next
    request's history holds."""
    if isinstance(obj, dict) and obj.get("error") is not None and "output" not in obj:
        return WireReply(error=error_text(obj["error"]))
    output = need(obj, "output", list, "body")
    out = WireReply(response_id=str_or_none(obj.get("id")), usage=_usage(obj.get("usage")))
    if obj.get("error") is not None:
        out.error = error_text(obj["error"])
    turns = [m for m in read_items(output, "output") if m["role"] == "assistant"]
    out.content = "".join(m["content"] or "" for m in turns) or None
    out.tool_calls = [c for m in turns for c in m.get("tool_calls", ())]
    out.finish_reason = _finish(obj, bool(out.tool_calls))
    return out


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


_ARGUMENT_DELTAS = (
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
)
_FINAL = ("response.completed", "response.incomplete", "response.failed")


class Stream(StreamReader):
    """``response.*`` events: the output items built from their deltas, then the final
    ``response`` object (its usage and status; its output items win when it lists them)."""

    def __init__(self) -> None:
        super().__init__()
        self._text: dict[int, dict[int, list[str]]] = {}  # output_index -> content_index -> text
        self._calls: dict[int, dict[str, Any]] = {}  # output_index -> tool call
        self._inputs: dict[int, str] = {}  # output_index -> a custom tool call's input so far
        self._order: list[int] = []
        self._final_response: dict[str, Any] | None = None

    def event(self, name: str | None, data: bytes) -> bool:
        obj = event_object(name, data)
        kind = obj.get("type") or name
        if kind == "response.output_text.delta":
            return self._delta(obj)
        if kind in _ARGUMENT_DELTAS:
            return self._arguments(obj, kind == "response.custom_tool_call_input.delta")
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
        self._place(idx)
        self._text.setdefault(idx, {}).setdefault(int(obj.get("content_index") or 0), []).append(
            delta
        )
        return True

    def _place(self, idx: int) -> None:
        """Output item ``idx`` takes its place in the answer (once)."""
        if idx not in self._order:
            self._order.append(idx)

    def _arguments(self, obj: dict[str, Any], custom: bool) -> bool:
        """A call's arguments delta (a custom tool's input delta: its ``input`` grows)."""
        idx = _index(obj)
        call, delta = self._calls.get(idx), obj.get("delta")
        if call is None or not isinstance(delta, str) or not delta:
            return False
        if custom:
            self._inputs[idx] = self._inputs.get(idx, "") + delta
            call["function"]["arguments"] = orjson.dumps({"input": self._inputs[idx]}).decode()
        else:
            call["function"]["arguments"] += delta
        return True

    def _item(self, item: Any, idx: int, done: bool = False) -> bool:
        """An output item that starts (or ends: its final form replaces what deltas built); a
        call is output-bearing as it starts, any other item's text comes when it ends."""
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            return False
        kind = item["type"]
        self._place(idx)
        at = f"output[{idx}]"
        call = read_call(item, kind, at)
        if call is not None:
            started = idx not in self._calls
            if done or started:
                self._calls[idx] = call
            return started and not done and bool(call["function"]["name"])
        if done:
            self._text[idx] = {0: [read_item(item, kind, at)[1]]}
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
