"""``--repeat R``: every point run R times, each headline metric's mean and 95% t interval per
load in results.json and the summary, and ``compare`` saying whether two systems differ by
more than the intervals; ``compare`` of two capacity answers by their brackets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from replay_servers import timed_serve
from replay_traces import linear_trace

from agentload.measure.capacity import Capacity
from agentload.measure.compare import capacity_lines, compare_results
from agentload.measure.repeats import Interval, apart, mean_interval
from agentload.measure.results import ResultsDocument, load_results


def test_the_interval_is_students_t() -> None:
    iv = mean_interval([10.0, 12.0, 14.0])
    assert iv is not None and iv.mean == 12.0 and iv.n == 3
    # s = 2, t(0.975, 2) = 4.303: 12 ± 4.303 · 2 / √3
    assert iv.half == pytest.approx(4.303 * 2 / 3**0.5)
    one = mean_interval([5.0])
    assert one is not None and (one.low, one.high) == (5.0, 5.0)
    assert mean_interval([]) is None
    assert apart(Interval(n=2, mean=1, low=0, high=2, values=[]),
                 Interval(n=2, mean=4, low=3, high=5, values=[]))  # fmt: skip
    assert not apart(Interval(n=2, mean=1, low=0, high=3, values=[]),
                     Interval(n=2, mean=4, low=2.5, high=5, values=[]))  # fmt: skip


def _replay(url: str, trace: Path, out: Path) -> ResultsDocument:
    argv = [sys.executable, "-m", "agentload", "replay", str(trace), "--endpoint", url]
    argv += ["--model", "agentload-sim", "--concurrency", "2", "--repeat", "3"]
    argv += ["--duration", "1.5", "--gap-scale", "0", "--out", str(out)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "c=2 over 3 runs (mean ± 95% interval): output tok/s " in run.stdout
    return load_results(out)


def test_repeated_points_and_compare_across_two_systems(tmp_path: Path) -> None:
    trace = linear_trace(tmp_path / "lin.agentload.jsonl.zst", sessions=2, calls=6)
    with timed_serve(tmp_path, 200, 0.0) as slow:
        a = _replay(slow, trace, tmp_path / "a")
    with timed_serve(tmp_path, 800, 0.0) as fast:
        b = _replay(fast, trace, tmp_path / "b")
    for doc in (a, b):
        assert [p.repeat for p in doc.points] == [0, 1, 2]
        assert [p.concurrency for p in doc.points] == [2, 2, 2]
        (g,) = doc.repeats or []
        assert g.load == "c=2" and g.points == [0, 1, 2]
        tpot = g.metrics["tpot_p50_ms"]
        assert tpot.n == 3 and tpot.low <= tpot.mean <= tpot.high
        assert tpot.values == [p.aggregates.tpot_ms.p50 for p in doc.points if p.aggregates.tpot_ms]
    lines, same = compare_results(a, b)
    assert same  # the same trace, byte for byte
    text = "\n".join(lines)
    assert "point c=2 (3 and 3 runs; mean ± 95% interval):" in text
    tpot_line = next(x for x in lines if x.strip().startswith("tpot_p50_ms"))
    assert tpot_line.endswith("larger than the intervals"), tpot_line  # 5 ms vs 1.25 ms
    ratio = float(tpot_line.split()[-5].removesuffix("x"))
    assert 0.2 <= ratio <= 0.32, tpot_line  # 1/4, and each request's first token is free


def _cap(met: int, missed: int | None, answer: str) -> Any:
    return Capacity(max_concurrency=met, slo={"tps_user": 90.0}, percentile=90, resolution=1,
                    bracket=(met, missed), probes=[], at_capacity=None, answer=answer)  # fmt: skip


def test_compare_says_whether_two_capacities_differ_beyond_their_brackets() -> None:
    a = ResultsDocument.model_construct(capacity=_cap(11, 12, "A11"), repeats=None)
    b = ResultsDocument.model_construct(capacity=_cap(14, 15, "B14"), repeats=None)
    assert capacity_lines(a, b)[2] == "capacity: B serves more agents, beyond both brackets"
    c = ResultsDocument.model_construct(capacity=_cap(8, 16, "C8"), repeats=None)
    assert "within the search's resolution" in capacity_lines(a, c)[2]
    d = ResultsDocument.model_construct(capacity=_cap(20, None, "D20"), repeats=None)
    assert capacity_lines(d, a)[2] == "capacity: A serves more agents, beyond both brackets"
