"""Per-request latency metrics over successful measured requests (values in ms)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentload.measure.metrics.base import Metric, MetricContext, distribution
from agentload.measure.records import Phase

__all__ = ["E2E", "ITL", "TPOT", "TTFT", "ClientLag"]


class TTFT(Metric):
    """Time to first token: arrival of the first content or tool-call chunk − send, in ms."""

    tag = "ttft_ms"
    header = "TTFT"
    unit = "ms"
    stats = ("p50", "p90", "p99", "mean")

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return distribution(r.ttft_ns / 1e6 for r in ctx.measured_ok if r.ttft_ns is not None)


class TPOT(Metric):
    """Time per output token: (E2E − TTFT) / (output tokens − 1), in ms; output tokens are the
    server-reported completion tokens (the pinned length when not reported); requests with
    fewer than two output tokens are skipped."""

    tag = "tpot_ms"
    header = "TPOT"
    unit = "ms"
    stats = ("p50", "p99")

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        vals = (r.tpot_ns for r in ctx.measured_ok)
        return distribution(v / 1e6 for v in vals if v is not None)


class ITL(Metric):
    """Inter-token latency, pooled: every gap between consecutive content-chunk arrivals of
    every successful measured request, in ms."""

    tag = "itl_ms"
    header = "ITL"
    unit = "ms"
    stats = ("p50", "p99")

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return distribution(g / 1e6 for r in ctx.measured_ok for g in r.itl_ns)


class E2E(Metric):
    """End-to-end request latency: stream end − send, in ms."""

    tag = "e2e_ms"
    header = "E2E"
    unit = "ms"
    stats = ("p50", "p99")

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return distribution(r.e2e_ns / 1e6 for r in ctx.measured_ok)


class ClientLag(Metric):
    """How late the client sent: actual send − scheduled send, in ms, over every request
    except warm-up (failed ones included: lag is the client's, not the server's)."""

    tag = "client_lag_ms"
    header = "client lag"
    unit = "ms"
    stats = ("p99",)

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return distribution(r.lag_ns / 1e6 for r in ctx.requests if r.phase != Phase.WARMUP)
