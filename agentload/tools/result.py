"""What a tool call returns: the text the model sees plus the facts the recorder keeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolError", "ToolResult"]


class ToolError(Exception):
    """A tool call that cannot be carried out (bad arguments, missing file, bad regex ...).

    Never escapes ``Toolbox.call``: it becomes an ``error: ...`` text the model reads.
    """

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass(frozen=True)
class ToolResult:
    """One tool execution. Times are ``time.perf_counter_ns`` values."""

    text: str
    """What goes back to the model as the tool message (already truncated)."""
    start_ns: int
    end_ns: int
    exit_code: int | None = None
    """The command's exit code for tools that run one in the sandbox (run_tests, search_code)."""
    output_bytes: int = 0
    """UTF-8 bytes of the full output before truncation (run_tests: after normalisation, so the
    same in every sandbox and session)."""
    output_tokens: int | None = None
    """Tokens of ``text``; left to the caller, which owns the tokenizer."""
    truncated: bool = False
    """The output was cut (head and tail kept) to the scenario's tool_output_max_chars."""
    timed_out: bool = False
    error: str | None = None
    """Why the call failed (the same message the model sees), or None."""
    sandbox_id: str | None = None
    """The sandbox that ran the command; None for tools served from the workspace on the host."""

    @property
    def duration_ns(self) -> int:
        """``end_ns - start_ns``."""
        return self.end_ns - self.start_ns

    def facts(self) -> dict[str, Any]:
        """The fields of a trace ``tool_call`` record that this result fills."""
        return {
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "output_bytes": self.output_bytes,
            "output_tokens": self.output_tokens,
            "truncated": self.truncated,
            "sandbox_id": self.sandbox_id,
        }
