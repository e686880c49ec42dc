"""Metric formulas, exactly, on hand-made timelines (all times in ns)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from agentload.measure.metrics import (
    SLO,
    Metric,
    MetricContext,
    aggregate,
    compute_all,
    serving_ns,
)
from agentload.measure.pareto import frontier, headline
from agentload.measure.records import RequestRecord, SessionResult, Window
from agentload.quantiles import percentile

MS = 1_000_000
S = 1_000_000_000


def req(
    session: int, send: int, first: int | None, end: int, out: int = 5, **kw: Any
) -> RequestRecord:
    chunks = kw.pop("chunks", None)
    base: dict[str, Any] = dict(
        session=session,
        source="s",
        agent=f"a{session}",
        call=f"c{send}",
        seq=kw.pop("seq", 1),
        turn_depth=kw.pop("depth", 1),
        phase=kw.pop("phase", "measured"),
        digest="d",
        scheduled_ns=kw.pop("scheduled", send),
        send_ns=send,
        end_ns=end,
        first_ns=first,
        completion_tokens=out,
        expected_tokens=out,
        prompt_tokens=kw.pop("prompt", 1000),
    )
    base.update(kw)
    r = RequestRecord(**base)
    if chunks is not None:
        r.itl_ns = [b - a for a, b in itertools.pairwise(chunks)]
    return r


def sess(
    i: int, start: int, end: int, complete: bool = True, joined: int | None = None
) -> SessionResult:
    return SessionResult(i, "s", 0, start, end, joined, complete, 1, 0)


@pytest.fixture
def ctx() -> MetricContext:
    reqs = [
        # session 0: two sequential requests with a tool wait between them
        req(
            0,
            0,
            100 * MS,
            500 * MS,
            out=5,
            chunks=[100 * MS, 200 * MS, 300 * MS, 400 * MS, 500 * MS],
        ),
        req(
            0,
            2 * S,
            2 * S + 200 * MS,
            3 * S,
            out=9,
            cached_tokens=600,
            ceiling_tokens=800,
            gap_ns=1500 * MS,
        ),
        # session 1: two overlapping requests (parallel sub-agents)
        req(
            1,
            1 * S,
            1 * S + 50 * MS,
            2 * S,
            out=11,
            cached_tokens=100,
            ceiling_tokens=400,
            gap_ns=200 * MS,
            scheduled=1 * S - 4 * MS,
        ),
        req(1, 1500 * MS, 1600 * MS, 2500 * MS, out=1, prompt=70_000),
        # a failure and a warm-up request: never in latency percentiles
        req(1, 2600 * MS, None, 2700 * MS, out=0, error_kind="http_500", status=500),
        req(2, 0, 10 * MS, 20 * MS, phase="warmup"),
    ]
    sessions = [sess(0, 0, 3 * S), sess(1, 1 * S, 2700 * MS, joined=5), sess(2, 0, 20 * MS, False)]
    return MetricContext(
        reqs,
        sessions,
        Window(0, 4 * S, "test"),
        gpus=2,
        power_watts=500.0,
        slo=SLO(ttft_ns=150 * MS, tpot_ns=200 * MS),
    )


def test_percentile_is_linear_between_ranks() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0, 20.0], 99) == pytest.approx(19.9)
    assert percentile([7.0], 90) == 7.0


def test_request_latencies(ctx: MetricContext) -> None:
    v = aggregate(ctx)
    assert v["ttft_ms"]["n"] == 4
    assert v["ttft_ms"]["mean"] == pytest.approx((100 + 200 + 50 + 100) / 4)
    assert v["ttft_ms"]["p50"] == pytest.approx(100.0)
    # TPOT = (E2E - TTFT) / (out - 1); the 1-token request is skipped
    assert sorted([v["tpot_ms"]["min"], v["tpot_ms"]["max"]]) == [95.0, 100.0]
    assert v["tpot_ms"]["n"] == 3 and v["tpot_ms"]["p50"] == pytest.approx(100.0)
    assert v["itl_ms"] == {
        "n": 4,
        "mean": 100.0,
        "min": 100.0,
        "p50": 100.0,
        "p90": 100.0,
        "p99": 100.0,
        "max": 100.0,
    }
    assert v["e2e_ms"]["max"] == 1000.0 and v["e2e_ms"]["min"] == 500.0
    assert v["client_lag_ms"]["max"] == pytest.approx(4.0)


def test_per_user_tokens_exclude_tool_waits(ctx: MetricContext) -> None:
    # session 0: 14 tokens over 0.5 s + 1.0 s of serving = 1.5 s; session 1: 12 tokens over
    # the union [1.0, 2.5] = 1.5 s
    assert serving_ns(ctx.measured_ok[2:4]) == 1500 * MS
    v = aggregate(ctx)["tps_user"]
    assert v["n"] == 2
    assert sorted([v["min"], v["max"]]) == pytest.approx([12 / 1.5, 14 / 1.5])


def test_throughput_and_jobs_over_the_window(ctx: MetricContext) -> None:
    v = aggregate(ctx)
    # successful requests ending in [0, 4 s] (the warm-up one included): 5+9+11+1+5 tokens
    assert v["output_tps"] == pytest.approx(31 / 4)
    assert v["total_tps"] == pytest.approx((31 + 4 * 1000 + 70_000) / 4)
    assert v["request_rate"] == pytest.approx(5 / 4)
    assert v["output_tps_per_gpu"] == pytest.approx(31 / 4 / 2)
    assert v["output_tps_per_mw"] == pytest.approx(31 / 4 / 500e-6)
    assert v["jobs_per_hour"] == pytest.approx(2 / 4 * 3600)
    assert v["session_latency_s"]["n"] == 1 and v["session_latency_s"]["p50"] == 3.0


def test_goodput_and_slo_attainment(ctx: MetricContext) -> None:
    v = aggregate(ctx)
    # meeting ttft<=150ms and tpot<=200ms: c0 (100ms,100), c1500 (100ms, n/a), c1000 (50ms,95);
    # c2000 has TTFT 200ms; the failure misses; the warm-up one meets it but is not measured
    assert v["slo_attainment"] == pytest.approx(3 / 5)
    assert v["goodput"] == pytest.approx(4 / 4)


def test_kv_survival_by_gap_bucket(ctx: MetricContext) -> None:
    rows = {r["bucket"]: r for r in aggregate(ctx)["kv_survival"]}
    assert set(rows) == {"0-1s", "1-5s"}
    assert rows["1-5s"]["ratio"] == 600 / 800 and rows["1-5s"]["n"] == 1
    assert rows["0-1s"]["ratio"] == 100 / 400


def test_kv_hit_rate_of_the_point_and_per_session(ctx: MetricContext) -> None:
    v = aggregate(ctx)
    # the requests with a cached count: session 0's second (600 of 1000, ceiling 800) and
    # session 1's first (100 of 1000, ceiling 400); prompts in the server's tokens
    assert v["kv_hit_rate"] == {"n": 2, "measured": 700 / 2000, "ideal": 1200 / 2000}
    per = v["session_kv_hit_rate"]
    assert per["n"] == 2 and per["min"] == 0.1 and per["max"] == 0.6
    assert per["p50"] == pytest.approx(0.35)
    none = MetricContext([req(0, 0, MS, 2 * MS)], [], Window(0, S, "t"))
    assert aggregate(none)["kv_hit_rate"] is None and aggregate(none)["session_kv_hit_rate"] is None


def test_errors_phases_and_groups(ctx: MetricContext) -> None:
    v = aggregate(ctx)
    assert v["errors"] == {"http_500": 1} and v["context_overflow"] == 0
    assert v["phases"] == {"warmup": 1, "ramp": 0, "measured": 5, "drain": 0}
    assert set(v["by_band"]) == {"0-64K", "64-128K"}
    assert v["by_band"]["64-128K"]["requests"] == 1
    assert v["by_depth"]["1-3"]["requests"] == 5 and v["by_depth"]["1-3"]["failed"] == 1


def test_metrics_run_in_dependency_order() -> None:
    seen: list[str] = []

    class B(Metric):
        """b = a + 1"""

        tag, header, requires = "b", "b", ("a",)

        def compute(self, ctx: MetricContext, deps: Any) -> Any:
            seen.append("b")
            return deps["a"] + 1

    class A(Metric):
        """a = 1"""

        tag, header = "a", "a"

        def compute(self, ctx: MetricContext, deps: Any) -> Any:
            seen.append("a")
            return 1

    out = compute_all(MetricContext([], [], Window(0, 1, "")), [B, A])
    assert out == {"a": 1, "b": 2} and seen == ["a", "b"]


def test_pareto_headline_interpolates_on_the_frontier() -> None:
    pts = [(200.0, 100.0, 1), (150.0, 300.0, 2), (100.0, 500.0, 4), (90.0, 400.0, 8)]
    assert [p[2] for p in frontier(pts)] == [4, 2, 1]  # (90, 400) is dominated
    h = headline(pts, 160.0, "tok/s/GPU")
    assert h.value == pytest.approx(300 + (100 - 300) * (10 / 50))
    assert headline(pts, 50.0, "u").value == 500.0
    none = headline(pts, 250.0, "u")
    assert none.value is None and "No point reached 250" in none.text


def test_kv_survival_divides_server_tokens_by_a_ceiling_in_server_tokens() -> None:
    # a server whose tokenizer counts 2 tokens where ours counts 1: it reports 2000 prompt and
    # 1200 cached tokens for a prompt of 1000 of ours, 800 of them reusable (1600 of its own)
    kv: dict[str, Any] = {"ceiling_tokens": 800, "gap_ns": 10 * MS}
    small: dict[str, Any] = {"ceiling_tokens": 400, "gap_ns": 10 * MS}
    reqs = [
        req(0, 0, MS, 2 * MS, prompt=2000, prompt_tokens_ours=1000, cached_tokens=1200, **kv),
        # no server prompt count: the ceiling is used as counted (ours by ours)
        req(1, 0, MS, 2 * MS, prompt=None, prompt_tokens_ours=1000, cached_tokens=300, **small),
    ]
    v = aggregate(MetricContext(reqs, [], Window(0, S, "test")))
    (row,) = v["kv_survival"]
    assert row["ceiling_tokens"] == 1200 and row["ceiling_tokens_server"] == 1600 + 400
    assert row["ratio"] == (1200 + 300) / (1600 + 400)  # not 1500 / 1200 = 1.25
    assert row["mean_ratio"] == (1200 / 1600 + 300 / 400) / 2
    # the run's server/ours prompt-token ratio, from the requests that have both counts
    assert v["prompt_token_ratio"] == 2.0
