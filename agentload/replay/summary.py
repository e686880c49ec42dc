"""summary.csv: one row per point of a ``ResultsDocument``."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentload.replay.results import Distribution, Point, ResultsDocument

__all__ = ["SUMMARY_COLUMNS", "summary_rows", "write_summary"]


def _stat(d: Distribution | None, stat: str) -> float | None:
    return None if d is None else float(getattr(d, stat))


def _dist(tag: str, stat: str) -> Callable[[Point], Any]:
    return lambda p: _stat(getattr(p.aggregates, tag), stat)


def _value(tag: str) -> Callable[[Point], Any]:
    return lambda p: getattr(p.aggregates, tag)


SUMMARY_COLUMNS: tuple[tuple[str, Callable[[Point], Any]], ...] = (
    ("concurrency", lambda p: p.concurrency),
    ("arrival_rate", lambda p: p.arrival_rate),
    ("requests_measured", lambda p: p.aggregates.phases.measured),
    ("requests_warmup", lambda p: p.aggregates.phases.warmup),
    ("window_s", lambda p: p.window.seconds),
    ("ttft_p50_ms", _dist("ttft_ms", "p50")),
    ("ttft_p90_ms", _dist("ttft_ms", "p90")),
    ("ttft_p99_ms", _dist("ttft_ms", "p99")),
    ("ttft_mean_ms", _dist("ttft_ms", "mean")),
    ("tpot_p50_ms", _dist("tpot_ms", "p50")),
    ("tpot_p99_ms", _dist("tpot_ms", "p99")),
    ("itl_p50_ms", _dist("itl_ms", "p50")),
    ("itl_p99_ms", _dist("itl_ms", "p99")),
    ("e2e_p50_ms", _dist("e2e_ms", "p50")),
    ("e2e_p99_ms", _dist("e2e_ms", "p99")),
    ("tps_user_p50", _dist("tps_user", "p50")),
    ("tps_user_mean", _dist("tps_user", "mean")),
    ("session_latency_p50_s", _dist("session_latency_s", "p50")),
    ("jobs_per_hour", _value("jobs_per_hour")),
    ("output_tps", _value("output_tps")),
    ("total_tps", _value("total_tps")),
    ("request_rate", _value("request_rate")),
    ("output_tps_per_gpu", _value("output_tps_per_gpu")),
    ("output_tps_per_mw", _value("output_tps_per_mw")),
    ("goodput", _value("goodput")),
    ("slo_attainment", _value("slo_attainment")),
    ("errors", lambda p: sum(p.aggregates.errors.values())),
    ("context_overflow", _value("context_overflow")),
    ("length_mismatch", _value("length_mismatch")),
    ("client_lag_p99_ms", _dist("client_lag_ms", "p99")),
)


def summary_rows(results: ResultsDocument) -> list[dict[str, Any]]:
    """One row per point with the ``SUMMARY_COLUMNS``."""
    return [{name: get(p) for name, get in SUMMARY_COLUMNS} for p in results.points]


def write_summary(results: ResultsDocument, out: Path) -> Path:
    """Write ``summary.csv`` (one row per point); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[name for name, _ in SUMMARY_COLUMNS])
        w.writeheader()
        for row in summary_rows(results):
            w.writerow({k: "" if v is None else v for k, v in row.items()})
    return path
