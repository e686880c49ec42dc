"""Chat-completion messages in the GenAI conventions' structured parts format.

``gen_ai.input.messages`` / ``gen_ai.output.messages`` hold a list of ``{"role", "parts"}``
messages (output messages add ``finish_reason``); a part is ``{"type": "text", "content"}``,
``{"type": "tool_call", "id", "name", "arguments"}``, ``{"type": "tool_call_response", "id",
"response"}`` or ``{"type": "reasoning", "content"}`` (the JSON schemas
gen-ai-input-messages.json / gen-ai-output-messages.json of the semantic conventions). Tool
definitions (``gen_ai.tool.definitions``) are ``{"type", "name", "description", "parameters"}``.

Both ways: chat messages as parts (``message_parts``, ``output_message``, ``tool_definitions``:
``trace export otel``) and parts as chat messages (``chat_messages``: ``trace import otel``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from agentload.interop.content_free import At

__all__ = [
    "chat_content",
    "chat_messages",
    "chat_tool_call",
    "message_parts",
    "output_message",
    "tool_arguments",
    "tool_definitions",
]


def tool_arguments(arguments: Any) -> Any:
    """The arguments as an object where the model's JSON string parses to one (the conventions
    expect an object), else as given."""
    if isinstance(arguments, str):
        try:
            return orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
    return arguments


def _text_parts(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):  # OpenAI content parts
        for p in content:
            if isinstance(p, dict) and p.get("type") == "text":
                parts.append({"type": "text", "content": str(p.get("text", ""))})
            elif isinstance(p, dict):
                parts.append({**p, "type": str(p.get("type", "unknown"))})
        return parts
    return [{"type": "text", "content": str(content)}]


def message_parts(message: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI chat message as a conventions ``ChatMessage``."""
    role = str(message.get("role", "user"))
    parts: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    if role == "tool":
        parts.append(
            {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": message.get("content"),
            }
        )
    else:
        parts.extend(_text_parts(message.get("content")))
    for tc in message.get("tool_calls") or ():
        fn = tc.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": tc.get("id"),
                "name": fn.get("name"),
                "arguments": tool_arguments(fn.get("arguments")),
            }
        )
    out: dict[str, Any] = {"role": role, "parts": parts}
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


def output_message(message: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    """The assistant's answer as a conventions ``OutputMessage`` (``finish_reason`` is required
    there: ``stop`` when the trace has none)."""
    return {**message_parts(message), "finish_reason": finish_reason or "stop"}


def tool_definitions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI ``tools`` as conventions tool definitions."""
    out: list[dict[str, Any]] = []
    for t in tools:
        fn = t.get("function") or {}
        d: dict[str, Any] = {"type": str(t.get("type", "function")), "name": fn.get("name")}
        if fn.get("description") is not None:
            d["description"] = fn["description"]
        if fn.get("parameters") is not None:
            d["parameters"] = fn["parameters"]
        out.append(d)
    return out


# -- back: parts as chat messages (trace import otel) ----------------------------------------------


def _args_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    return orjson.dumps(arguments).decode()


def chat_tool_call(cid: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """One chat tool call (``arguments`` a JSON string, as chat sends them)."""
    return {
        "id": "" if cid is None else str(cid),
        "type": "function",
        "function": {"name": "" if name is None else str(name), "arguments": _args_text(arguments)},
    }


def chat_content(items: list[dict[str, Any]], assistant_with_calls: bool) -> Any:
    """Content parts (chat's ``{"type": "text", "text"}`` and others) as chat content: one text
    a string, none ``""`` (None beside an assistant's tool calls)."""
    if not items:
        return None if assistant_with_calls else ""
    if len(items) == 1 and items[0].get("type") == "text":
        return items[0]["text"]
    return items


def _event_message(m: dict[str, Any], role: str) -> dict[str, Any]:
    """A message in the older event form (``{"role", "content"}``) as a chat message."""
    old = {k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "name")}
    old["role"] = role
    if role == "tool":
        old["tool_call_id"] = str(m.get("tool_call_id") or m.get("id") or "")
    return old


@dataclass
class _Parts:
    """A message's parts sorted: content items, tool calls, tool results, reasoning texts."""

    items: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)

    def add(self, p: dict[str, Any]) -> None:
        """Sort one part (a ``text``, ``tool_call``, ``tool_call_response``, ``reasoning`` or
        other part, kept as a content item)."""
        t = p.get("type")
        if t == "text":
            text = p.get("content", p.get("text"))
            self.items.append({"type": "text", "text": "" if text is None else str(text)})
        elif t == "tool_call":
            self.calls.append(chat_tool_call(p.get("id"), p.get("name"), p.get("arguments")))
        elif t == "tool_call_response":
            response = p.get("response", p.get("result"))
            if not isinstance(response, (str, list)):
                response = "" if response is None else orjson.dumps(response).decode()
            self.results.append(
                {"role": "tool", "tool_call_id": str(p.get("id") or ""), "content": response}
            )
        elif t == "reasoning":
            self.reasoning.append(str(p.get("content") or ""))
        else:
            self.items.append(p)


def _parts_message(m: dict[str, Any], role: str, parts: _Parts) -> dict[str, Any]:
    """The chat message of a conventions message's parts other than its tool results."""
    msg: dict[str, Any] = {
        "role": "user" if role == "tool" else role,
        "content": chat_content(parts.items, role == "assistant" and bool(parts.calls)),
    }
    if role == "tool" and (m.get("tool_call_id") or m.get("id")):
        msg["role"] = "tool"
        msg["tool_call_id"] = str(m.get("tool_call_id") or m.get("id"))
    if parts.calls:
        msg["tool_calls"] = parts.calls
    if parts.reasoning and role == "assistant":
        msg["reasoning_content"] = "".join(parts.reasoning)
    return msg


def chat_messages(m: dict[str, Any], at: At) -> list[dict[str, Any]]:
    """One conventions ``ChatMessage`` (``role``, ``parts``) as chat messages: a tool result part
    is a ``tool`` message of its own."""
    role = str(m.get("role") or "user")
    raw = m.get("parts")
    if raw is None and "content" in m:
        return [_event_message(m, role)]
    parts = _Parts()
    for p in raw if isinstance(raw, list) else ():
        if not isinstance(p, dict):
            at.deviate("parts[]", "not an object, skipped")
            continue
        parts.add(p)
    out = parts.results
    if parts.items or parts.calls or parts.reasoning or not parts.results:
        out = [*parts.results, _parts_message(m, role, parts)]
    if isinstance(m.get("name"), str):
        for x in out:
            if x["role"] != "tool":
                x["name"] = m["name"]
    return out
