"""results.json: the typed, versioned document of one replay run; write, read, summary.csv.

``ResultsDocument`` is the one model of results.json: ``run`` builds it, ``report``,
``compare`` and the CSV writer read it. Its ``schema`` is ``agentload.replay-results/MAJOR``
(the trace schema's convention, ``recorder/schema.py``): a reader refuses another major
version; a newer minor version may add fields, which are kept. ``load_results`` turns a file
that is not JSON, not a results file, of another major version or missing a field into one
``ResultsFormatError`` line naming the file (and the field).

The same document describes a live benchmark (``agentload generate``/``eval``, ``mode:
live``): there the agents ran against the target itself, so each system received the traffic
its own outputs caused; ``live`` says what ran. A file without ``mode`` is a replay.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agentload.errors import ResultsFormatError
from agentload.infile import MAX_DOCUMENT_BYTES, read_bytes
from agentload.masking import scrub_bytes
from agentload.outfile import output_dir
from agentload.recorder.reader import format_validation_error
from agentload.replay.config import ReplayConfig
from agentload.replay.records import RequestRecord, SessionResult, Window
from agentload.replay.salt import SaltAt

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
    "ScrapeSample",
    "ScrapeSummary",
    "Span",
    "TimelineSample",
    "TruncatedTrace",
    "WorkerPoint",
    "load_results",
    "prepare_out_dir",
    "write_results",
]

SCHEMA_MAJOR = 1
SCHEMA = f"agentload.replay-results/{SCHEMA_MAJOR}"
_PREFIX = "agentload.replay-results/"
LIVE_NOTE = (
    "LIVE benchmark: real agents ran against the target, so its own outputs decided every "
    "next request; traffic differs between systems (agentload replay sends identical traffic)."
)
"""The sentence the report and the terminal summary open a live run with."""


class _Model(BaseModel):
    # Fields a newer minor version adds are kept (and written back), never an error.
    model_config = ConfigDict(extra="allow")


class _MetricValues(_Model):
    """Metric values by tag: typed fields for the built-in metrics, extra fields for others."""

    def value(self, tag: str) -> Any:
        """Metric ``tag``'s value as results.json holds it (None when absent): what a metric's
        ``columns`` read."""
        return self.model_dump(mode="json", include={tag}).get(tag)


class Distribution(_Model):
    """Summary of a metric's values (metrics.base.distribution)."""

    n: int = Field(description="number of values")
    mean: float = Field(description="arithmetic mean")
    min: float = Field(description="smallest value")
    p50: float = Field(description="median (linear between closest ranks)")
    p90: float = Field(description="90th percentile")
    p99: float = Field(description="99th percentile")
    max: float = Field(description="largest value")


class KVBucket(_Model):
    """KV survival of the requests whose preceding gap lies in one bucket."""

    bucket: str = Field(description="the gap bucket, e.g. 1-5s")
    lo_s: float = Field(description="lower bound of the gap, s (inclusive)")
    hi_s: float | None = Field(description="upper bound of the gap, s (exclusive); None: open")
    n: int = Field(description="requests counted")
    cached_tokens: int = Field(description="Σ server-reported cached prompt tokens")
    ceiling_tokens: int = Field(description="Σ ceiling reusable tokens, agentload's tokens")
    ceiling_tokens_server: float | None = Field(
        default=None,
        description="Σ ceilings in the server's tokens (each scaled by its request's server/ours "
        "prompt tokens; as counted when the server reported none)",
    )
    ratio: float = Field(description="cached_tokens / ceiling_tokens_server")
    mean_ratio: float = Field(description="mean of the per-request ratios cached / ceiling")
    within_session_tokens: int | None = Field(
        default=None,
        description="of cached_tokens, within-session hits: Σ min(cached, the request's "
        "within-instance ceiling in the server's tokens) (None in older files)",
    )
    cross_session_tokens: int | None = Field(
        default=None,
        description="of cached_tokens, cross-session hits: cached_tokens − "
        "within_session_tokens, what only another session instance can have cached",
    )


class KVHits(_Model):
    """Prefix-cache hits of a point by origin (metrics.quality.KVHits)."""

    n: int = Field(description="successful measured requests with a reported cached count")
    cached_tokens: int = Field(description="Σ server-reported cached prompt tokens")
    ceiling_tokens: int = Field(description="Σ ceilings, agentload's tokens")
    within_session_tokens: int | None = Field(
        description="within-session hits: Σ min(cached, within-instance ceiling)"
    )
    cross_session_tokens: int | None = Field(
        description="cross-session hits: cached_tokens − within_session_tokens"
    )


class Phases(_Model):
    """Requests per phase."""

    warmup: int = Field(description="unmeasured warm-up requests")
    ramp: int = Field(description="requests sent before the measured window")
    measured: int = Field(description="requests sent inside the measured window")
    drain: int = Field(description="requests sent after the measured window")


class _RequestMetrics(_MetricValues):
    """The request-level metrics, computed per point and per group (metrics.GROUP_METRICS)."""

    ttft_ms: Distribution | None = Field(description="time to first token, ms")
    tpot_ms: Distribution | None = Field(description="time per output token, ms")
    e2e_ms: Distribution | None = Field(description="end-to-end latency, ms")
    kv_survival: list[KVBucket] = Field(description="KV survival by preceding gap, in gap order")
    slo_attainment: float | None = Field(description="fraction of requests meeting every SLO")

    @field_validator("kv_survival")
    @classmethod
    def _by_gap(cls, v: list[KVBucket]) -> list[KVBucket]:
        return sorted(v, key=lambda b: b.lo_s)


class GroupAggregates(_RequestMetrics):
    """The request-level metrics of one context band or turn-depth bucket."""

    requests: int = Field(description="measured requests in the group")
    failed: int = Field(description="of which failed")


class Aggregates(_RequestMetrics):
    """Every metric of a point, by tag (formulas: the metric classes in replay/metrics/);
    metrics registered by other code ride along as extra fields."""

    itl_ms: Distribution | None = Field(description="inter-token latency (pooled), ms")
    client_lag_ms: Distribution | None = Field(description="actual − scheduled send, ms")
    tps_user: Distribution | None = Field(description="output tokens/s per user (session)")
    session_latency_s: Distribution | None = Field(description="session (job) latency, s")
    jobs_per_hour: float | None = Field(description="complete sessions per hour")
    output_tps: float | None = Field(description="output tokens/s over the window")
    total_tps: float | None = Field(description="input + output tokens/s over the window")
    request_rate: float | None = Field(description="successful requests/s over the window")
    output_tps_per_gpu: float | None = Field(description="output tokens/s per GPU")
    output_tps_per_mw: float | None = Field(description="output tokens/s per MW")
    goodput: float | None = Field(description="requests/s meeting every SLO")
    errors: dict[str, int] = Field(description="failed requests by kind")
    prompt_token_ratio: float | None = Field(
        default=None,
        description="server-reported / agentload's prompt tokens of the same requests",
    )
    kv_hits: KVHits | None = Field(
        default=None,
        description="server-reported cached tokens split into within- and cross-session hits "
        "(None without cached counts, and in older files)",
    )
    context_overflow: int = Field(description="requests rejected for context length")
    length_mismatch: int = Field(description="requests whose output length was not honoured")
    phases: Phases = Field(description="requests per phase")
    by_band: dict[str, GroupAggregates] = Field(description="groups by context band")
    by_depth: dict[str, GroupAggregates] = Field(description="groups by turn depth")


class Span(_Model):
    """A time span of a point, ns since its start."""

    start_ns: int = Field(description="start")
    end_ns: int = Field(description="end")


class TimelineSample(_Model):
    """The point's counters, sampled at 1 Hz."""

    t_ns: int = Field(description="when, ns since the point's start")
    active_sessions: int = Field(description="sessions in flight")
    inflight: int = Field(description="requests in flight")
    requests: int = Field(description="requests completed so far")
    errors: int = Field(description="failed requests so far")
    output_tokens: int = Field(description="output tokens received so far")


class ScrapeSample(_Model):
    """One scrape of the server's Prometheus metrics."""

    t_ns: int = Field(description="when, ns since the point's start")
    values: dict[str, float] = Field(description="the kept series: name{labels} → value")


class ScrapeSummary(_Model):
    """What ``--scrape-metrics`` collected during a point."""

    url: str = Field(description="the scraped URL")
    samples: list[ScrapeSample] = Field(description="the samples, in time order")
    failures: int = Field(description="scrapes that failed")
    last_error: str | None = Field(description="the last failure, in words")


class WorkerPoint(_Model):
    """What one worker of a sharded run (``replay --ray``) did at a point."""

    worker: int = Field(description="worker number (0-based)")
    node: str = Field(description="host name of the node it ran on")
    pid: int = Field(description="its process id")
    lanes: int | None = Field(description="its share of the lanes (None: arrivals, recorded)")
    arrival_rate: float | None = Field(description="its share of the arrival rate, or None")
    sessions: int = Field(description="session instances it started")
    requests: int = Field(description="requests it sent (or that were in flight when lost)")
    clock_offset_ns: int = Field(
        description="its monotonic clock minus the driver's, measured at start from round trips"
    )
    clock_uncertainty_ns: int = Field(
        description="how far that offset may be off (half the fastest round trip)"
    )
    start_skew_ns: int = Field(
        description="when it actually started the point minus the common start, on the "
        "driver's time line"
    )
    lost: str | None = Field(
        default=None,
        description="None, or why the worker was lost mid-point (its process died): its "
        "requests in flight are counted as failed (error_kind worker_lost), its running "
        "sessions as cut, and the measured window ends when the loss was seen",
    )
    lost_inflight: int = Field(default=0, description="requests in flight when it was lost")


class Point(_Model):
    """One load point (a concurrency level, or the arrival rate)."""

    interrupted: bool = Field(description="the run was interrupted during this point")
    concurrency: int | None = Field(
        description="lanes; None with an arrival rate or the recorded schedule"
    )
    arrival_rate: float | None = Field(description="Poisson sessions/s, or None")
    schedule: Literal["closed", "recorded"] = Field(
        default="closed",
        description="closed: lanes or arrivals; recorded: every call at its recorded offset "
        "(open loop, config.time_scale)",
    )
    wall_s: float = Field(description="wall-clock seconds the point ran")
    warmup_window: Span = Field(description="from the start until every lane warmed up")
    window: Window = Field(description="the measured (steady-state) window")
    power_watts: float | None = Field(description="average power over the window, W")
    max_active_sessions: int = Field(description="peak sessions in flight")
    max_inflight_requests: int = Field(description="peak requests in flight")
    aggregates: Aggregates = Field(description="every metric of the point")
    timeline: list[TimelineSample] = Field(description="counters at 1 Hz")
    scrape: ScrapeSummary | None = Field(description="server metrics, with --scrape-metrics")
    sessions: list[SessionResult] = Field(description="every session instance")
    requests: list[RequestRecord] = Field(description="every request")
    workers: list[WorkerPoint] | None = Field(
        default=None,
        description="a sharded run (replay --ray): each worker's share, clock and fate; None "
        "on one machine",
    )

    @property
    def load(self) -> str:
        """``c=4``, ``rate=2.0/s`` or ``recorded``."""
        if self.schedule == "recorded":
            return "recorded"
        if self.concurrency is not None:
            return f"c={self.concurrency}"
        return f"rate={self.arrival_rate}/s"


class Environment(_Model):
    """Where the replay ran."""

    agentload: str = Field(description="agentload version")
    python: str = Field(description="Python version")
    platform: str = Field(description="platform string")
    cpu_count: int | None = Field(description="logical CPUs")
    started_unix_ns: int = Field(description="wall-clock start of the run")


class EngineInfo(_Model):
    """The engine preset as used (after --no-extras)."""

    name: str = Field(description="preset name")
    ignore_eos: bool = Field(description="ignore_eos was sent")
    min_tokens: bool = Field(description="min_tokens was sent")
    include_usage: bool = Field(description="stream_options.include_usage was sent")


class TruncatedTrace(_Model):
    """A trace that ends early (a killed run)."""

    file: str = Field(description="the trace file")
    detail: str = Field(description="where and how it ends")


class CutSessionInfo(_Model):
    """A session ``--fit cut-session`` shortened to fit ``--max-context``."""

    session: str = Field(description="key of the recorded session")
    kept_calls: int = Field(description="calls replayed")
    dropped_calls: int = Field(description="calls cut: above --max-context, or depending on one")


class PlanInfo(_Model):
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


class LivePoint(_Model):
    """One point of a live run: its own generate run of the sessions."""

    trace: str = Field(description="the trace the point recorded")
    parallel: int = Field(description="sessions running at once (--parallel or --sweep level)")
    end_reasons: dict[str, int] = Field(description="sessions by end reason")


class LiveInfo(_Model):
    """What a live run (``mode: live``) ran: the scenario and how its agents were run."""

    command: Literal["generate", "eval"] = Field(description="generate, or eval (checked)")
    scenario: str = Field(description="scenario name")
    scenario_hash: str | None = Field(description="content hash of the resolved scenario")
    sandbox: str = Field(description="where the tools ran: docker or local")
    retries: int = Field(description="retries of a failed call (--retries)")
    points: list[LivePoint] = Field(description="one per point, in order")


class ClusterRun(_Model):
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


class ResultsDocument(_Model):
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
    config: ReplayConfig = Field(
        description="the run's options (a live run: its traces, endpoint, model, levels, "
        "sessions per point, power and GPUs; no salt, no pinned lengths, start at zero)"
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
    cluster: ClusterRun | None = Field(
        default=None, description="a sharded run (replay --ray): the cluster; None on one machine"
    )
    _path: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _salt_mode(self) -> ResultsDocument:
        if self.salt_at is None:
            self.salt_at = self.config.salt_at
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


def write_document(doc: BaseModel, out: Path, name: str) -> Path:
    """Write ``doc`` as indented JSON to ``out/name`` (atomically: a reader never sees half a
    file; any credential in it masked: ``agentload.masking``); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    tmp = path.with_suffix(".json.tmp")
    data = doc.model_dump(mode="json", by_alias=True)
    tmp.write_bytes(scrub_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2)))
    os.replace(tmp, path)
    return path


def read_document(path: str | os.PathLike[str], name: str, what: str) -> tuple[Path, Any]:
    """The file (``path``, or ``path/name`` for a directory) and its JSON; one-line
    ``ResultsFormatError`` naming the file when it cannot be read (``what``: "results", ...)."""
    p = Path(path)
    if p.is_dir():
        p = p / name
    if not p.exists():
        raise ResultsFormatError(f"{p}: no such {what} file")
    raw = read_bytes(p, limit=MAX_DOCUMENT_BYTES, label=str(p), error=ResultsFormatError)
    try:
        return p, orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ResultsFormatError(f"{p}: not JSON ({exc})") from None


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
