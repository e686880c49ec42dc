"""Goodput/SLO attainment, KV survival, the server/ours token ratio, errors, output-length
mismatches, phase counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentload.measure.metrics.base import SLO, Column, Metric, MetricContext
from agentload.measure.records import Phase, RequestRecord

__all__ = [
    "GAP_BUCKETS",
    "ContextOverflow",
    "ErrorCounts",
    "Goodput",
    "KVHits",
    "KVSurvival",
    "LengthMismatch",
    "PhaseCounts",
    "PromptTokenRatio",
    "SLOAttainment",
    "ceiling_server",
    "meets_slo",
    "prompt_token_ratio",
]

GAP_BUCKETS: tuple[tuple[str, float, float], ...] = (
    ("0-1s", 0.0, 1.0),
    ("1-5s", 1.0, 5.0),
    ("5-15s", 5.0, 15.0),
    ("15-60s", 15.0, 60.0),
    ("60-300s", 60.0, 300.0),
    ("300s+", 300.0, float("inf")),
)


def meets_slo(r: RequestRecord, slo: SLO) -> bool:
    """Succeeded, and TTFT ≤ ttft, TPOT ≤ tpot, E2E ≤ e2e, 1 s / TPOT ≥ tps_user for every
    objective set (TPOT and tokens/s hold for a request with fewer than two output tokens)."""
    if not r.ok:
        return False
    if slo.ttft_ns is not None and (r.ttft_ns is None or r.ttft_ns > slo.ttft_ns):
        return False
    t = r.tpot_ns
    if slo.tpot_ns is not None and t is not None and t > slo.tpot_ns:
        return False
    if slo.tps_user is not None and t is not None and t > 1e9 / slo.tps_user:
        return False
    return slo.e2e_ns is None or r.e2e_ns <= slo.e2e_ns


class Goodput(Metric):
    """Goodput: successful requests ending inside the window that meet every SLO
    / window seconds (None without --slo)."""

    tag = "goodput"
    header = "goodput"
    unit = "req/s"

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        slo, s = ctx.slo, ctx.window.seconds
        if slo is None or s <= 0:
            return None
        return sum(1 for r in ctx.in_window if meets_slo(r, slo)) / s


class SLOAttainment(Metric):
    """SLO attainment: measured requests meeting every SLO / all measured requests (failed
    requests count as misses); None without --slo."""

    tag = "slo_attainment"
    header = "SLO attainment"
    unit = "fraction"

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        slo = ctx.slo
        if slo is None or not ctx.measured:
            return None
        return sum(1 for r in ctx.measured if meets_slo(r, slo)) / len(ctx.measured)


def ceiling_server(r: RequestRecord, tokens: int | None = None) -> float:
    """The request's KV-survival ceiling (or ``tokens`` of it) in the server's tokens: the
    ceiling (agentload's tokens) times the request's server/ours prompt-token ratio, or as
    counted when the server reported no prompt tokens (ours by ours)."""
    n = r.ceiling_tokens if tokens is None else tokens
    scale = r.server_per_ours
    return n * scale if scale is not None else float(n)


def cell_of(name: str) -> Callable[[Any], Any]:
    """A column cell: key ``name`` of a dict value (None when there is no value)."""
    return lambda v: v[name] if v else None


def _hits_split(sel: list[RequestRecord]) -> dict[str, int | None]:
    """The server's cached tokens of ``sel`` split by where they can have come from:
    within-session hits Σ min(cached, within ceiling in the server's tokens), cross-session
    hits the rest (None both when a request has no within ceiling: an older file)."""
    if any(r.within_ceiling_tokens is None for r in sel):
        return {"within_session_tokens": None, "cross_session_tokens": None}
    within = sum(
        min(r.cached_tokens or 0, round(ceiling_server(r, r.within_ceiling_tokens))) for r in sel
    )
    cached = sum(r.cached_tokens or 0 for r in sel)
    return {"within_session_tokens": within, "cross_session_tokens": cached - within}


class KVSurvival(Metric):
    """KV survival by preceding gap: for successful measured requests with a reported cached
    count, a preceding gap (actual idle time since the agent's previous call completed) and a
    ceiling > 0, per gap bucket: Σ server cached tokens / Σ ceiling tokens in the server's
    units (token-weighted), plus the mean of the per-request ratios.

    Like is divided by like: the cached count is the server's, the ceiling is counted in
    agentload's tokens, so each request's ceiling is scaled by its own server prompt tokens /
    agentload prompt tokens (the prompt as sent) before dividing; without a server prompt
    count the ceiling is used as counted. So the ratio is the share of the reusable prompt
    the server reused, whatever its tokenizer.

    The ceiling counts what the target can truly have cached for the request as sent, in
    full blocks of agentload's tokenizer and the trace's block size, in every ``--salt-at``
    mode the larger of two parts (``replay.reuse``): within the session instance, the longest
    prefix of the prompt as sent shared with a call of the same instance that may run before
    it; across instances, what another one can have cached: salted, everything before the
    point where two salts differ (``start``: the tool schemas, the system head and the salt's
    common leading tokens; ``after-system``: the tools and the whole system prompt too),
    unsalted (``off``), the whole prompt (a replica sends it too). So against the simulator
    the ratio is at most 1 in every mode.

    Each row also splits the cached tokens into within-session hits (Σ min(cached, the
    request's within-instance ceiling)) and cross-session hits (the rest), as ``KVHits``."""

    tag = "kv_survival"
    header = "KV survival"
    unit = "cached / ceiling tokens"
    row_columns = (
        ("bucket", "preceding gap"),
        ("n", "requests"),
        ("cached_tokens", "cached tokens"),
        ("ceiling_tokens", "ceiling tokens (ours)"),
        ("ceiling_tokens_server", "ceiling tokens (server's)"),
        ("ratio", "cached / ceiling"),
        ("mean_ratio", "mean per-request ratio"),
        ("within_session_tokens", "within-session hits"),
        ("cross_session_tokens", "cross-session hits"),
    )

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        rows = []
        for name, lo, hi in GAP_BUCKETS:
            sel = [
                r
                for r in ctx.measured_ok
                if r.cached_tokens is not None
                and r.gap_ns is not None
                and r.ceiling_tokens > 0
                and lo <= r.gap_ns / 1e9 < hi
            ]
            if not sel:
                continue
            cached = sum(r.cached_tokens or 0 for r in sel)
            scaled = [ceiling_server(r) for r in sel]
            rows.append(
                {
                    "bucket": name,
                    "lo_s": lo,
                    "hi_s": hi if hi != float("inf") else None,
                    "n": len(sel),
                    "cached_tokens": cached,
                    "ceiling_tokens": sum(r.ceiling_tokens for r in sel),
                    "ceiling_tokens_server": sum(scaled),
                    "ratio": cached / sum(scaled),
                    "mean_ratio": sum(
                        (r.cached_tokens or 0) / c for r, c in zip(sel, scaled, strict=True)
                    )
                    / len(sel),
                    **_hits_split(sel),
                }
            )
        return rows


class KVHits(Metric):
    """Prefix-cache hits by origin: over successful measured requests with a reported cached
    count (agents' first calls included, which KV survival's gap buckets leave out), Σ server
    cached tokens split into within-session hits, Σ min(cached, within-instance ceiling) (the
    ceiling's part the request's own session instance can have put in the cache, scaled to the
    server's tokens as for KV survival), and cross-session hits, the rest: cached tokens only
    another session instance (another replica or recorded session, an earlier sweep point) can
    have left there; with ``--salt-at after-system`` the shared tools and system prompt. None
    without such requests."""

    tag = "kv_hits"
    header = "prefix-cache hits"
    unit = "tokens"

    @classmethod
    def columns(cls) -> tuple[Column, ...]:
        """Cached, within-session and cross-session tokens."""
        return tuple(
            Column(name, label, cell_of(key))
            for name, label, key in (
                ("cached_tokens", "cached tokens", "cached_tokens"),
                ("within_session_hits", "within-session hits (tokens)", "within_session_tokens"),
                ("cross_session_hits", "cross-session hits (tokens)", "cross_session_tokens"),
            )
        )

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        sel = [r for r in ctx.measured_ok if r.cached_tokens is not None]
        if not sel:
            return None
        return {
            "n": len(sel),
            "cached_tokens": sum(r.cached_tokens or 0 for r in sel),
            "ceiling_tokens": sum(r.ceiling_tokens for r in sel),
            **_hits_split(sel),
        }


def prompt_token_ratio(requests: Iterable[RequestRecord]) -> float | None:
    """Σ server-reported prompt tokens / Σ agentload's prompt tokens of the same requests (the
    prompts as sent), over successful requests that have both; None when none has."""
    server = ours = 0
    for r in requests:
        if r.ok and r.prompt_tokens is not None and r.prompt_tokens_ours > 0:
            server += r.prompt_tokens
            ours += r.prompt_tokens_ours
    return server / ours if ours else None


class PromptTokenRatio(Metric):
    """Server/ours prompt-token ratio: Σ server-reported prompt tokens / Σ agentload's count
    of the same prompts as sent (the trace's tokenizer, salt included), over every successful
    request of the point that has both (warm-up included: its prompt is a full one). 1.0
    against the simulator; above 1 when the server's tokenizer splits the same text finer
    (Gemma vs o200k: about 1.2). None when the server reports no usage."""

    tag = "prompt_token_ratio"
    header = "server/ours prompt tokens"

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return prompt_token_ratio(ctx.requests)


class ErrorCounts(Metric):
    """Failed requests by kind (http_<status>, timeout, connect, reset, truncated,
    stream_error, context_overflow, invalid_usage), over every request including warm-up."""

    tag = "errors"
    header = "errors"

    @classmethod
    def columns(cls) -> tuple[Column, ...]:
        """One column: the failures of every kind."""
        return (Column("errors", "errors", lambda v: sum(v.values()) if v else 0),)

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return dict(Counter(r.error_kind for r in ctx.requests if r.error_kind is not None))


class ContextOverflow(Metric):
    """Requests the target rejected for context length (counted apart from other errors)."""

    tag = "context_overflow"
    header = "context overflow"
    requires = ("errors",)

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return int(deps["errors"].get("context_overflow", 0))


class LengthMismatch(Metric):
    """Successful measured requests whose server-reported completion tokens differ from the
    pinned (recorded) length."""

    tag = "length_mismatch"
    header = "length mismatches"

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return sum(1 for r in ctx.measured_ok if r.mismatch)


class PhaseCounts(Metric):
    """Requests per phase: warmup, ramp, measured, drain."""

    tag = "phases"
    header = "requests per phase"

    @classmethod
    def columns(cls) -> tuple[Column, ...]:
        """The measured and warm-up requests."""
        return (
            Column("requests_measured", "measured requests", cell_of("measured")),
            Column("requests_warmup", "warm-up requests", cell_of("warmup")),
        )

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        c = Counter(r.phase for r in ctx.requests)
        return {p.value: c.get(p, 0) for p in Phase}
