"""results.json: the typed, versioned document of one replay run; write, read.

``ResultsDocument`` is the one model of results.json: ``run`` builds it, ``report``,
``compare`` and the CSV writer read it. Its ``schema`` is ``agentload.replay-results/MAJOR``
(the trace schema's convention, ``trace/schema.py``): a reader refuses another major
version; a newer minor version may add fields, which are kept. ``load_results`` turns a file
that is not JSON, not a results file, of another major version or missing a field into one
``ResultsFormatError`` line naming the file (and the field).

The same document describes a live benchmark (``agentload generate``/``eval``, ``mode:
live``): there the agents ran against the target itself, so each system received the traffic
its own outputs caused; ``live`` says what ran. A file without ``mode`` is a replay.

Its parts live beside it and are re-exported here: the metric values (``aggregates``), a load
point (``points``) and what the run was (``runinfo``: environment, engine, plan, live, cluster).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agentload.errors import ResultsFormatError
from agentload.infile import read_document
from agentload.measure.aggregates import (
    Aggregates,
    Distribution,
    GroupAggregates,
    KVBucket,
    KVHits,
    Phases,
    ResultsModel,
)
from agentload.measure.capacity import Capacity
from agentload.measure.points import (
    Point,
    ScrapeSample,
    ScrapeSummary,
    Span,
    TimelineSample,
    WorkerPoint,
)
from agentload.measure.repeats import RepeatGroup
from agentload.measure.runinfo import (
    ClusterRun,
    CutSessionInfo,
    EngineInfo,
    Environment,
    LiveInfo,
    LivePoint,
    PlanInfo,
    TruncatedTrace,
)
from agentload.options.live import LiveConfig
from agentload.options.modes import SaltAt
from agentload.options.replay import ReplayConfig
from agentload.outfile import output_dir, write_document
from agentload.trace.reader import format_validation_error

__all__ = [
    "LIVE_NOTE",
    "SCHEMA",
    "SCHEMA_MAJOR",
    "Aggregates",
    "ClusterRun",
    "CutSessionInfo",
    "Distribution",
    "EngineInfo",
    "Environment",
    "GroupAggregates",
    "KVBucket",
    "KVHits",
    "LiveInfo",
    "LivePoint",
    "Phases",
    "PlanInfo",
    "Point",
    "ResultsDocument",
    "RunConfig",
    "ScrapeSample",
    "ScrapeSummary",
    "Span",
    "TimelineSample",
    "TruncatedTrace",
    "WorkerPoint",
    "load_results",
    "prepare_out_dir",
    "simulated_note",
    "waits_note",
    "write_results",
]

SCHEMA_MAJOR = 1
SCHEMA_MINOR = 4
SCHEMA = f"agentload.replay-results/{SCHEMA_MAJOR}.{SCHEMA_MINOR}"
"""1.1 added plan.gaps and plan.modeled_waits; 1.2 the serving worker and timing of each
request and the pools, workers and router hit rate they make; 1.3 config.source, and a live
run's config of its own (``LiveConfig``) where it was a replay config with invented values;
1.4 capacity.search and capacity.elapsed_s (the search in one run, ``--capacity-search``),
probes[].ramp and the stop ``enough`` (a 1.x reader reads any 1.y file)."""


def _config_source(v: Any) -> str:
    """Which config a document holds: its ``source``; a config without one (before 1.3) is a
    replay config, a live run's of then too."""
    source = v.get("source") if isinstance(v, dict) else getattr(v, "source", None)
    return source if source in ("replay", "live") else "replay"


RunConfig = Annotated[
    Annotated[ReplayConfig, Tag("replay")] | Annotated[LiveConfig, Tag("live")],
    Discriminator(_config_source),
]
"""The options of the run: a replay's or a live run's."""
_PREFIX = "agentload.replay-results/"
LIVE_NOTE = (
    "LIVE benchmark: real agents ran against the target, so its own outputs decided every "
    "next request; traffic differs between systems (agentload replay sends identical traffic)."
)
"""The sentence the report and the terminal summary open a live run with."""


def simulated_note(doc: ResultsDocument) -> str | None:
    """The sentence a run's summary and report carry (after ``LIVE_NOTE`` in a live run) when
    the target was agentload's built-in simulator, or another model of a server
    (``--modeled-server``: Dynamo's mocker workers)."""
    sim = doc.simulator
    cfg = doc.config
    modeled = cfg.modeled_server if isinstance(cfg, ReplayConfig) else None
    if sim is None and modeled is not None:
        return (
            f"MODELED target: {modeled}; its timings below are a model of a server, not a "
            "measurement of hardware (--modeled-server)."
        )
    if sim is None:
        return None
    how = "answered every call" if doc.mode == "live" else "served this replay (agentload serve)"
    return (
        f"SIMULATED target: agentload's built-in simulator (profile {sim}) {how}; the timings "
        "below are that profile's model of a server, not a measurement of hardware "
        "(--endpoint URL --model M measures a real one)."
    )


def waits_note(doc: ResultsDocument) -> str | None:
    """The sentence a run's summary and report carry when its gaps included modeled waits."""
    waits = doc.plan.modeled_waits
    if waits is None:
        return None
    return (
        f"MODELED WAITS: the gaps between calls include waits drawn from a model, not measured "
        f"({waits}); --gaps measured plays the measured gaps only."
    )


class ResultsDocument(ResultsModel):
    """results.json (see the module docstring)."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(
        default=SCHEMA, alias="schema", description="'agentload.replay-results/MAJOR'"
    )
    mode: Literal["replay", "live"] = Field(
        default="replay",
        description="replay (recorded traffic, identical for every target) or live (agents "
        "driven by the target's own outputs; see LIVE_NOTE)",
    )
    salt_at: SaltAt | None = Field(
        default=None,
        description="where the salt went (config.salt_at): start, after-system or off; read "
        "from config when absent (an older file)",
    )
    config: RunConfig = Field(
        description="the run's options: a replay's (source: replay), or a live run's (source: "
        "live: its traces, endpoint, model, levels, sessions per point, measurement options)"
    )
    environment: Environment = Field(description="where it ran")
    engine: EngineInfo = Field(description="the engine preset as used")
    plan: PlanInfo = Field(description="what was planned")
    digest_manifest: dict[str, str] = Field(description="recorded call → payload digest")
    interrupted: bool = Field(description="the run was interrupted (later points absent)")
    prompt_token_ratio: float | None = Field(
        default=None,
        description="the run's server/ours prompt-token ratio: Σ server-reported prompt tokens / "
        "Σ agentload's count of the same prompts as sent, over every successful request that "
        "has both, at every point (None when the server reported none)",
    )
    points: list[Point] = Field(description="one per load point, in order")
    live: LiveInfo | None = Field(default=None, description="what a live run ran (else None)")
    simulator: str | None = Field(
        default=None,
        description="the profile of agentload's built-in simulator when it was the target "
        "(generate without --endpoint; replay against agentload serve, told by its models "
        "list): the timings are that profile's model of a server, not a measurement of "
        "hardware; None for any other server",
    )
    repeats: list[RepeatGroup] | None = Field(
        default=None,
        description="--repeat: per load run more than once, each headline metric's mean and "
        "95% interval over the repetitions",
    )
    capacity: Capacity | None = Field(
        default=None,
        description="replay --capacity: the search's probes and its answer (else None)",
    )
    cluster: ClusterRun | None = Field(
        default=None, description="a sharded run (replay --ray): the cluster; None on one machine"
    )
    _path: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _salt_mode(self) -> ResultsDocument:
        if self.salt_at is None:  # a live run's agents send their own requests: no salt
            cfg = self.config
            self.salt_at = cfg.salt_at if isinstance(cfg, ReplayConfig) else "off"
        return self

    @field_validator("schema_")
    @classmethod
    def _known_major(cls, v: str) -> str:
        major = v.removeprefix(_PREFIX).split(".", 1)[0]
        if not v.startswith(_PREFIX) or major != str(SCHEMA_MAJOR):
            raise PydanticCustomError(
                "results_schema",
                f"results schema {v!r} is not supported by this agentload (reads {SCHEMA}); "
                "upgrade agentload to read it",
            )
        return v

    @property
    def path(self) -> Path | None:
        """The file it was read from (None when built in memory)."""
        return self._path


def prepare_out_dir(out: Path, option: str = "--out") -> Path:
    """Create ``out`` and check a file can be written in it, so that a bad ``--out`` is one
    ``ConfigError`` line before any work, not a traceback after it."""
    return output_dir(out, option=option)


def write_results(results: ResultsDocument, out: Path) -> Path:
    """Write ``results.json`` into ``out`` (atomically); returns its path."""
    return write_document(results, out, "results.json")


def load_results(path: str | os.PathLike[str]) -> ResultsDocument:
    """Read a results.json (or the results.json inside a directory); a file that cannot be
    read as one is a ``ResultsFormatError`` naming the file and the field."""
    p, data = read_document(path, "results.json", "results")
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(_PREFIX):
        raise ResultsFormatError(f"{p}: not an agentload replay results file")
    try:
        doc = ResultsDocument.model_validate(data)
    except ValidationError as exc:
        more = exc.error_count() - 1
        extra = f" (and {more} more problem{'s' * (more > 1)})" if more else ""
        raise ResultsFormatError(f"{p}: {format_validation_error(exc, '')}{extra}") from None
    doc._path = p
    return doc
