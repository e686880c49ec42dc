"""The metric values of results.json: a metric's distribution, KV survival buckets and
prefix-cache hits, requests per phase, and the aggregates of a point and of a group.

``ResultsModel`` is the base of every results.json model (here, ``points``, ``runinfo`` and
``results``): fields a newer minor version adds are kept and written back, never an error.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentload.measure.records import Pool

__all__ = [
    "Aggregates",
    "Distribution",
    "GroupAggregates",
    "KVBucket",
    "KVHits",
    "Phases",
    "ResultsModel",
    "ServingRow",
]


class ResultsModel(BaseModel):
    """The base of every results.json model: unknown fields are kept, not refused."""

    # Fields a newer minor version adds are kept (and written back), never an error.
    model_config = ConfigDict(extra="allow")


class _MetricValues(ResultsModel):
    """Metric values by tag: typed fields for the built-in metrics, extra fields for others."""

    def value(self, tag: str) -> Any:
        """Metric ``tag``'s value as results.json holds it (None when absent): what a metric's
        ``columns`` read."""
        return self.model_dump(mode="json", include={tag}).get(tag)


class Distribution(ResultsModel):
    """Summary of a metric's values (metrics.base.distribution)."""

    n: int = Field(description="number of values")
    mean: float = Field(description="arithmetic mean")
    min: float = Field(description="smallest value")
    p50: float = Field(description="median (linear between closest ranks)")
    p90: float = Field(description="90th percentile")
    p99: float = Field(description="99th percentile")
    max: float = Field(description="largest value")


class KVBucket(ResultsModel):
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


class KVHits(ResultsModel):
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


class HitRate(ResultsModel):
    """KV-cache hit rate of a point, measured and ideal (metrics.cache.KVHitRate)."""

    n: int = Field(description="successful measured requests with a reported cached count")
    measured: float = Field(description="Σ cached tokens / Σ prompt tokens")
    ideal: float = Field(description="Σ ceiling tokens (server's) / Σ prompt tokens, at most 1")


class ServingRow(ResultsModel):
    """One pool, or one worker, of the server as its answers named them
    (metrics.serving)."""

    pool: Pool = Field(description="aggregated, prefill or decode")
    worker: str | None = Field(default=None, description="the worker's id (a worker's row)")
    workers: int | None = Field(default=None, description="workers seen in it (a pool's row)")
    requests: int = Field(description="successful measured requests it served")
    ttft_p50_ms: float | None = Field(description="TTFT p50 of the prompts it computed, ms")
    ttft_p99_ms: float | None = Field(description="TTFT p99 of the prompts it computed, ms")
    itl_p50_ms: float | None = Field(description="ITL p50 of the outputs it generated, ms")
    itl_p99_ms: float | None = Field(description="ITL p99 of the outputs it generated, ms")
    kv_hit_rate: float | None = Field(
        description="Σ cached / Σ prompt tokens of the prompts it computed"
    )
    router_kv_hit_rate: float | None = Field(
        description="the router's predicted hit rate of those prompts, prompt-token weighted"
    )


class Phases(ResultsModel):
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
    """Every metric of a point, by tag (formulas: the metric classes in measure/metrics/);
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
    kv_hit_rate: HitRate | None = Field(
        default=None, description="KV-cache hit rate, measured and ideal (None: no cached counts)"
    )
    session_kv_hit_rate: Distribution | None = Field(
        default=None, description="KV-cache hit rate per session instance, over sessions"
    )
    router_kv_hit_rate: float | None = Field(
        default=None,
        description="the router's predicted KV-cache hit rate (Dynamo's nvext.timing."
        "kv_hit_rate), prompt-token weighted; None when the server reports none",
    )
    pools: list[ServingRow] | None = Field(
        default=None,
        description="per serving pool (aggregated, prefill, decode), as the answers named their "
        "workers (Dynamo's nvext.worker_id); None when none did",
    )
    served_by: list[ServingRow] | None = Field(
        default=None, description="per serving worker, as pools; None when no answer named one"
    )
    context_overflow: int = Field(description="requests rejected for context length")
    length_mismatch: int = Field(description="requests whose output length was not honoured")
    phases: Phases = Field(description="requests per phase")
    by_band: dict[str, GroupAggregates] = Field(description="groups by context band")
    by_depth: dict[str, GroupAggregates] = Field(description="groups by turn depth")
