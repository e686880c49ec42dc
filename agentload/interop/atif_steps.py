"""The parts of an ATIF step read as chat: its checks and source, its text, its tool calls, its
observation's results and its metrics as usage; and what a trajectory refers to (see ``atif``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from agentload.interop.content_free import (
    MISSING,
    NULL,
    At,
    extra_keys,
    need_int,
    need_tokens,
    show,
)
from agentload.interop.exchanges import chat_usage

__all__ = [
    "called",
    "check_step",
    "refs",
    "step_results",
    "step_text",
    "step_usage",
    "tool_calls",
]

_STEP_KEYS = frozenset(
    {
        "step_id",
        "timestamp",
        "source",
        "model_name",
        "reasoning_effort",
        "message",
        "reasoning_content",
        "tool_calls",
        "observation",
        "metrics",
        "extra",
        "is_copied_context",
    }
)
_SOURCES = ("system", "user", "agent")


def check_step(step: Any, i: int, at: At) -> str:
    """Step ``i``'s source (``system``, ``user`` or ``agent``), once it is checked: an object,
    its ``step_id`` (the keys ATIF does not name counted)."""
    if not isinstance(step, dict):
        at.fail("step", f"expected an object, got {show(step)}")
    need_int(step, "step_id", at, default=i + 1, required=True)
    extra_keys(step, _STEP_KEYS, at)
    source = step.get("source")
    if source not in _SOURCES:
        at.fail("source", f"expected system, user or agent, got {show(source)}")
    return str(source)


def called(steps: list[Any]) -> list[str]:
    """The function names a trajectory's agent steps call, in order of first use."""
    names: list[str] = []
    for s in steps:
        if not isinstance(s, dict) or not isinstance(s.get("tool_calls"), list):
            continue
        for tc in s["tool_calls"]:
            name = tc.get("function_name") if isinstance(tc, dict) else None
            if isinstance(name, str) and name and name not in names:
                names.append(name)
    return names


def step_text(d: dict[str, Any], key: str, at: At, *, required: bool) -> str:
    """``d[key]`` as message text: a string, or the text parts of a list of content parts
    (other parts dropped, counted); ``""`` when absent or null (counted when ``required``)."""
    v = d.get(key)
    if v is None:
        if required:
            at.deviate(key, NULL if key in d else MISSING)
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        parts: list[str] = []
        for p in v:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            else:
                at.deviate(f"{key}[]", "not a text part, dropped")
        return "".join(parts)
    at.fail(key, f"expected text, got {show(v)}")


def _listed(d: dict[str, Any], key: str, at: At, fld: str) -> list[Any]:
    """``d[key]``, a list (none when absent or null; anything else an error at ``fld``)."""
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        at.fail(fld, f"expected a list, got {show(v)}")
    return v


def tool_calls(step: dict[str, Any], at: At) -> list[dict[str, Any]]:
    """An agent step's tool calls in OpenAI's shape (``arguments`` a JSON string)."""
    calls = _listed(step, "tool_calls", at, "tool_calls")
    sid = step.get("step_id")
    out: list[dict[str, Any]] = []
    for j, tc in enumerate(calls):
        if not isinstance(tc, dict):
            at.fail(f"tool_calls[{j}]", f"expected a tool call (an object), got {show(tc)}")
        name = tc.get("function_name")
        if not isinstance(name, str) or not name:
            at.fail(f"tool_calls[{j}].function_name", "missing (a tool call names its function)")
        cid = tc.get("tool_call_id")
        if not isinstance(cid, str) or not cid:
            at.deviate(f"tool_calls[{j}].tool_call_id", MISSING if cid is None else "not a string")
            cid = f"call_{sid}_{j}"
        args = tc.get("arguments")
        if args is None:
            at.deviate(f"tool_calls[{j}].arguments", NULL if "arguments" in tc else MISSING)
            text = "{}"
        elif isinstance(args, str):
            at.deviate(f"tool_calls[{j}].arguments", "a JSON string, not an object")
            text = args
        else:
            text = json.dumps(args, ensure_ascii=False)
        out.append({"id": cid, "type": "function", "function": {"name": name, "arguments": text}})
    return out


def step_results(step: dict[str, Any], at: At) -> list[dict[str, Any]]:
    """A step's ``observation.results`` (none when it has no observation)."""
    obs = step.get("observation")
    if obs is None:
        return []
    if not isinstance(obs, dict):
        at.fail("observation", f"expected an object, got {show(obs)}")
    results = _listed(obs, "results", at, "observation.results")
    for j, r in enumerate(results):
        if not isinstance(r, dict):
            at.fail(f"observation.results[{j}]", f"expected an object, got {show(r)}")
    return results


def step_usage(metrics: Any, at: At) -> dict[str, Any] | None:
    """A step's ``metrics`` as chat usage (``prompt_tokens`` includes the cached ones)."""
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        at.fail("metrics", f"expected an object, got {show(metrics)}")
    mat = at.sub("metrics")

    def count(d: dict[str, Any], key: str) -> int | None:
        return None if d.get(key) is None else need_tokens(d, key, mat)

    u = chat_usage(
        count(metrics, "prompt_tokens"),
        count(metrics, "completion_tokens"),
        count(metrics, "cached_tokens"),
    )
    if u is None:
        return None
    extra = metrics.get("extra")
    if isinstance(extra, dict):
        created = count(extra, "cache_creation_input_tokens")
        if created is not None:
            u["cache_creation_tokens"] = created
    return u


def refs(obj: dict[str, Any]) -> Iterator[Any]:
    """Every trajectory reference of a trajectory object (its results', its continuation)."""
    steps = obj.get("steps")
    for s in steps if isinstance(steps, list) else ():
        obs = s.get("observation") if isinstance(s, dict) else None
        results = obs.get("results") if isinstance(obs, dict) else None
        for r in results if isinstance(results, list) else ():
            found = r.get("subagent_trajectory_ref") if isinstance(r, dict) else None
            if isinstance(found, dict):
                found = [found]
            yield from found if isinstance(found, list) else ()
    cont = obj.get("continued_trajectory_ref")
    if isinstance(cont, str):
        yield {"trajectory_path": cont}
    elif isinstance(cont, dict):
        yield cont
