"""Engine presets: which request extras each target's OpenAI-compatible frontend accepts.

A preset decides the body fields replay adds on top of the recorded request: ``ignore_eos``
and ``min_tokens`` (to pin the output length; ``max_tokens`` is always sent), ``stream_options.
include_usage`` (usage in the stream), and where a session id goes for session-aware (KV-aware)
routing. ``--no-extras`` turns ``ignore_eos``/``min_tokens`` off for servers that reject unknown
fields. Each preset was checked against its engine's source and documentation; the table, with
the server flags that make cached tokens and ``/metrics`` available, and the sources, is
docs/engines.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agentload.errors import ConfigError

__all__ = ["ENGINES", "EnginePreset", "agent_session_id", "get_engine", "session_headers"]


@dataclass(frozen=True)
class EnginePreset:
    """The extras one engine's OpenAI frontend accepts."""

    name: str
    ignore_eos: bool
    """Send ``ignore_eos: true`` so the server generates exactly ``max_tokens`` tokens."""
    min_tokens: bool
    """Send ``min_tokens = max_tokens`` as well (belt and braces where accepted)."""
    include_usage: bool = True
    """Ask for a final usage chunk with ``stream_options.include_usage``."""
    cached_tokens_flag: str = ""
    """The server flag that makes it report ``prompt_tokens_details.cached_tokens`` ("" when
    it reports them without one, or when that depends on the backend)."""
    metrics_flag: str = ""
    """The server flag that turns its Prometheus ``/metrics`` on ("" when always on)."""
    session_header: str | None = None
    """Default header carrying the session id (``--session-header`` overrides)."""
    session_field: str | None = None
    """Default body field carrying the session id (``--session-field`` overrides)."""
    parent_header: str | None = None
    """Header carrying the parent agent's session id. With it, each agent of a session
    instance is a session of its own (``INSTANCE`` for the root agent, ``INSTANCE/AGENT`` for
    a sub-agent) under its parent's, as Dynamo's routing and tracing read them; without it,
    every agent of an instance shares the instance's id."""
    nvext: bool = False
    """Send Dynamo's request extension: ``nvext.agent_hints.osl`` (the pinned output length)
    and ``nvext.extra_fields`` asking for the serving worker and the server's timing, read
    back into each request's record."""

    def without_extras(self) -> EnginePreset:
        """The same preset with the body extras (``ignore_eos``, ``min_tokens``, ``nvext``)
        off."""
        return replace(self, ignore_eos=False, min_tokens=False, nvext=False)


ENGINES: dict[str, EnginePreset] = {
    "vllm": EnginePreset(
        "vllm",
        ignore_eos=True,
        min_tokens=True,
        cached_tokens_flag="--enable-prompt-tokens-details",
    ),
    "sglang": EnginePreset(
        "sglang",
        ignore_eos=True,
        min_tokens=True,
        cached_tokens_flag="--enable-cache-report",
        metrics_flag="--enable-metrics",
    ),
    "trtllm": EnginePreset("trtllm", ignore_eos=True, min_tokens=True),
    # Dynamo reads ignore_eos and min_tokens at the top level (CommonExt); nvext.ignore_eos
    # is deprecated there, and the top-level value wins when both are given.
    # Its session headers (1.6.1) are passive unless the router's session affinity is set up;
    # unknown nvext fields are a 400 there, so only the ones it documents are sent.
    "dynamo": EnginePreset(
        "dynamo",
        ignore_eos=True,
        min_tokens=True,
        session_header="X-Dynamo-Session-ID",
        parent_header="X-Dynamo-Parent-Session-ID",
        nvext=True,
    ),
    # llama.cpp: max_tokens is an alias of its n_predict, ignore_eos biases every end-of-
    # generation token away; it has no min_tokens. Cached tokens come without a flag
    # (cache_prompt defaults to true); /metrics needs --metrics.
    "llamacpp": EnginePreset(
        "llamacpp", ignore_eos=True, min_tokens=False, metrics_flag="--metrics"
    ),
    "openai": EnginePreset("openai", ignore_eos=False, min_tokens=False),
}


def get_engine(name: str) -> EnginePreset:
    """The preset called ``name``; an unknown name lists the valid ones."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ConfigError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINES)}") from None


def agent_session_id(session: str, agent: str | None) -> str:
    """The session id of an agent of ``session``: ``session`` itself for its root agent
    (``agent`` None or ""), ``SESSION/AGENT`` for a sub-agent."""
    return f"{session}/{agent}" if agent else session


def session_headers(
    header: str | None, parent_header: str | None, session: str, agent: str, parent: str | None
) -> dict[str, str] | None:
    """The session headers of a call by ``agent`` (its session id, ``agent_session_id``) of
    ``session``, whose parent's session id is ``parent`` (None for the root agent): none
    without a ``header``; the session's id without a ``parent_header``; else, as Dynamo reads
    them, the agent's own id and its parent's."""
    if not header:
        return None
    if parent_header is None:
        return {header: session}
    out = {header: agent}
    if parent is not None:
        out[parent_header] = parent
    return out
