"""Who served each request, as the server said (Dynamo's ``nvext.worker_id`` and ``timing``,
asked for by ``--engine dynamo``): per pool and per worker, and the router's own hit rate.

A request names the worker that computed its prompt and the one that generated its output.
Where they are one worker it ran *aggregated*; where they differ, the first is in the
*prefill* pool and the second in the *decode* pool (disaggregated serving). A prefill or
aggregated worker is judged on the TTFT and KV-cache hits of the prompts it computed; a
decode or aggregated worker on the inter-token latency of the outputs it generated. Every
metric here reads the successful measured requests that name a worker, and is None (left out)
when none does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from agentload.measure.metrics.base import Metric, MetricContext
from agentload.measure.metrics.cache import measured_rate, with_cache
from agentload.measure.records import Pool, RequestRecord
from agentload.quantiles import percentile

__all__ = ["Pool", "PoolMetrics", "RouterKVHitRate", "WorkerMetrics", "served", "worker_pools"]


def served(ctx: MetricContext) -> list[RequestRecord]:
    """The successful measured requests that name the worker that generated them."""
    return [r for r in ctx.measured_ok if r.decode_worker is not None]


def worker_pools(reqs: Iterable[RequestRecord]) -> dict[tuple[Pool, str], list[RequestRecord]]:
    """The requests of each (pool, worker): an aggregated request counts for its one worker; a
    disaggregated one for its prefill worker (prefill pool) and its decode worker (decode)."""
    out: dict[tuple[Pool, str], list[RequestRecord]] = defaultdict(list)
    for r in reqs:
        dec = r.decode_worker
        assert dec is not None
        pre = r.prefill_worker
        if pre is None or pre == dec:
            out[(Pool.AGGREGATED, dec)].append(r)
        else:
            out[(Pool.PREFILL, pre)].append(r)
            out[(Pool.DECODE, dec)].append(r)
    return out


def _ms(ascending: list[float], p: float) -> float | None:
    return percentile(ascending, p, presorted=True) / 1e6 if ascending else None


def _cells(pool: Pool, reqs: list[RequestRecord]) -> dict[str, Any]:
    """The cells a pool or worker row shares: requests, TTFT of the prompts it computed, ITL
    of the outputs it generated, and the hit rate of its prompts (measured: Σ cached / Σ
    prompt tokens; the router's prediction, ``nvext.timing.kv_hit_rate``, weighted alike)."""
    prefills = pool != Pool.DECODE
    decodes = pool != Pool.PREFILL
    ttft = sorted(float(r.ttft_ns) for r in reqs if prefills and r.ttft_ns is not None)
    itl = sorted(float(v) for r in reqs if decodes for v in r.itl_ns)
    return {
        "pool": pool.value,
        "requests": len(reqs),
        "ttft_p50_ms": _ms(ttft, 50),
        "ttft_p99_ms": _ms(ttft, 99),
        "itl_p50_ms": _ms(itl, 50),
        "itl_p99_ms": _ms(itl, 99),
        "kv_hit_rate": measured_rate(with_cache(reqs)) if prefills else None,
        "router_kv_hit_rate": _predicted(reqs) if prefills else None,
    }


def _predicted(reqs: Iterable[RequestRecord]) -> float | None:
    """The router's predicted hit rate of ``reqs``' prompts, weighted by prompt tokens (None
    when no request reports one)."""
    num = den = 0.0
    for r in reqs:
        rate = (r.server_timing or {}).get("kv_hit_rate")
        if rate is not None and r.input_tokens > 0:
            num += rate * r.input_tokens
            den += r.input_tokens
    return num / den if den else None


_ROW = (
    ("pool", "pool"),
    ("requests", "requests"),
    ("ttft_p50_ms", "TTFT p50 (ms)"),
    ("ttft_p99_ms", "TTFT p99 (ms)"),
    ("itl_p50_ms", "ITL p50 (ms)"),
    ("itl_p99_ms", "ITL p99 (ms)"),
    ("kv_hit_rate", "KV hit rate"),
    ("router_kv_hit_rate", "router's predicted hit rate"),
)


class PoolMetrics(Metric):
    """Per pool (aggregated, prefill, decode): its workers and requests, the TTFT of the
    prompts it computed, the ITL of the outputs it generated, the measured and predicted hit
    rates of its prompts (see the module docstring)."""

    tag = "pools"
    header = "Serving pools"
    row_columns = (_ROW[0], ("workers", "workers"), *_ROW[1:])
    optional = True

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        by_pool: dict[Pool, list[RequestRecord]] = defaultdict(list)
        workers: dict[Pool, int] = defaultdict(int)
        for (pool, _), reqs in worker_pools(served(ctx)).items():
            by_pool[pool] += reqs
            workers[pool] += 1
        rows = [{**_cells(p, by_pool[p]), "workers": workers[p]} for p in Pool if p in by_pool]
        return rows or None


class WorkerMetrics(Metric):
    """Per worker, as its pool's row: which worker served how much, and how well."""

    tag = "served_by"
    header = "Serving workers"
    row_columns = (("worker", "worker"), *_ROW)
    optional = True

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        pools = worker_pools(served(ctx))
        rows = [{"worker": w, **_cells(p, pools[(p, w)])} for p, w in sorted(pools)]
        return rows or None


class RouterKVHitRate(Metric):
    """The router's predicted KV-cache hit rate (Dynamo's per-request ``nvext.timing.
    kv_hit_rate``: the share of the prompt it expected the chosen worker to hold), weighted by
    prompt tokens as the measured rate is; beside the measured and ideal rates it tells a
    routing miss (low prediction) from an eviction (prediction above the measured rate)."""

    tag = "router_kv_hit_rate"
    header = "Router's predicted KV hit rate"
    unit = "fraction"
    optional = True

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return _predicted(ctx.measured_ok)
