"""How ``agentload replay`` ends: its exit code, decided in one place.

======  ======================================================================================
code    when
======  ======================================================================================
0       the run completed and at most ``--max-error-rate`` of its requests failed
2       bad input (an option, a trace, ``--out``) or an endpoint that is unreachable, refuses
        the key or lacks the model, before any load; an ``AgentloadError`` (``agentload.cli``)
3       the run completed and more than ``--max-error-rate`` of its requests failed; the
        results are written in full and the summary's last line says so
130     interrupted (Ctrl-C); the results cover what ran
======  ======================================================================================

The failed share counts every request the run sent, at every point and in every phase
(warm-up included): a request failed when it has an error kind (``http_<status>``,
``timeout``, ``connect``, ``reset`` ...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import IntEnum

from agentload.measure.results import ResultsDocument
from agentload.options.replay import ReplayConfig

__all__ = ["ExitCode", "Verdict", "verdict"]


class ExitCode(IntEnum):
    """The exit codes of ``agentload replay`` (the table above)."""

    OK = 0
    BAD_INPUT = 2
    TOO_MANY_ERRORS = 3
    INTERRUPTED = 130


@dataclass(frozen=True)
class Verdict:
    """The exit code of a finished run, and the line that explains it (None for 0)."""

    code: ExitCode
    line: str | None = None


def verdict(results: ResultsDocument) -> Verdict:
    """The run's exit code: 130 when interrupted, 3 when the failed share of its requests is
    above ``config.max_error_rate`` (a replay's; a live run has none), else 0."""
    if results.interrupted:
        return Verdict(
            ExitCode.INTERRUPTED, "interrupted: the results cover what ran before the interruption"
        )
    kinds = Counter(r.error_kind for p in results.points for r in p.requests if not r.ok)
    sent = sum(len(p.requests) for p in results.points)
    failed = sum(kinds.values())
    cfg = results.config
    limit = cfg.max_error_rate if isinstance(cfg, ReplayConfig) else 1.0  # live: no limit
    if sent == 0 or failed / sent <= limit:
        return Verdict(ExitCode.OK)
    causes = ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())
    return Verdict(
        ExitCode.TOO_MANY_ERRORS,
        f"exit code {int(ExitCode.TOO_MANY_ERRORS)}: {failed} of {sent} requests failed "
        f"({failed / sent:.1%}, above --max-error-rate {limit:g}): {causes}",
    )
