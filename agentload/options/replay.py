"""The configuration of one replay run (stored in results.json as ``config``), and every check
of its values.

``ReplayConfig`` is what the ``agentload replay`` options become: the groups every command
shares (``EndpointOptions``, ``LoadOptions``, ``MeasureOptions``) and replay's own options,
each field declaring its option (``options.flags``). Its validators are the one place an option
value is checked: ranges, choices, text forms (``--sweep 1,2,4``, ``--slo ttft=2s,tpot=50ms``)
and the options that exclude each other. A bad value raises pydantic's ``ValidationError`` with
the field as its location; ``flags.validated`` turns that into one line naming the option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from agentload.options.capacity import CapacityOptions, SearchMethod
from agentload.options.cluster import ClusterOptions
from agentload.options.endpoint import EndpointOptions
from agentload.options.flags import Flag
from agentload.options.load import LoadOptions
from agentload.options.modes import FIT_MODES, FitMode
from agentload.options.values import (
    MAX_CONTEXT,
    bad_value,
    endpoint_problem,
    one_of,
)
from agentload.tokenizer import is_tokenizer_name

__all__ = ["ReplayConfig"]


class ReplayConfig(ClusterOptions, CapacityOptions, LoadOptions, EndpointOptions):
    """Everything that decides what a replay sends and measures (never the API key)."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["replay"] = Field(
        default="replay",
        description="replay: recorded traffic, identical for every target (a file before 1.3 "
        "has no source; a live run's config of then is a replay config)",
    )
    traces: Annotated[
        list[str], Flag("Trace files (.agentload.jsonl[.zst]).", argument=True, reads=list[Path])
    ]
    scrape_metrics: Annotated[
        str | None, Flag("Prometheus /metrics URL, or several comma-separated, scraped at 1 Hz.")
    ] = None
    max_error_rate: Annotated[float, Flag("Exit 3 when a larger share of the requests failed.")] = (
        Field(default=0.5, ge=0, le=1, allow_inf_nan=False)
    )
    tokenizer: Annotated[
        str | None,
        Flag(
            "Tokenizer of prompts synthesized for content-free traces: o200k_base "
            "(default), cl100k_base, hf:PATH/tokenizer.json."
        ),
    ] = None
    max_context: Annotated[
        int | None,
        Flag("Fit the traces to N tokens per call (prompt + output); see --fit."),
    ] = Field(default=None, ge=1, le=MAX_CONTEXT)
    fit: Annotated[
        FitMode,
        Flag(
            "cut-session: keep each session up to its first call above --max-context; "
            "drop-session: leave such sessions out."
        ),
    ] = "cut-session"
    repeat: Annotated[
        int, Flag("Run every point N times: means with 95% intervals (compare tests them).")
    ] = Field(default=1, ge=1, le=100)
    capacity_search: Annotated[
        SearchMethod | None,
        Flag(
            "How --capacity probes: ramp (one run: a quick ramp brackets the answer, then full "
            "probes confirm it; the default) or probes (each probe its own point from cold; "
            "the default with --ray or --repeat)."
        ),
    ] = None
    capacity_min_window_s: Annotated[
        float,
        Flag(
            "Measure every full capacity probe at least this many seconds before the "
            "sequential test may end it (long windows: slow drifts show).",
            name="--capacity-min-window",
        ),
    ] = Field(default=5.0, gt=0, le=86400, allow_inf_nan=False)

    @model_validator(mode="after")
    def _capacity_load(self) -> ReplayConfig:
        if not self.capacity:
            return self
        clash = [
            opt
            for opt, on in (
                ("--concurrency/--sweep", self.levels != [1]),
                ("--arrival-rate", self.arrival_rate is not None),
                ("--schedule recorded", self.schedule == "recorded"),
                ("--sessions", self.sessions is not None),
            )
            if on
        ]
        if clash:
            raise bad_value(
                f"--capacity chooses the concurrency of each probe itself; it cannot be "
                f"combined with {', '.join(clash)}"
            )
        if self.duration_s is not None and self.capacity_min_window_s > self.duration_s:
            raise bad_value(
                f"--capacity-min-window {self.capacity_min_window_s:g} is longer than the "
                f"probe's cap, --duration {self.duration_s:g}"
            )
        if self.capacity_search == "ramp" and (self.ray is not None or self.repeat > 1):
            raise bad_value(
                "--capacity-search ramp moves the lanes of one run on this machine; with "
                "--ray or --repeat the probes are points of their own: --capacity-search probes"
            )
        return self

    @property
    def search_method(self) -> SearchMethod:
        """How the capacity search runs: as given, else ramp unless --ray or --repeat."""
        if self.capacity_search is not None:
            return self.capacity_search
        return "probes" if self.ray is not None or self.repeat > 1 else "ramp"

    @field_validator("traces", mode="before")
    @classmethod
    def _trace_paths(cls, v: Any) -> Any:
        return [str(t) for t in v] if isinstance(v, list | tuple) else v

    @field_validator("fit", mode="before")
    @classmethod
    def _fit_word(cls, v: Any) -> Any:
        return one_of(v, FIT_MODES)

    @field_validator("scrape_metrics")
    @classmethod
    def _scrape_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        urls = [u.strip() for u in v.split(",")]
        for u in urls:
            if not u.lower().startswith(("http://", "https://")):
                raise bad_value("not an http(s):// URL (the server's Prometheus /metrics)")
            problem = endpoint_problem(u)
            if problem is not None:
                raise bad_value(problem)
        return ",".join(urls)

    @property
    def scrape_targets(self) -> list[str]:
        """The ``--scrape-metrics`` URLs (none without it)."""
        return self.scrape_metrics.split(",") if self.scrape_metrics else []

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_name(cls, v: str | None) -> str | None:
        if v is not None and not is_tokenizer_name(v):
            raise bad_value("choose o200k_base, cl100k_base or hf:PATH/tokenizer.json")
        return v

    @model_validator(mode="after")
    def _cluster(self) -> ReplayConfig:
        if self.ray is not None and self.power is not None:
            raise bad_value(
                "--power nvml measures this machine's GPUs; with --ray give --power-watts"
            )
        return self
