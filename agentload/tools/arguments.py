"""What a model sent as a tool call's arguments: parsed, checked to be a JSON object, repaired.

    args = read_arguments(raw)
    args.value    # the dict a tool gets; None when the call is malformed
    args.sent     # the JSON text the history carries onward: always a JSON object
    args.problem  # why the call is malformed, in words the model can act on (None: it is not)

A reply cut at ``max_tokens``, or a small model that writes JSON badly, leaves arguments that
are not valid JSON, JSON that is not an object, or nothing. A malformed call never runs (its
tool result is the problem, so the model can send it again), and the history sent onward stays
valid: servers such as llama.cpp parse every tool call in the history and answer every later
request with HTTP 500 when one is not JSON. So ``sent`` is the model's own text when it is a
JSON object; else the arguments repaired, when a simple repair makes a JSON object of them
(a code fence removed, text after the object dropped, an unterminated string, array or object
closed, a trailing comma or a cut-off last member dropped); else ``{}``. Empty arguments are
no arguments: ``{}``, not malformed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Arguments", "read_arguments", "repair_json_object"]


@dataclass(frozen=True)
class Arguments:
    """A tool call's arguments as read (see the module docstring)."""

    value: dict[str, Any] | None
    sent: str
    problem: str | None = None


def read_arguments(raw: str) -> Arguments:
    """The arguments of one tool call, from the model's JSON text."""
    if not raw.strip():
        return Arguments({}, "{}")
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        problem = f"the arguments are not valid JSON ({exc.msg}, character {exc.pos})"
    except (ValueError, RecursionError) as exc:  # a 5000-digit number, nesting 100000 deep
        problem = f"the arguments are not usable JSON ({str(exc)[:200]})"
    else:
        if isinstance(parsed, dict):
            return Arguments(parsed, raw)
        problem = f"the arguments must be a JSON object, not {_kind(parsed)}"
    repaired = repair_json_object(raw)
    sent = json.dumps(repaired, ensure_ascii=False) if repaired is not None else "{}"
    return Arguments(None, sent, problem)


def repair_json_object(raw: str) -> dict[str, Any] | None:
    """The JSON object a simple repair makes of ``raw`` (see the module docstring), or None."""
    text = raw.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    start = text.find("{")
    if start < 0:
        return None
    text = text[start:]
    for candidate in _candidates(text):
        try:
            value, _ = json.JSONDecoder().raw_decode(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def _candidates(text: str) -> list[str]:
    """``text`` as is, closed, and closed after its last complete member."""
    out = [text]
    closed, commas = _close(text)
    if closed is not None:
        out.append(closed)
    for cut in reversed(commas[-3:]):  # drop a cut-off last member (or two)
        shorter, _ = _close(text[:cut])
        if shorter is not None:
            out.append(shorter)
    return out


def _close(text: str) -> tuple[str | None, list[int]]:
    """``text`` with its open string, arrays and objects closed (None when its brackets do not
    match), and the positions of its commas outside strings."""
    stack: list[str] = []
    commas: list[int] = []
    in_str = esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None, commas
            if not stack:
                return text[: i + 1], commas
        elif ch == ",":
            commas.append(i)
    out = text
    if in_str:
        out = (out[:-1] if esc else out) + '"'
    out = out.rstrip()
    if out.endswith(","):
        out = out[:-1]
    elif out.endswith(":"):
        out += " null"
    return out + "".join(reversed(stack)), commas


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
