"""Engine presets: which request extras each target's OpenAI-compatible frontend accepts.

A preset decides the body fields replay adds on top of the recorded request: ``ignore_eos``
and ``min_tokens`` (to pin the output length), ``stream_options.include_usage`` (usage in the
stream), and where a session id goes for session-aware (KV-aware) routing. ``--no-extras``
turns ``ignore_eos``/``min_tokens`` off for servers that reject unknown fields. The per-engine
table, with the server flags that turn cached-token reporting on, is in docs/replay.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agentload.errors import ConfigError

__all__ = ["ENGINES", "EnginePreset", "get_engine"]


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
    """The server flag that makes it report ``prompt_tokens_details.cached_tokens``."""
    session_header: str | None = None
    """Default header carrying the session id (``--session-header`` overrides)."""
    session_field: str | None = None
    """Default body field carrying the session id (``--session-field`` overrides)."""
    nvext: bool = False
    """Put ``ignore_eos`` inside Dynamo's ``nvext`` object instead of at the top level."""

    def without_extras(self) -> EnginePreset:
        """The same preset with ``ignore_eos``/``min_tokens`` off."""
        return replace(self, ignore_eos=False, min_tokens=False)


ENGINES: dict[str, EnginePreset] = {
    "vllm": EnginePreset(
        "vllm",
        ignore_eos=True,
        min_tokens=True,
        cached_tokens_flag="--enable-prompt-tokens-details",
    ),
    "sglang": EnginePreset(
        "sglang", ignore_eos=True, min_tokens=True, cached_tokens_flag="--enable-cache-report"
    ),
    "trtllm": EnginePreset("trtllm", ignore_eos=True, min_tokens=True, cached_tokens_flag=""),
    "dynamo": EnginePreset("dynamo", ignore_eos=True, min_tokens=True, nvext=True),
    "openai": EnginePreset("openai", ignore_eos=False, min_tokens=False),
}


def get_engine(name: str) -> EnginePreset:
    """The preset called ``name``; an unknown name lists the valid ones."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ConfigError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINES)}") from None
