"""Chat-completion messages in the GenAI conventions' structured parts format.

``gen_ai.input.messages`` / ``gen_ai.output.messages`` hold a list of ``{"role", "parts"}``
messages (output messages add ``finish_reason``); a part is ``{"type": "text", "content"}``,
``{"type": "tool_call", "id", "name", "arguments"}``, ``{"type": "tool_call_response", "id",
"response"}`` or ``{"type": "reasoning", "content"}`` (the JSON schemas
gen-ai-input-messages.json / gen-ai-output-messages.json of the semantic conventions). Tool
definitions (``gen_ai.tool.definitions``) are ``{"type", "name", "description", "parameters"}``.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["message_parts", "output_message", "tool_arguments", "tool_definitions"]


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
