"""Each point says how hard the client worked and whether it, not the target, was the
bottleneck (``points[].client``), and the run says so in one warning line."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_helpers import run_cli
from replay_servers import ChatServer

from agentload.measure.points import client_load
from agentload.measure.report import saturation_warning, text_summary
from agentload.measure.results import Distribution, load_results


def _lag(p99: float, n: int) -> Distribution:
    return Distribution(n=n, mean=p99 / 2, min=0.0, p50=p99 / 2, p90=p99, p99=p99, max=p99)


@pytest.mark.parametrize(
    ("cpu_s", "wall_s", "lag", "why"),
    [
        (3.5, 10.0, _lag(0.4, 500), None),
        (9.5, 10.0, _lag(0.4, 500), "its event loop was busy 95% of the time"),
        (3.5, 10.0, _lag(12.5, 500), "its sends left 12.5 ms late at p99"),
        (10.0, 10.0, None, "its event loop was busy 100% of the time"),
        (10.0, 10.0, _lag(7.0, 100),
         "its event loop was busy 100% of the time and its sends left 7.0 ms late at p99"),
        # too little to judge: a point shorter than a second, a p99 over a few requests
        (0.5, 0.5, _lag(40.0, 99), None),
        (0.0, 0.0, None, None),
    ],
)  # fmt: skip
def test_the_rule_of_a_saturated_client(
    cpu_s: float, wall_s: float, lag: Distribution | None, why: str | None
) -> None:
    got = client_load(cpu_s, wall_s, lag)
    assert (got.saturated, got.why) == (why is not None, why)
    assert got.cpu_share == (round(cpu_s / wall_s, 4) if wall_s else 0.0)
    assert got.lag_p99_ms == (lag.p99 if lag else None)


def test_a_run_records_the_clients_load_and_warns_when_it_was_saturated(
    chat_server: ChatServer,
    fast_trace: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "run"
    argv = ["replay", str(fast_trace), "--endpoint", chat_server.base_url, "--model"]
    argv += ["test-model", "--sweep", "1,2", "--sessions", "2", "--out", str(out)]
    assert run_cli(argv) == 0
    doc = load_results(out)
    for p in doc.points:
        c = p.client
        assert c is not None and 0 < c.cpu_share < 4
        assert c.lag_p99_ms == (
            p.aggregates.client_lag_ms.p99 if p.aggregates.client_lag_ms else None
        )
        # the rule itself, minimums included (a few late sends on a busy machine are not a
        # saturated client): the point's verdict is the rule's on its own figures
        again = client_load(c.cpu_share * p.wall_s, p.wall_s, p.aggregates.client_lag_ms)
        assert (c.saturated, c.why) == (again.saturated, again.why)
    # A point marked saturated is named in one warning line and flagged on its own line.
    hot = doc.points[1]
    assert hot.client is not None
    doc.points[1] = hot.model_copy(update={"client": client_load(9.7, 10.0, None)})
    doc.points[0] = doc.points[0].model_copy(update={"client": client_load(1.0, 10.0, None)})
    line = saturation_warning(doc)
    assert line == (
        "agentload: warning: the client was saturated at c=2 (its event loop was busy 97% "
        "of the time): those points measure the client as much as the target; spread the load over "
        "more processes with --ray --workers N"
    )
    lines = text_summary(doc)
    assert lines[-1].endswith("| CLIENT SATURATED (its event loop was busy 97% of the time)")
    assert "SATURATED" not in lines[-2]
