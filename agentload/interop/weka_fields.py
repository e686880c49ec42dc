"""Import: Weka, the fields of a conversation, of a request and of a sub-agent entry, read and
checked against the published schema (AIPerf's ``weka_trace_models``, the kv-cache-tester docs).

What departs from the schema without losing meaning (``"subagent_type": null``, an
``_analysis`` key, a field missing that has a default, a number as a string) is accepted and
counted in the ``At``'s ``content_free.Deviations``; what leaves a field without meaning is the
one-line error. ``weka`` builds the trace's records from what these return.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from agentload.interop.content_free import (
    MISSING,
    NULL,
    At,
    extra_keys,
    need_ids,
    need_int,
    need_str,
    need_time,
    need_tokens,
    opt_str,
    opt_time,
    time_s,
)

__all__ = [
    "SUBAGENT_ROLE",
    "Conversation",
    "Request",
    "Subagent",
    "read_conversation",
    "read_request",
    "read_scope",
    "read_subagent",
]

_SCOPES = ("local", "global")
SUBAGENT_ROLE = "subagent"
"""The role of a sub-agent whose ``subagent_type`` is null or absent (real files have it null)."""
_CONVERSATION_KEYS = frozenset(
    (
        "id",
        "models",
        "block_size",
        "hash_id_scope",
        "tool_tokens",
        "system_tokens",
        "requests",
        "totals",
    )
)
_CALL_KEYS = frozenset(
    (
        "t",
        "type",
        "model",
        "in",
        "out",
        "input_length",
        "output_length",
        "hash_ids",
        "input_types",
        "output_types",
        "stop",
        "api_time",
        "think_time",
        "ttft",
    )
)
_SUBAGENT_KEYS = frozenset(
    (
        "t",
        "type",
        "agent_id",
        "subagent_type",
        "duration_ms",
        "total_tokens",
        "tool_use_count",
        "status",
        "requests",
        "models",
        "tool_tokens",
        "system_tokens",
    )
)


class Conversation(NamedTuple):
    """A conversation's own fields (its id defaulted to the file's stem)."""

    cid: str
    models: list[str]
    tool_tokens: int
    system_tokens: int
    requests: list[Any]


class Request(NamedTuple):
    """An API call's fields (a request of type ``n`` or ``s``); times in seconds."""

    t: float
    n_in: int
    n_out: int
    hash_ids: list[int]
    model: str
    api: float | None
    think: float | None
    ttft: float | None
    stop: str | None
    input_types: tuple[str, ...] = ()


class Subagent(NamedTuple):
    """A ``subagent`` entry's fields (``typed``: whether it names its ``subagent_type``)."""

    spawn_s: float
    name: str
    kind: str
    typed: bool
    status: str
    duration_ms: int
    models: list[str]
    requests: list[Any]


def read_scope(conv: dict[str, Any], at: At) -> str:
    """``conv["hash_id_scope"]``: ``local`` (the default, counted when absent) or ``global``."""
    scope = need_str(conv, "hash_id_scope", at, default="local", nullable=False, required=True)
    if scope not in _SCOPES:
        at.fail("hash_id_scope", f"expected 'local' or 'global', got {scope!r}")
    return scope


def _models(d: dict[str, Any], at: At) -> list[str]:
    """``d["models"]``: a list of strings (empty when null or absent, counted: the schema
    requires it, the requests name their own models)."""
    models = d.get("models")
    if models is None:
        at.deviate("models", NULL if "models" in d else MISSING)
        return []
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        at.fail("models", "expected a list of strings")
    return models


def _requests(d: dict[str, Any], at: At, *, subagent: bool) -> list[Any]:
    """``d["requests"]``: a list. A conversation without requests means nothing (an error); a
    sub-agent's null or absent list is an agent without calls (counted)."""
    reqs = d.get("requests")
    if reqs is None and subagent:
        at.deviate("requests", NULL if "requests" in d else MISSING)
        return []
    if not isinstance(reqs, list):
        at.fail("requests", "missing (a list of requests)" if reqs is None else "expected a list")
    if not reqs and not subagent:
        at.fail("requests", "empty (a conversation without requests)")
    return reqs


def read_conversation(conv: dict[str, Any], at: At, block_size: int, scope: str) -> Conversation:
    """A conversation's fields, its ``block_size`` and ``hash_id_scope`` checked against those
    of the import's first conversation (``block_size``, ``scope``)."""
    extra_keys(conv, _CONVERSATION_KEYS, at)
    bs = need_tokens(conv, "block_size", at, lo=1)
    if bs != block_size:
        at.fail(
            "block_size",
            f"{bs}, but the first conversation's is {block_size} "
            "(import conversations of one block size together)",
        )
    own = read_scope(conv, at)
    if own != scope:
        at.fail("hash_id_scope", f"{own!r}, but the first conversation's is {scope!r}")
    # an id is a name: without one, the file's stem (repeats get #K, as any repeated id)
    cid = need_str(conv, "id", at, default="", nullable=False, required=True)
    return Conversation(
        cid=cid or Path(at.file).stem,
        models=_models(conv, at),
        tool_tokens=need_tokens(conv, "tool_tokens", at, default=0, nullable=False),
        system_tokens=need_tokens(conv, "system_tokens", at, default=0, nullable=False),
        requests=_requests(conv, at, subagent=False),
    )


def read_request(r: dict[str, Any], at: At, block_size: int, model: str) -> Request:
    """An API call's fields (``model``: the agent's, when the call names none)."""
    extra_keys(r, _CALL_KEYS, at)
    t = need_time(r, "t", at)
    # AIPerf's model reads "in"/"out" by their names "input_length"/"output_length" too
    n_in = need_tokens(r, "input_length" if "in" not in r and "input_length" in r else "in", at)
    n_out = need_tokens(
        r, "output_length" if "out" not in r and "output_length" in r else "out", at
    )
    ids = need_ids(r, "hash_ids", at, n_in, block_size, nullable=False)
    call_model = need_str(r, "model", at, default=model, nullable=False, required=True)
    api = opt_time(r, "api_time", at)
    think = opt_time(r, "think_time", at)
    ttft = opt_time(r, "ttft", at)
    stop = opt_str(r, "stop", at, nullable=False)
    for key in ("input_types", "output_types"):
        v = r.get(key)
        if v is None and key in r:
            at.deviate(key, NULL)
        elif v is not None and (not isinstance(v, list) or not all(isinstance(x, str) for x in v)):
            at.fail(key, "expected a list of strings")
    types = tuple(r.get("input_types") or ())
    return Request(t, n_in, n_out, ids, call_model, api, think, ttft, stop, types)


def read_subagent(r: dict[str, Any], at: At, index: int) -> Subagent:
    """A ``subagent`` entry's fields (``index``: its place in its parent's list, which names it
    when it has no ``agent_id``)."""
    extra_keys(r, _SUBAGENT_KEYS, at)
    spawn_s = need_time(r, "t", at)
    name = need_str(r, "agent_id", at, default="", nullable=False, required=True)
    kind = need_str(r, "subagent_type", at, default=SUBAGENT_ROLE, nullable=False, required=True)
    status = need_str(r, "status", at, default="completed", nullable=False, required=True)
    duration_ms = need_int(r, "duration_ms", at, default=-1)
    time_s(duration_ms, "duration_ms", at, unit_s=1e-3)
    return Subagent(
        spawn_s=spawn_s,
        name=name or f"subagent{index}",
        kind=kind,
        typed=r.get("subagent_type") is not None,
        status=status,
        duration_ms=duration_ms,
        models=_models(r, at),
        requests=_requests(r, at, subagent=True),
    )
