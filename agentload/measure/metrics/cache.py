"""KV-cache hit rates: of a point (measured against the trace's ideal) and per session.

Both read the successful measured requests whose server reported a cached-token count; a
request's prompt is the server's count (agentload's, from the trace, when the server reports
none), so cached and prompt tokens are in the same units.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from agentload.measure.metrics.base import Column, Metric, MetricContext, distribution
from agentload.measure.metrics.quality import ceiling_server, cell_of
from agentload.measure.records import RequestRecord

__all__ = ["KVHitRate", "SessionKVHitRate", "measured_rate", "with_cache"]


def with_cache(reqs: Iterable[RequestRecord]) -> list[RequestRecord]:
    """The requests a hit rate reads: a reported cached count and a prompt."""
    return [r for r in reqs if r.cached_tokens is not None and r.input_tokens > 0]


def measured_rate(reqs: list[RequestRecord]) -> float | None:
    """Σ cached tokens / Σ prompt tokens of ``reqs`` (``with_cache``'s); None without any."""
    prompt = sum(r.input_tokens for r in reqs)
    return sum(r.cached_tokens or 0 for r in reqs) / prompt if prompt else None


class KVHitRate(Metric):
    """KV-cache hit rate of the point: measured = Σ server cached tokens / Σ prompt tokens;
    ideal = Σ ceiling tokens (what the target can have cached for each request as sent, in
    the server's tokens, as for KV survival) / Σ prompt tokens: the trace's ceiling, reached
    when nothing reusable was evicted. None without requests with a reported cached count."""

    tag = "kv_hit_rate"
    header = "KV-cache hit rate"
    unit = "fraction"

    @classmethod
    def columns(cls) -> tuple[Column, ...]:
        """Measured and ideal."""
        return tuple(
            Column(f"kv_hit_rate_{k}", f"KV-cache hit rate, {k}", cell_of(k))
            for k in ("measured", "ideal")
        )

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        sel = with_cache(ctx.measured_ok)
        if not sel:
            return None
        prompt = sum(r.input_tokens for r in sel)
        return {
            "n": len(sel),
            "measured": measured_rate(sel),
            "ideal": min(1.0, sum(ceiling_server(r) for r in sel) / prompt),
        }


class SessionKVHitRate(Metric):
    """KV-cache hit rate per session instance: Σ server cached tokens / Σ prompt tokens of
    its requests; the distribution over sessions (a session whose cache was evicted across a
    long tool wait shows at the bottom, where the point's pooled rate hides it)."""

    tag = "session_kv_hit_rate"
    header = "KV-cache hit rate per session"
    unit = "fraction"
    stats = ("min", "p50")

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        cached: dict[int, int] = defaultdict(int)
        prompt: dict[int, int] = defaultdict(int)
        for r in with_cache(ctx.measured_ok):
            cached[r.session] += r.cached_tokens or 0
            prompt[r.session] += r.input_tokens
        return distribution(cached[s] / prompt[s] for s in prompt)
