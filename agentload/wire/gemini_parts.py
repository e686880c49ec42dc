"""Gemini contents' parts read as chat pieces, for both sides of ``agentload.wire.gemini``: a
request's history and an answer's candidate read alike, so an assistant turn has one chat form.

* ``part_text``: a part's text (``text``), a media part's placeholder by its MIME type
  (``[image]``, ``[audio]``, ``[video]``, else ``[document]``), any other data's placeholder
  (``executableCode`` → ``[executable_code]``), ``""`` for a part of metadata only
  (``thoughtSignature``...); ``is_thought``: a ``thought: true`` part (dropped by callers);
* ``read_call``: a ``functionCall`` as an OpenAI tool call (arguments ``orjson.dumps(args)``;
  no id: ``call_id``); ``model_turn``: a ``model`` content as an assistant message;
* ``tool_result``: a ``functionResponse`` as a ``tool`` message;
* ``field``: a field under its camelCase name or its snake_case one (the API takes both).

A part broken in shape raises ``ShapeError`` naming the field.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from agentload.hashing import content_id
from agentload.trace.capture import assistant_message
from agentload.wire.reply import ShapeError, need, placeholder

__all__ = ["call_id", "field", "is_thought", "model_turn", "part_text", "read_call", "tool_result"]

_CAPITAL = re.compile(r"(?<!^)(?=[A-Z])")
_META = frozenset({"thought", "thoughtSignature", "partMetadata", "videoMetadata"})
_META |= {_CAPITAL.sub("_", k).lower() for k in _META}
_MEDIA = ("image", "audio", "video")


def _snake(name: str) -> str:
    """``mimeType`` → ``mime_type``."""
    return _CAPITAL.sub("_", name).lower()


def field(obj: dict[str, Any], key: str) -> Any:
    """``obj[key]``, or the value under its snake_case name (the API takes both)."""
    v = obj.get(key)
    return obj.get(_snake(key)) if v is None else v


def call_id(name: str, args: Any, position: int) -> str:
    """The id of a function call the API sent without one: ``gc-`` and a hash of its name,
    arguments (canonical JSON) and place among its turn's calls."""
    return "gc-" + content_id([name, args, position])[:16]


def model_turn(parts: list[Any], where: str) -> dict[str, Any]:
    """A ``model`` content's parts as the assistant message: each ``functionCall`` a tool call
    (numbered in order for ``call_id``), the other parts' text joined with ``""``; thoughts
    dropped."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, p in enumerate(parts):
        w = f"{where}[{j}]"
        if is_thought(p, w):
            continue
        fc = field(p, "functionCall")
        if fc is not None:
            calls.append(read_call(fc, len(calls), f"{w}.functionCall"))
        else:
            texts.append(part_text(p, w))
    return assistant_message("".join(texts) or None, calls)


def is_thought(p: Any, where: str) -> bool:
    """Whether part ``p`` is a thought (dropped); ``ShapeError`` when it is not an object."""
    if not isinstance(p, dict):
        raise ShapeError(where, ("an object",), p)
    return p.get("thought") is True


def read_call(fc: Any, position: int, where: str) -> dict[str, Any]:
    """A ``functionCall`` (the turn's ``position``-th) as an OpenAI-shaped tool call."""
    name: str = need(fc, "name", str, where)
    args = fc.get("args")
    if args is None:
        args = {}
    elif not isinstance(args, dict):
        raise ShapeError(f"{where}.args", ("dict",), args)
    cid = fc.get("id")
    if cid is not None and not isinstance(cid, str):
        raise ShapeError(f"{where}.id", ("str",), cid)
    fn = {"name": name, "arguments": orjson.dumps(args).decode()}
    return {"id": cid or call_id(name, args, position), "type": "function", "function": fn}


def tool_result(fr: Any, where: str, open_ids: list[tuple[str, str]]) -> dict[str, Any]:
    """A ``functionResponse`` as a ``tool`` message (a response of one string field is that
    string, any other its JSON; its ``parts`` after it); without an ``id``, or with one that
    no call in ``open_ids`` has, it answers the first call of its name there: ``open_ids`` is
    the (name, id) of the calls before it that no response answered yet (the one it answers
    is taken out). Gemini CLI's sub-agents carry a call the API sent without an id as it
    came, and answer it with an id of their own (``<uuid>#0-0``)."""
    name: str = need(fr, "name", str, where)
    cid = fr.get("id")
    if cid is not None and not isinstance(cid, str):
        raise ShapeError(f"{where}.id", ("str",), cid)
    match = next((k for k, (_, i) in enumerate(open_ids) if cid and i == cid), None)
    if match is None:
        match = next((k for k, (n, _) in enumerate(open_ids) if n == name), None)
    if match is not None:
        cid = open_ids.pop(match)[1]
    resp = fr.get("response")
    if isinstance(resp, dict) and len(resp) == 1 and isinstance(next(iter(resp.values())), str):
        text: str = next(iter(resp.values()))
    else:
        text = "" if resp is None else orjson.dumps(resp).decode()
    inner = fr.get("parts")
    if isinstance(inner, list):
        more = (part_text(p, f"{where}.parts[{k}]") for k, p in enumerate(inner))
        text = "\n\n".join(t for t in (text, *more) if t)
    return {"role": "tool", "tool_call_id": cid or call_id(name, None, 0), "content": text}


def part_text(p: Any, where: str) -> str:
    """A part's text in the chat form: a text part's text, a media part's placeholder by its
    MIME type, any other data its placeholder ("" for a part of metadata only)."""
    if not isinstance(p, dict):
        raise ShapeError(where, ("an object",), p)
    if "text" in p:
        text: str = need(p, "text", str, where)
        return text
    for key in ("inlineData", "fileData"):
        media = field(p, key)
        if media is not None:
            mime = field(media, "mimeType") if isinstance(media, dict) else None
            major = str(mime or "").split("/", 1)[0]
            return placeholder(major if major in _MEDIA else "document")
    other = next((k for k in p if k not in _META), None)
    return "" if other is None else placeholder(_snake(other))
