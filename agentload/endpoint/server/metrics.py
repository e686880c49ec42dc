"""``/metrics``: Prometheus text named after vLLM's ``vllm:*`` metrics.

A custom collector reads the engine's plain counters at scrape time (serving a request costs a
few integer increments, no Prometheus locks). Exposed, with label ``model_name``:

* gauges ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:gpu_cache_usage_perc`` and ``vllm:kv_cache_usage_perc`` (active blocks / all blocks);
* counters ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total`` (prompt
  tokens queried / found in the prefix cache), ``vllm:prompt_tokens_total``,
  ``vllm:generation_tokens_total``, ``vllm:num_preemptions_total``,
  ``vllm:request_success_total{finished_reason}``, and ``agentload_sim:kv_evictions_total``
  (cached blocks evicted to make room; vLLM has no direct equivalent);
* histograms ``vllm:time_to_first_token_seconds`` and ``vllm:e2e_request_latency_seconds``
  (vLLM's buckets).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from agentload.endpoint.timing.engine import Engine, Histogram

__all__ = ["SimulatorCollector", "metrics_registry", "metrics_text"]


def _hist(name: str, doc: str, h: Histogram, model: str) -> HistogramMetricFamily:
    fam = HistogramMetricFamily(name, doc, labels=["model_name"])
    buckets: list[tuple[str, float]] = []
    acc = 0
    for bound, c in zip(h.buckets, h.counts, strict=False):
        acc += c
        buckets.append((repr(float(bound)), acc))
    buckets.append(("+Inf", acc + h.counts[-1]))
    fam.add_metric([model], buckets, h.sum)
    return fam


class SimulatorCollector:
    """Collects an engine's counters, labelled with the served model's name (register in a
    per-server registry)."""

    def __init__(self, engine: Engine, model: str) -> None:
        self.engine = engine
        self.model = model

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        eng, st, m = self.engine, self.engine.stats, self.model

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=["model_name"])
            g.add_metric([m], value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=["model_name"])
            c.add_metric([m], value)
            return c

        yield gauge("vllm:num_requests_running", "Requests running.", len(eng.running))
        yield gauge("vllm:num_requests_waiting", "Requests waiting.", len(eng.waiting))
        yield gauge("vllm:gpu_cache_usage_perc", "KV cache usage (1 = full).", eng.kv.usage)
        yield gauge("vllm:kv_cache_usage_perc", "KV cache usage (1 = full).", eng.kv.usage)
        yield counter("vllm:prefix_cache_queries", "Prompt tokens queried.", st.prefix_queries)
        yield counter("vllm:prefix_cache_hits", "Prompt tokens found cached.", st.prefix_hits)
        yield counter("vllm:prompt_tokens", "Prompt tokens processed.", st.prompt_tokens)
        yield counter("vllm:generation_tokens", "Tokens generated.", st.generation_tokens)
        yield counter("vllm:num_preemptions", "Preemptions.", st.preemptions)
        yield counter("agentload_sim:kv_evictions", "Cached KV blocks evicted.", eng.kv.evictions)
        ok = CounterMetricFamily(
            "vllm:request_success", "Finished requests.", labels=["model_name", "finished_reason"]
        )
        for reason, n in sorted(st.finished.items()):
            ok.add_metric([m, reason], n)
        yield ok
        yield _hist("vllm:time_to_first_token_seconds", "Time to first token.", st.ttft, m)
        yield _hist("vllm:e2e_request_latency_seconds", "End-to-end latency.", st.e2e, m)


def metrics_registry(engine: Engine, model: str) -> CollectorRegistry:
    """A registry of its own (one per server) holding the collector of ``engine``."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(SimulatorCollector(engine, model))
    return reg


def metrics_text(registry: CollectorRegistry) -> tuple[bytes, str]:
    """The Prometheus exposition of ``registry`` and its content type."""
    return generate_latest(registry), CONTENT_TYPE_LATEST
