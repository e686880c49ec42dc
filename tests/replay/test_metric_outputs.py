"""Metric metadata drives the outputs: a metric class registered here (no other file touched)
is computed, written to results.json and shown in summary.csv and in the report, also when
the report is rebuilt from results.json."""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from replay_helpers import run_cli
from replay_servers import ChatServer

from agentload.measure import metrics
from agentload.measure.metrics import Metric, MetricContext, distribution


class CachedShare(Metric):
    """Cached share of the prompt: Σ server-reported cached tokens / Σ prompt tokens over the
    successful measured requests."""

    tag = "cached_share"
    header = "cached prompt share"
    unit = "fraction"

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        prompt = sum(r.input_tokens for r in ctx.measured_ok)
        return sum(r.cached_tokens or 0 for r in ctx.measured_ok) / prompt if prompt else None


class TTFTShare(Metric):
    """TTFT / E2E of every successful measured request."""

    tag = "ttft_share"
    header = "TTFT share of E2E"
    stats = ("p50", "max")

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        return distribution(
            r.ttft_ns / r.e2e_ns for r in ctx.measured_ok if r.ttft_ns is not None and r.e2e_ns
        )


class RequestsPerAgent(Metric):
    """Requests sent per recorded agent, warm-up included."""

    tag = "per_agent"
    header = "requests per agent"
    row_columns = (("agent", "recorded agent"), ("requests", "requests sent"))

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        n = Counter(r.agent for r in ctx.requests)
        return [{"agent": a, "requests": n[a]} for a in sorted(n)]


@pytest.fixture
def extra_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "METRICS", metrics.METRICS)  # the registry comes back after
    for m in (CachedShare, TTFTShare, RequestsPerAgent):
        metrics.register(m)


def test_a_registered_metric_reaches_every_output(
    extra_metrics: None, chat_server: ChatServer, fast_trace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    argv = ["replay", str(fast_trace), "--endpoint", chat_server.base_url, "--model"]
    argv += ["test-model", "--start-at", "zero", "--sessions", "2", "--out", str(out)]
    assert run_cli(argv) == 0
    (point,) = orjson.loads((out / "results.json").read_bytes())["points"]
    agg = point["aggregates"]
    # computed from the records, as the class says
    ok = [r for r in point["requests"] if r["phase"] == "measured" and r["error_kind"] is None]
    prompt = sum(r["prompt_tokens"] or r["recorded_prompt_tokens"] for r in ok)
    share = sum(r["cached_tokens"] or 0 for r in ok) / prompt
    assert agg["cached_share"] == pytest.approx(share) and 0 < share < 1
    assert agg["ttft_share"]["n"] == len(ok) and 0 < agg["ttft_share"]["max"] <= 1
    agents = Counter(r["agent"] for r in point["requests"])
    assert agg["per_agent"] == [{"agent": a, "requests": agents[a]} for a in sorted(agents)]
    # summary.csv: their columns, after the built-in ones, with the values of results.json
    with (out / "summary.csv").open() as f:
        reader = csv.DictReader(f)
        (row,) = list(reader)
    assert reader.fieldnames is not None
    assert reader.fieldnames[-3:] == ["cached_share", "ttft_share_p50", "ttft_share_max"]
    assert float(row["cached_share"]) == pytest.approx(share)
    assert float(row["ttft_share_max"]) == pytest.approx(agg["ttft_share"]["max"])
    # the report (written by the run, and rebuilt from results.json): headers from metadata
    rebuilt = tmp_path / "rebuilt"
    assert run_cli(["report", str(out), "--out", str(rebuilt)]) == 0
    for html in ((out / "report.html").read_text(), (rebuilt / "report.html").read_text()):
        # the summary table: a row per column, a column per point
        assert f"<tr><td>cached prompt share (fraction)</td><td>{share:,.2f}</td></tr>" in html
        assert "<tr><td>TTFT share of E2E p50</td>" in html
        assert "<tr><td>TTFT share of E2E max</td>" in html
        table = html.split("<h4>requests per agent</h4>", 1)[1].split("</table>", 1)[0]
        assert "<th>recorded agent</th><th>requests sent</th>" in table
        for a in agents:
            assert f"<td>{a}</td><td>{agents[a]}</td>" in table


def test_register_refuses_a_second_metric_with_the_same_tag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metrics, "METRICS", metrics.METRICS)

    class Again(CachedShare):
        tag = "ttft_ms"

    with pytest.raises(ValueError, match="'ttft_ms' is already registered"):
        metrics.register(Again)
    assert metrics.registry() == metrics.METRICS and Again not in metrics.registry()
