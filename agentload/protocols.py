"""The protocols of agentload, in one place. Implementations satisfy them without inheriting.

* ``Tokenizer``  — text → token ids (agentload.tokenizer)
* ``Sandbox``    — where tools execute: docker, local (agentload.sandboxes)
* ``Tool``       — one tool an agent calls (``agentload.contract.ToolSpec``; run by
  ``agentload.tools.Toolbox``)
* ``TraceSink``  — where a session's records go (``agentload.trace.TraceWriter``; the agents'
  ``SessionRecorder`` writes to any sink)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentload.tokenizer import Tokenizer

__all__ = ["ExecResult", "Sandbox", "Tokenizer", "Tool", "TraceSink"]


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one command run in a sandbox."""

    exit_code: int | None
    output: bytes
    timed_out: bool
    start_ns: int
    end_ns: int
    dropped_bytes: int = 0
    """Output bytes the sandbox did not keep (beyond its capture cap; the middle is dropped)."""
    over_limit: str | None = None
    """Why the sandbox stopped the command and the session should end (``"workspace over its
    disk quota (2.0 GiB)"``); None: no such limit was passed."""


@runtime_checkable
class Sandbox(Protocol):
    """An isolated place to run commands over a session's workspace."""

    id: str
    kind: str
    workdir: str
    home: str
    """The commands' private ``HOME``, as they see it."""

    def exec(
        self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None
    ) -> ExecResult: ...

    def close(self) -> None: ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class Tool(Protocol):
    """One tool: its OpenAI schema and how to run it."""

    name: str

    def schema(self) -> dict[str, Any]: ...


@runtime_checkable
class TraceSink(Protocol):
    """Accepts trace records."""

    async def write(self, record: Any) -> None: ...

    async def flush(self) -> None: ...
