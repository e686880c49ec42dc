"""OpenAI Responses items (a request's ``instructions`` and ``input``, an answer's ``output``)
read as chat messages; ``agentload.wire.responses`` reads both the request and the answer with
them (what each item becomes: that module's docstring).

A run of assistant items is one assistant message (text and placeholders joined, every call a
tool call), so a history's items and the answer that produced them read the same.
"""

from __future__ import annotations

from typing import Any

import orjson

from agentload.wire.reply import ShapeError, need, placeholder

__all__ = ["read_call", "read_item", "read_items"]

_TEXT_PARTS = ("input_text", "output_text", "text")
_PART_NAMES = {"input_image": "image", "input_file": "file", "input_audio": "audio"}
_ROLES = ("user", "system", "developer", "assistant")
_CALL_NAMES = {
    "local_shell_call": "local_shell",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
    "computer_call": "computer",
}
"""Calls of hosted tools the client runs, as tool calls of that name (arguments: the JSON of
their ``action``, or ``operation``)."""
_OUTPUTS = (
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
    "computer_call_output",
)
_USER_ITEMS = ("mcp_approval_response", "item_reference", "compaction")
"""Items that are not the model's output: their placeholder is a ``user`` message."""


def read_items(items: list[Any], where: str = "input") -> list[dict[str, Any]]:
    """Chat messages of a list of items (``where``: its field, for errors); a run of assistant
    items (text, calls, the placeholders of the model's other output) is one assistant message
    (so it equals the answer that produced it)."""
    msgs: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None  # the assistant message being built
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise ShapeError(at, ("an object",), item)
        kind = need(item, "type", str, at) if "type" in item else "message"
        role, text, call = read_item(item, kind, at)
        if role == "tool":
            turn = None
            msgs.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        elif role != "assistant":
            turn = None
            msgs.append({"role": role, "content": text})
        else:
            turn = turn if turn is not None else _turn(msgs)
            if text:
                turn["content"] = (turn["content"] or "") + text
            if call:
                turn.setdefault("tool_calls", []).append(call)
    return msgs


def read_item(item: dict[str, Any], kind: str, at: str) -> tuple[str, str, dict[str, Any]]:
    """One item's role in chat (``tool`` for a call's output), its text and its tool call
    (a call's output: ``{"id": call_id}``; ``{}`` when there is none)."""
    if kind in ("message", "agent_message"):
        role = item.get("role", "user") if kind == "agent_message" else need(item, "role", str, at)
        content = item.get("content", item.get("text"))
        text = "" if content is None else _text(content, f"{at}.content")
        return (role if role in _ROLES else "user"), text, {}
    if kind in _OUTPUTS:
        call_id: str = need(item, "call_id", str, at)
        return "tool", _output(item.get("output"), f"{at}.output"), {"id": call_id}
    call = read_call(item, kind, at)
    if call is not None:
        return "assistant", "", call
    return ("user" if kind in _USER_ITEMS else "assistant"), placeholder(kind), {}


def read_call(item: dict[str, Any], kind: str, at: str) -> dict[str, Any] | None:
    """The tool call an item is (None for an item that is not a call the client runs): a
    ``function_call`` its ``name`` (as the model called it, whatever its ``namespace``) and
    ``arguments`` text, a ``custom_tool_call`` its name and ``{"input": input}``, a hosted
    tool's call (``_CALL_NAMES``) that tool's name and the JSON of its action."""
    if kind == "function_call":
        name = need(item, "name", str, at)
        args = item.get("arguments")
        args = "" if args is None else need(item, "arguments", str, at)
    elif kind == "custom_tool_call":
        name = need(item, "name", str, at)
        args = orjson.dumps({"input": item.get("input") or ""}).decode()
    elif kind in _CALL_NAMES:
        name = _CALL_NAMES[kind]
        args = orjson.dumps(item.get("action", item.get("operation")) or {}).decode()
    else:
        return None
    cid = need(item, "call_id", str, at)
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _turn(msgs: list[dict[str, Any]]) -> dict[str, Any]:
    """A new, empty assistant message, appended to ``msgs``."""
    turn: dict[str, Any] = {"role": "assistant", "content": None}
    msgs.append(turn)
    return turn


def _text(content: Any, where: str) -> str:
    """A string, or the text of a list of content parts joined (text parts and a refusal's
    text as they are, any other part its placeholder: ``[image]``, ``[file]``...)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ShapeError(where, ("a string", "a list"), content)
    out: list[str] = []
    for j, part in enumerate(content):
        kind = need(part, "type", str, f"{where}[{j}]")
        if kind in _TEXT_PARTS:
            out.append(need(part, "text", str, f"{where}[{j}]"))
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            out.append(part["refusal"])
        else:
            out.append(placeholder(_PART_NAMES.get(kind, kind)))
    return "".join(out)


def _output(output: Any, where: str) -> str:
    """A call output's text: a string; a list of parts (``_text``; a part with no ``type`` as
    its JSON); an object its placeholder (``[computer_screenshot]``) or JSON; nothing ``""``."""
    if output is None:
        return ""
    if isinstance(output, list) and all(isinstance(p, dict) and "type" in p for p in output):
        return _text(output, where)
    if isinstance(output, list):
        return "\n".join(p if isinstance(p, str) else orjson.dumps(p).decode() for p in output)
    if isinstance(output, dict) and isinstance(output.get("type"), str):
        return placeholder(output["type"])
    return output if isinstance(output, str) else orjson.dumps(output).decode()
