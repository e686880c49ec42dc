"""Replay against the real NVIDIA Dynamo (``--engine dynamo``): its Rust frontend, its KV-aware
router and two mocker workers (``scripts/dynamo.sh``; no GPU). A multi-agent trace generated on
the simulator (two ``quick`` sessions: orchestrators and their sub-agents) is replayed:

* through the KV router, every call is answered, the measured KV hit rate is within 0.08 of
  the trace's ideal (what each call shares with its agent's previous prompt; the tolerance is
  Dynamo's block size: it caches whole blocks of 64 tokens, so the tail of every prompt that does
  not fill a block is recomputed; measured here: 0.83 of an ideal 0.86), and ``--scrape-metrics``
  keeps the frontend's and the router's cache series and the workers' own;
* through round-robin routing over the same two workers, an agent's calls alternate between
  them and the hit rate is lower (0.69 here);
* through a disaggregated deployment (a prefill and a decode worker), every call is answered
  and results.json reports the prefill pool (TTFT) and the decode pool (ITL) apart.

``--engine dynamo`` asks each answer for the workers that served it and the server's own
timing (``nvext.extra_fields``): every measured request names its workers, the pools and
workers they make are in results.json, and the router's predicted hit rate lies within the
tolerance of the measured one. ``--modeled-server`` labels the run's timings as a model's.

The mocker's timings are a model of a server (its defaults, run 10x faster): these tests check
routing and reuse, not speed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from agentload.cli import main

pytestmark = [pytest.mark.dynamo, pytest.mark.slow]

TOLERANCE = 0.08
SPEEDUP = ["--speedup", "10"]


def _cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trace")
    argv = ["generate", "-s", "quick", "-n", "2", "-p", "2", "--sandbox", "local", "-o", str(out)]
    assert _cli(argv) == 0
    (path,) = out.glob("*.agentload.jsonl.zst")
    return path


MODELED = "Dynamo mocker workers (a model of vLLM timing, run 10x faster)"


def _replay(dynamo: Any, trace: Path, out: Path, *extra: str) -> dict[str, Any]:
    argv = ["replay", str(trace), "--endpoint", dynamo.url, "--model", dynamo.model]
    argv += ["--engine", "dynamo", "--gap-scale", "0.25", "--timeout", "60", "--out", str(out)]
    argv += ["--modeled-server", MODELED, *extra]
    assert _cli(argv) == 0
    res: dict[str, Any] = orjson.loads((out / "results.json").read_bytes())
    assert res["engine"]["name"] == "dynamo"
    (point,) = res["points"]
    bad = [(r["call"], r["status"], r["error"]) for r in point["requests"] if r["status"] != 200]
    assert bad == [] and point["aggregates"]["errors"] == {}, bad
    return res


def _pools(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The point's pools by name; every measured request named the workers that served it."""
    (point,) = res["points"]
    measured = [r for r in point["requests"] if r["phase"] == "measured"]
    assert measured and all(r["decode_worker"] and r["prefill_worker"] for r in measured)
    assert all(r["server_timing"]["ttft_ms"] > 0 for r in measured)
    return {row["pool"]: row for row in point["aggregates"]["pools"]}


def _hit_rate(res: dict[str, Any]) -> tuple[float, float]:
    rate = res["points"][0]["aggregates"]["kv_hit_rate"]
    return float(rate["measured"]), float(rate["ideal"])


def test_the_kv_router_reuses_each_agents_prefix_and_round_robin_less(
    dynamo: Any, trace: Path, tmp_path: Path
) -> None:
    kv_dep = dynamo("--workers", "2", "--router-mode", "kv", *SPEEDUP)
    kv = _replay(kv_dep, trace, tmp_path / "kv", "--scrape-metrics", kv_dep.metrics)
    measured, ideal = _hit_rate(kv)
    assert ideal > 0.5, ideal  # an agentic trace: most of each prompt was sent before
    assert ideal - TOLERANCE <= measured <= ideal + 0.02, (measured, ideal)
    rr_dep = dynamo("--workers", "2", "--router-mode", "round-robin", *SPEEDUP)
    rr = _replay(rr_dep, trace, tmp_path / "rr")
    rr_measured, rr_ideal = _hit_rate(rr)
    assert rr_ideal == pytest.approx(ideal, abs=0.02)  # the same trace, the same ideal
    assert rr_measured < measured - 0.05, (rr_measured, measured)
    # two aggregated workers served it, both named; the router's own prediction per request
    # sits beside the measured rate
    (agg,) = _pools(kv).values()
    assert agg["pool"] == "aggregated" and agg["workers"] == 2, agg
    workers = kv["points"][0]["aggregates"]["served_by"]
    assert sum(w["requests"] for w in workers) == agg["requests"]
    predicted = kv["points"][0]["aggregates"]["router_kv_hit_rate"]
    assert abs(predicted - measured) <= TOLERANCE, (predicted, measured)
    # the summary and the report say the timings are a model's
    for name in ("report.html",):
        assert "MODELED target: " + MODELED in (tmp_path / "kv" / name).read_text()
    # the frontend's, the router's and the workers' own series are scraped beside the run,
    # each labelled with the server it came from
    scrape = kv["points"][0]["scrape"]
    assert scrape["failures"] == 0 and scrape["url"] == kv_dep.metrics, scrape["url"]
    names = {k for sample in scrape["samples"] for k in sample["values"]}
    assert any(n.startswith("dynamo_component_router_kv_hit_rate") for n in names), sorted(names)
    assert any(n.startswith("dynamo_frontend_cached_tokens") for n in names), sorted(names)
    frontend, workers = (u.split("/")[2] for u in kv_dep.metrics.split(","))
    assert any(f"scrape={frontend}" in n for n in names), sorted(names)
    assert any(
        n.startswith("dynamo_component_inflight_requests") and f"scrape={workers}" in n
        for n in names
    ), sorted(names)


def test_a_disaggregated_deployment_reports_its_prefill_and_decode_pools_apart(
    dynamo: Any, trace: Path, tmp_path: Path
) -> None:
    dep = dynamo("--prefill", "1", "--decode", "1", "--router-mode", "kv", *SPEEDUP)
    res = _replay(dep, trace, tmp_path / "disagg")
    (point,) = res["points"]
    assert len(point["requests"]) >= 20
    assert all(r["completion_tokens"] == r["expected_tokens"] for r in point["requests"])
    # the prefill and the decode pool apart: one worker each, every request through both; TTFT
    # belongs to the prefill pool, inter-token latency to the decode pool
    pools = _pools(res)
    assert set(pools) == {"prefill", "decode"}, pools
    pre, dec = pools["prefill"], pools["decode"]
    assert pre["workers"] == dec["workers"] == 1 and pre["requests"] == dec["requests"]
    assert pre["ttft_p50_ms"] > 0 and pre["itl_p50_ms"] is None
    assert dec["itl_p50_ms"] > 0 and dec["ttft_p50_ms"] is None
    ids = {(r["prefill_worker"], r["decode_worker"]) for r in point["requests"]}
    assert len(ids) == 1 and len(set(next(iter(ids)))) == 2, ids
