"""Throughput over the steady-state window, per GPU and per MW."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentload.measure.metrics.base import Metric, MetricContext, per_gpu, per_mw

__all__ = [
    "OutputThroughput",
    "OutputThroughputPerGPU",
    "OutputThroughputPerMW",
    "RequestThroughput",
    "TotalThroughput",
]


class OutputThroughput(Metric):
    """Output tokens/s: Σ output tokens of successful requests whose stream ended inside the
    steady-state window [W, D] / (D − W)."""

    tag = "output_tps"
    header = "output throughput"
    unit = "tok/s"

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        s = ctx.window.seconds
        return sum(r.output_tokens for r in ctx.in_window) / s if s > 0 else None


class TotalThroughput(Metric):
    """Total tokens/s: Σ (input + output tokens) of successful requests ending inside the
    window / window seconds; input = server-reported prompt tokens (else recorded)."""

    tag = "total_tps"
    header = "total throughput"
    unit = "tok/s"

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        s = ctx.window.seconds
        if s <= 0:
            return None
        return sum(r.output_tokens + r.input_tokens for r in ctx.in_window) / s


class RequestThroughput(Metric):
    """Requests/s: successful requests ending inside the window / window seconds."""

    tag = "request_rate"
    header = "request rate"
    unit = "req/s"

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        s = ctx.window.seconds
        return len(ctx.in_window) / s if s > 0 else None


class OutputThroughputPerGPU(Metric):
    """Output tokens/s per GPU: output_tps / --gpus (None when --gpus is not given)."""

    tag = "output_tps_per_gpu"
    header = "output throughput per GPU"
    unit = "tok/s per GPU"
    requires = ("output_tps",)

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return per_gpu(deps["output_tps"], ctx)


class OutputThroughputPerMW(Metric):
    """Output tokens/s per MW: output_tps / (average power over the window in W / 10⁶);
    power from --power-watts, or NVML energy over the window with --power nvml."""

    tag = "output_tps_per_mw"
    header = "output throughput per MW"
    unit = "tok/s per MW"
    requires = ("output_tps",)

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return per_mw(deps["output_tps"], ctx)
