"""What a run of results.json was, beside its points: where it ran (``Environment``), the
engine preset as used, what was planned from the traces (cuts, truncated traces, APIs), what a
live run ran, and the cluster of a sharded run."""

from __future__ import annotations

import os
import platform
import sys
import time
from typing import Literal

from pydantic import Field

from agentload import __version__
from agentload.measure.aggregates import ResultsModel

__all__ = [
    "ClusterRun",
    "CutSessionInfo",
    "EngineInfo",
    "Environment",
    "LiveInfo",
    "LivePoint",
    "PlanInfo",
    "TruncatedTrace",
]


class Environment(ResultsModel):
    """Where the replay ran."""

    agentload: str = Field(description="agentload version")
    python: str = Field(description="Python version")
    platform: str = Field(description="platform string")
    cpu_count: int | None = Field(description="logical CPUs")
    started_unix_ns: int = Field(description="wall-clock start of the run")

    @classmethod
    def here(cls) -> Environment:
        """This process's environment, started now."""
        return cls(
            agentload=__version__,
            python=sys.version.split()[0],
            platform=platform.platform(),
            cpu_count=os.cpu_count(),
            started_unix_ns=time.time_ns(),
        )


class EngineInfo(ResultsModel):
    """The engine preset as used (after --no-extras)."""

    name: str = Field(description="preset name")
    ignore_eos: bool = Field(description="ignore_eos was sent")
    min_tokens: bool = Field(description="min_tokens was sent")
    include_usage: bool = Field(description="stream_options.include_usage was sent")


class TruncatedTrace(ResultsModel):
    """A trace that ends early (a killed run)."""

    file: str = Field(description="the trace file")
    detail: str = Field(description="where and how it ends")


class CutSessionInfo(ResultsModel):
    """A session ``--fit cut-session`` shortened to fit ``--max-context``."""

    session: str = Field(description="key of the recorded session")
    kept_calls: int = Field(description="calls replayed")
    dropped_calls: int = Field(description="calls cut: above --max-context, or depending on one")


class PlanInfo(ResultsModel):
    """What was planned from the traces."""

    sessions: int = Field(description="recorded sessions replayed (cut ones included)")
    calls: int = Field(description="recorded calls in them (after cuts)")
    max_context: int | None = Field(description="--max-context")
    fit: str = Field(default="drop-session", description="--fit: cut-session or drop-session")
    excluded_sessions: list[str] = Field(description="sessions --max-context left out whole")
    cut_sessions: list[CutSessionInfo] = Field(
        default_factory=list, description="sessions --fit cut-session shortened"
    )
    dropped_calls: int = Field(
        default=0, description="calls the cuts removed (sessions left out whole not counted)"
    )
    truncated_traces: list[TruncatedTrace] = Field(description="traces that end early")
    gaps: str = Field(
        default="measured",
        description="--gaps: the recorded waits on the modeled timeline (measured + the "
        "traces' modeled waits) or the measured one; 'measured' in files before it existed",
    )
    modeled_waits: str | None = Field(
        default=None,
        description="the modeled waits the run played (their model and source: a trace's "
        "header.waits), None when it played none",
    )
    apis: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="recorded API -> {API it was sent in: calls}: a call recorded in OpenAI "
        "Responses or Anthropic Messages (agentload record) is sent in that API when the target "
        "answers it (--api auto), else as its Chat Completions translation ('chat')",
    )

    def api_line(self) -> str | None:
        """Which recorded calls were sent translated, or natively in Responses or Messages
        (None when every call was a Chat Completions call)."""
        said = [
            f"{n} {api} call(s) sent as {sent}" if sent != api else f"{n} sent in {api}"
            for api, to in sorted(self.apis.items())
            for sent, n in sorted(to.items())
            if api != "chat"
        ]
        return "recorded APIs: " + ", ".join(said) if said else None

    def fit_line(self) -> str | None:
        """What ``--max-context`` did, in one line (None without it, or when nothing moved)."""
        if self.max_context is None or not (self.cut_sessions or self.excluded_sessions):
            return None
        parts = []
        if self.cut_sessions:
            parts.append(
                f"{len(self.cut_sessions)} session(s) cut ({self.dropped_calls} calls dropped)"
            )
        if self.excluded_sessions:
            parts.append(f"left out {len(self.excluded_sessions)} session(s)")
        return f"--max-context {self.max_context} (--fit {self.fit}): {', '.join(parts)}"


class LivePoint(ResultsModel):
    """One point of a live run: its own generate run of the sessions."""

    trace: str = Field(description="the trace the point recorded")
    parallel: int = Field(description="sessions running at once (--parallel or --sweep level)")
    end_reasons: dict[str, int] = Field(description="sessions by end reason")


class LiveInfo(ResultsModel):
    """What a live run (``mode: live``) ran: the scenario and how its agents were run."""

    command: Literal["generate", "eval"] = Field(description="generate, or eval (checked)")
    scenario: str = Field(description="scenario name")
    scenario_hash: str | None = Field(description="content hash of the resolved scenario")
    sandbox: str = Field(description="where the tools ran: docker or local")
    retries: int = Field(description="retries of a failed call (--retries)")
    points: list[LivePoint] = Field(description="one per point, in order")


class ClusterRun(ResultsModel):
    """Where a sharded run (``replay --ray``) ran and how its clocks were aligned."""

    address: str = Field(description="the --ray address (local, auto, HOST:PORT)")
    nodes: int = Field(description="alive nodes of the cluster")
    cpus: int = Field(description="CPUs of the cluster")
    workers: int = Field(description="replay workers (Ray actors, each with its own event loop)")
    residual_skew_ns: int = Field(
        description="the largest clock-offset uncertainty of any worker: times of different "
        "workers on the merged time line may be off by up to this much"
    )
    merge: str = Field(
        default="exact: every worker's request records on the driver's time line; every metric "
        "computed once over their union",
        description="how the workers' results were merged",
    )
