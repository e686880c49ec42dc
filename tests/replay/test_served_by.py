"""Who served each request, read from the answer's ``nvext`` (Dynamo's ``worker_id`` and
``timing``, asked for by ``--engine dynamo``), and the pools and workers it makes. The real
Dynamo is the test of the shape (tests/dynamo/test_replay.py: aggregated and disaggregated
deployments); here a server sends what Dynamo 1.6.1 sends and the deviations it may: ids past
2^53, a data-parallel rank, a timing field that is not a number, a worker object without ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay_helpers import run_point
from replay_servers import Behaviour

from agentload.measure.metrics import MetricContext, aggregate
from agentload.measure.records import Phase

BIG = 13167829956418366887  # a u64 Dynamo sent (past 2^53: a float would round it)


async def _served(make_server: Any, trace: Path, nvext: dict[str, Any]) -> tuple[list[Any], Any]:
    srv = make_server(Behaviour(nvext=nvext))
    run, _ = await run_point(srv.base_url, [trace], start_at="zero", sessions=1, engine="dynamo")
    return run.requests, run


def _aggregates(run: Any) -> dict[str, Any]:
    for r in run.requests:
        r.phase = Phase.MEASURED
    return aggregate(MetricContext(run.requests, run.sessions, run.window))


async def test_an_aggregated_worker_is_named_exactly_and_its_timing_kept(
    make_server: Any, trace_path: Path
) -> None:
    timing = {"ttft_ms": 12.5, "kv_hit_rate": 0.75, "note": "fast", "queued": True}
    ids = {"prefill_worker_id": BIG, "prefill_dp_rank": 0, "decode_worker_id": BIG}
    reqs, run = await _served(make_server, trace_path, {"worker_id": ids, "timing": timing})
    assert reqs and all(r.prefill_worker == r.decode_worker == str(BIG) for r in reqs)
    # numbers kept, anything else (text, a boolean) left out
    assert all(r.server_timing == {"ttft_ms": 12.5, "kv_hit_rate": 0.75} for r in reqs)
    agg = _aggregates(run)
    (pool,) = agg["pools"]
    assert (pool["pool"], pool["workers"], pool["requests"]) == ("aggregated", 1, len(reqs))
    assert pool["ttft_p50_ms"] > 0 and pool["itl_p50_ms"] is not None
    assert agg["router_kv_hit_rate"] == 0.75
    assert [w["worker"] for w in agg["served_by"]] == [str(BIG)]


async def test_disaggregated_workers_make_two_pools_and_a_rank_is_its_own_worker(
    make_server: Any, trace_path: Path
) -> None:
    ids = {"prefill_worker_id": 7, "decode_worker_id": BIG, "decode_dp_rank": 2}
    reqs, run = await _served(make_server, trace_path, {"worker_id": ids})
    assert all((r.prefill_worker, r.decode_worker) == ("7", f"{BIG}/2") for r in reqs)
    assert all(r.server_timing is None for r in reqs)
    agg = _aggregates(run)
    pools = {p["pool"]: p for p in agg["pools"]}
    assert set(pools) == {"prefill", "decode"}
    assert pools["prefill"]["itl_p50_ms"] is None and pools["prefill"]["ttft_p50_ms"] > 0
    assert pools["decode"]["ttft_p50_ms"] is None and pools["decode"]["itl_p50_ms"] is not None
    assert "router_kv_hit_rate" not in agg  # no prediction reported: left out, not 0


async def test_an_answer_naming_no_worker_leaves_no_pools(
    make_server: Any, trace_path: Path
) -> None:
    reqs, run = await _served(make_server, trace_path, {"worker_id": {"decode_worker_id": -1}})
    assert all(r.decode_worker is None and r.prefill_worker is None for r in reqs)
    agg = _aggregates(run)
    assert "pools" not in agg and "served_by" not in agg
