"""Replay against the built-in simulator: pinned lengths, cached tokens, KV survival, scraping."""

from __future__ import annotations

import asyncio
import html
from pathlib import Path
from typing import Any

from replay_helpers import plans_of, run_point
from replay_traces import Shape, agentic_trace

from agentload.measure.metrics import MetricContext, aggregate
from agentload.measure.report import write_report
from agentload.options.replay import ReplayConfig
from agentload.replay.run import run_replay
from agentload.replay.scrape import parse_prometheus


async def test_replay_against_the_simulator(simulator: Any, trace_path: Path) -> None:
    run, _ = await run_point(
        simulator.base_url,
        [trace_path],
        model=simulator.model,
        start_at="zero",
        sessions=2,
        concurrency=2,
    )
    assert len(run.requests) == 14 and all(r.ok for r in run.requests)
    # output length pinned: the server produced exactly the recorded completion tokens
    assert all(r.completion_tokens == r.expected_tokens == 8 for r in run.requests)
    # the simulator reports cached prompt tokens; later calls of a session hit the cache
    later = [r for r in run.requests if r.ceiling_tokens > 0]
    assert later and all(r.cached_tokens is not None for r in run.requests)
    assert sum(r.cached_tokens or 0 for r in later) > 0.5 * sum(r.ceiling_tokens for r in later)
    agg = aggregate(MetricContext(run.requests, run.sessions, run.window))
    assert agg["kv_survival"] and agg["kv_survival"][0]["bucket"] == "0-1s"
    assert agg["length_mismatch"] == 0


def test_salted_kv_survival_never_exceeds_its_ceiling(simulator: Any, tmp_path: Path) -> None:
    # replicas of two recorded sessions, salted; one tool wait long enough for the 1-5s bucket
    shape = Shape(tool_gap_s=1.1, child_gap_s=0.01, post_gap_s=0.01)
    trace = agentic_trace(tmp_path / "t.jsonl", sessions=2, shape=shape)
    cfg = ReplayConfig(
        traces=[str(trace)],
        endpoint=simulator.base_url,
        model=simulator.model,
        start_at="zero",
        levels=[2, 3],
        sessions=5,
    )
    res = asyncio.run(run_replay(cfg))
    unsalted = {c.key: c.ceiling_tokens for pl in plans_of(trace) for c in pl.calls.values()}
    for p in res.points:
        reqs = [r for r in p.requests if r.ok and r.cached_tokens is not None]
        assert len(reqs) == 5 * 7
        # every request: what the server had cached is within the ceiling, agents' first calls
        # (whose tool schemas and salt head other replicas share) included
        assert all(r.cached_tokens <= r.ceiling_tokens for r in reqs)
        assert any(r.cached_tokens > unsalted[r.call] for r in reqs if r.turn_depth == 0)
        rows = {b.bucket: b for b in p.aggregates.kv_survival}
        assert set(rows) == {"0-1s", "1-5s"}
        # the instant profile evicts nothing: everything reusable was reused, exactly
        assert all(b.ratio == 1.0 and b.mean_ratio == 1.0 for b in rows.values())
        # the simulator counts with the trace's tokenizer: our count of every prompt as sent
        # (salt line included) is the server's, request by request
        assert all(r.prompt_tokens == r.prompt_tokens_ours for r in reqs)
        assert p.aggregates.prompt_token_ratio == 1.0
        # the trace's unsalted blocks, the ceiling before, gave ratios above 1
        kv = [r for r in reqs if r.gap_ns is not None and r.ceiling_tokens > 0]
        assert sum(r.cached_tokens for r in kv) > sum(unsalted[r.call] for r in kv)
    assert res.prompt_token_ratio == 1.0


def _metrics(server: Any) -> str:
    return str(server.base_url).removesuffix("/v1") + "/metrics"


def _scraping(simulator: Any, trace: Path, urls: str) -> ReplayConfig:
    """One session of ``trace`` against the simulator from its start, scraping ``urls``."""
    return ReplayConfig(
        traces=[str(trace)],
        endpoint=simulator.base_url,
        model=simulator.model,
        start_at="zero",
        sessions=1,
        scrape_metrics=urls,
    )


async def test_run_replay_scrapes_server_metrics(
    simulator: Any, trace_path: Path, tmp_path: Path
) -> None:
    cfg = _scraping(simulator, trace_path, _metrics(simulator))
    res = await run_replay(cfg)
    scrape = res.points[0].scrape
    assert scrape is not None and scrape.failures == 0 and len(scrape.samples) >= 1
    keys = set(scrape.samples[0].values)
    assert any("waiting" in k for k in keys) and any("usage" in k for k in keys)
    # the report has a server-metrics section with every kept series, and its summary table
    # has one column per point (its ~40 metric columns as rows, so it fits the page)
    page = write_report([res], tmp_path / "report")[0].read_text()
    assert f"<h4>Server metrics ({scrape.url})</h4>" in page
    assert all(f"<td>{html.escape(k)}</td>" in page for k in keys)
    assert "<div class='wide'><table class='summary'><tr><th></th><th>c=1</th></tr>" in page


async def test_several_metrics_urls_are_scraped_into_one_sample_labelled_by_server(
    simulator: Any, trace_path: Path
) -> None:
    """``--scrape-metrics A,B,C`` (a Dynamo frontend and its workers): each second one sample
    of every server's kept series, each labelled ``scrape=HOST:PORT``; a server that does not
    answer is counted as failures while the others' samples go on."""
    from agentload.endpoint.server import SimulatorServer

    with SimulatorServer("instant") as other:
        urls = [_metrics(simulator), _metrics(other)]
        cfg = _scraping(simulator, trace_path, ",".join([*urls, "http://127.0.0.1:9/metrics"]))
        res = await run_replay(cfg)
    scrape = res.points[0].scrape
    assert scrape is not None and scrape.samples and scrape.failures >= len(scrape.samples)
    assert scrape.url == cfg.scrape_metrics
    keys = {k for sample in scrape.samples for k in sample.values}
    hosts = [u.split("/")[2] for u in urls]
    assert all(any(f"scrape={h}" in k for h in hosts) for k in keys), sorted(keys)
    for h in hosts:
        assert any(f"scrape={h}" in k and "waiting" in k for k in keys), (h, sorted(keys))


def test_parse_prometheus_keeps_the_useful_series() -> None:
    text = (
        "# HELP vllm:num_requests_waiting waiting\n# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{model_name="m"} 3.0\n'
        "# HELP http_requests_total all\n# TYPE http_requests_total counter\n"
        "http_requests_total 10\n"
    )
    assert parse_prometheus(text) == {"vllm:num_requests_waiting{model_name=m}": 3.0}
