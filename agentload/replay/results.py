"""results.json and summary.csv: write, read, and the one-row-per-point summary."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import ReplayError

__all__ = ["SUMMARY_COLUMNS", "load_results", "summary_rows", "write_results", "write_summary"]

SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("concurrency", "concurrency"),
    ("arrival_rate", "arrival_rate"),
    ("requests_measured", "phases.measured"),
    ("requests_warmup", "phases.warmup"),
    ("window_s", "window_s"),
    ("ttft_p50_ms", "ttft_ms.p50"),
    ("ttft_p90_ms", "ttft_ms.p90"),
    ("ttft_p99_ms", "ttft_ms.p99"),
    ("ttft_mean_ms", "ttft_ms.mean"),
    ("tpot_p50_ms", "tpot_ms.p50"),
    ("tpot_p99_ms", "tpot_ms.p99"),
    ("itl_p50_ms", "itl_ms.p50"),
    ("itl_p99_ms", "itl_ms.p99"),
    ("e2e_p50_ms", "e2e_ms.p50"),
    ("e2e_p99_ms", "e2e_ms.p99"),
    ("tps_user_p50", "tps_user.p50"),
    ("tps_user_mean", "tps_user.mean"),
    ("session_latency_p50_s", "session_latency_s.p50"),
    ("jobs_per_hour", "jobs_per_hour"),
    ("output_tps", "output_tps"),
    ("total_tps", "total_tps"),
    ("request_rate", "request_rate"),
    ("output_tps_per_gpu", "output_tps_per_gpu"),
    ("output_tps_per_mw", "output_tps_per_mw"),
    ("goodput", "goodput"),
    ("slo_attainment", "slo_attainment"),
    ("errors", "errors_total"),
    ("context_overflow", "context_overflow"),
    ("length_mismatch", "length_mismatch"),
    ("client_lag_p99_ms", "client_lag_ms.p99"),
)


def _get(point: dict[str, Any], path: str) -> Any:
    agg = point["aggregates"]
    if path == "concurrency" or path == "arrival_rate":
        return point.get(path)
    if path == "window_s":
        w = point["window"]
        return (w["end_ns"] - w["start_ns"]) / 1e9
    if path == "errors_total":
        return sum(agg.get("errors", {}).values())
    cur: Any = agg
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def summary_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per point with the ``SUMMARY_COLUMNS``."""
    return [{name: _get(p, path) for name, path in SUMMARY_COLUMNS} for p in results["points"]]


def write_results(results: dict[str, Any], out: Path) -> Path:
    """Write ``results.json`` into ``out`` (atomically); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    os.replace(tmp, path)
    return path


def write_summary(results: dict[str, Any], out: Path) -> Path:
    """Write ``summary.csv`` (one row per point); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[name for name, _ in SUMMARY_COLUMNS])
        w.writeheader()
        for row in summary_rows(results):
            w.writerow({k: "" if v is None else v for k, v in row.items()})
    return path


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a results.json (or the results.json inside a directory)."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        data: Any = orjson.loads(p.read_bytes())
    except FileNotFoundError:
        raise ReplayError(f"{p}: no such results file") from None
    except orjson.JSONDecodeError as exc:
        raise ReplayError(f"{p}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(
        "agentload.replay-results/"
    ):
        raise ReplayError(f"{p}: not an agentload replay results file")
    data.setdefault("_path", str(p))
    return data
