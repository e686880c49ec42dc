"""Per-session (per-user, per-job) metrics."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from agentload.intervals import union_ns
from agentload.measure.metrics.base import Metric, MetricContext, distribution
from agentload.measure.records import RequestRecord

__all__ = ["JobsPerHour", "SessionLatency", "TokensPerSecondPerUser", "serving_ns"]


def serving_ns(requests: list[RequestRecord]) -> int:
    """Length of the union of the requests' ``[send, end]`` intervals: the time the session
    had at least one request being served (tool waits, during which none is, excluded)."""
    return union_ns((r.send_ns, r.end_ns) for r in requests)


class TokensPerSecondPerUser(Metric):
    """Output tokens/s per user: for each session, Σ output tokens of its successful measured
    requests / the time it had a request being served (union of their [send, end]; tool waits
    excluded); distribution over sessions."""

    tag = "tps_user"
    header = "output tokens/s per user"
    unit = "tok/s"
    stats = ("p50", "mean")

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        by: dict[int, list[RequestRecord]] = defaultdict(list)
        for r in ctx.measured_ok:
            by[r.session].append(r)
        vals = []
        for reqs in by.values():
            t = serving_ns(reqs)
            if t > 0:
                vals.append(sum(r.output_tokens for r in reqs) / (t / 1e9))
        return distribution(vals)


class SessionLatency(Metric):
    """Session (job) latency: end − start of every session replayed completely from its first
    call (mid-flight joiners and sessions cut by the run's end are left out), in s."""

    tag = "session_latency_s"
    header = "session latency"
    unit = "s"
    stats = ("p50",)

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return distribution(
            (s.end_ns - s.start_ns) / 1e9
            for s in ctx.sessions
            if s.complete and s.joined_at_ns is None
        )


class JobsPerHour(Metric):
    """Jobs per hour: complete sessions whose end lies in the steady-state window
    / window seconds × 3600."""

    tag = "jobs_per_hour"
    header = "jobs"
    unit = "per hour"

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        w = ctx.window
        if w.seconds <= 0:
            return None
        n = sum(1 for s in ctx.sessions if s.complete and w.start_ns <= s.end_ns <= w.end_ns)
        return n / w.seconds * 3600
