"""Solved tasks: the metrics of a live ``agentload eval`` run, whose sessions carry the result
of their success check (``SessionResult.eval_passed``). They are ``optional``: None, and left
out of the outputs, for runs whose sessions were not checked (every replay)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentload.measure.metrics.base import Metric, MetricContext, per_gpu, per_mw

__all__ = ["PassRate", "SolvedTasksPerHour", "SolvedTasksPerHourPerGPU", "SolvedTasksPerHourPerMW"]


class PassRate(Metric):
    """Pass rate: sessions whose success check passed / sessions that were checked."""

    tag = "pass_rate"
    header = "pass rate"
    unit = "fraction"
    optional = True

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        checked = [s.eval_passed for s in ctx.sessions if s.eval_passed is not None]
        return sum(checked) / len(checked) if checked else None


class SolvedTasksPerHour(Metric):
    """Solved tasks per hour: sessions whose success check passed and whose end lies in the
    steady-state window / window seconds × 3600 (jobs per hour, counting only solved ones)."""

    tag = "solved_per_hour"
    header = "solved tasks"
    unit = "per hour"
    optional = True

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        w = ctx.window
        if w.seconds <= 0 or all(s.eval_passed is None for s in ctx.sessions):
            return None
        n = sum(1 for s in ctx.sessions if s.eval_passed and w.start_ns <= s.end_ns <= w.end_ns)
        return n / w.seconds * 3600


class SolvedTasksPerHourPerGPU(Metric):
    """Solved tasks per hour per GPU: solved_per_hour / --gpus (None without --gpus)."""

    tag = "solved_per_hour_per_gpu"
    header = "solved tasks per GPU"
    unit = "per hour"
    requires = ("solved_per_hour",)
    optional = True

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return per_gpu(deps["solved_per_hour"], ctx)


class SolvedTasksPerHourPerMW(Metric):
    """Solved tasks per hour per MW: solved_per_hour / (average power over the window in W
    / 10⁶), power as for output_tps_per_mw."""

    tag = "solved_per_hour_per_mw"
    header = "solved tasks per MW"
    unit = "per hour"
    requires = ("solved_per_hour",)
    optional = True

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return per_mw(deps["solved_per_hour"], ctx)
