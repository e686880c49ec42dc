"""``replay --capacity``: the search, the percentile intervals and the steady-state rule, proven
against ``agentload serve`` with a timed profile whose capacity follows from its parameters.

The profile decodes one sequence at D tokens/s and each of N running at D / (1 + d(N − 1));
every lane of a trace of single-agent sessions with no waits keeps one sequence running, so
at concurrency C a request decodes at about D / (1 + d(C − 1)) tokens/s, and the largest C
that keeps tokens/s per user at or above T is ⌊1 + (D/T − 1)/d⌋."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from replay_servers import timed_serve
from replay_traces import linear_trace

from agentload.measure import binomial
from agentload.measure.capacity import (
    Sample,
    Stop,
    Verdict,
    check_objectives,
    interval,
    judge,
    samples,
)
from agentload.measure.records import Phase, RequestRecord
from agentload.measure.search import CapacitySearch
from agentload.measure.steady import Look, Pending, Sequential, SteadyRule
from agentload.options.slo import Objective, parse_slo

D, DEG, T = 400.0, 0.25, 90.0
"""The profile's decode rate and degradation, and the test's tokens/s per user."""


def capacity_of_profile() -> int:
    return math.floor(1 + (D / T - 1) / DEG)


def doubling_then_linear(c: int) -> int:
    """Probes of a doubling sweep to the first miss, then a linear scan of the bracket up
    from its lower end to the first miss (resolution 1)."""
    low = 1 << int(math.log2(c))
    return int(math.log2(c)) + 2 + (c - low + 1)


@pytest.fixture
def timed(tmp_path: Path) -> Iterator[str]:
    with timed_serve(tmp_path, D, DEG) as url:
        yield url


@pytest.mark.parametrize("method", ["ramp", "probes"])
def test_the_search_finds_the_profiles_capacity_in_fewer_probes(
    timed: str, tmp_path: Path, method: str
) -> None:
    """Both ways of searching: one run whose lanes the search moves (a ramp, then full probes)
    and a point per probe; the same answer, within the resolution of 1."""
    trace = linear_trace(tmp_path / "lin.agentload.jsonl.zst", sessions=4, calls=8)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "agentload", "replay", str(trace), "--endpoint", timed]
    argv += ["--model", "agentload-sim", "--capacity", "--slo", f"tps_user={T:g}", "--gpus", "2"]
    argv += ["--capacity-resolution", "1", "--gap-scale", "0", "--out", str(out)]
    argv += ["--capacity-search", method]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = orjson.loads((out / "results.json").read_bytes())
    cap = doc["capacity"]
    assert cap["search"] == method and cap["elapsed_s"] > 0
    expected = capacity_of_profile()
    found = cap["max_concurrency"]
    assert found is not None and abs(found - expected) <= cap["resolution"] == 1, cap["answer"]
    assert len(cap["probes"]) < doubling_then_linear(expected), [
        p["concurrency"] for p in cap["probes"]
    ]
    assert [p["concurrency"] for p in cap["probes"]][:4] == [1, 2, 4, 8]  # the doubling
    assert [p["ramp"] for p in cap["probes"]][:4] == [method == "ramp"] * 4
    low, high = cap["bracket"]
    assert low == found and high is not None and high - low <= 1
    full = [p for p in cap["probes"] if not p["ramp"]]
    assert {found, found + 1} <= {p["concurrency"] for p in full}  # both ends: full probes
    for p in cap["probes"]:
        (check,) = p["checks"]
        assert check["objective"] == "tps_user" and check["quantile"] == pytest.approx(0.1)
        if not p["ramp"]:
            assert check["low"] <= check["estimate"] <= check["high"]
            assert p["met"] == (p["concurrency"] <= found)
        (index,) = p["points"]
        point = doc["points"][index]
        assert point["concurrency"] == p["concurrency"]
        assert point["window"]["end_ns"] > point["window"]["start_ns"]
        assert point["warmup_window"]["end_ns"] == point["window"]["start_ns"]
    at = cap["at_capacity"]
    assert at["agents"] == found and at["agents_per_gpu"] == found / 2
    assert at["decode_tps_user_p50"] >= T and at["output_tps_per_gpu"] > 0
    assert doc["config"]["duration_s"] == 300  # the default cap of a probe
    # The terminal's first line is the answer.
    first = run.stdout.splitlines()[0]
    assert first == cap["answer"]
    assert first.startswith(f"Serves {found} agents at p90 ≥ {T:g} tok/s/user: ")
    assert f"{found / 2:,.1f} agents/GPU" in first
    assert run.stderr.count("agentload: capacity probe ") == len(cap["probes"])


def _rec(i: int, ttft_ms: float, ok: bool = True) -> RequestRecord:
    send = i * 10**9
    first = send + int(ttft_ms * 1e6)
    return RequestRecord(
        session=0, source="s", agent="a", call=f"c{i}", seq=i, turn_depth=i,
        phase=Phase.MEASURED, digest="d", scheduled_ns=send, send_ns=send,
        end_ns=first + 10**8, first_ns=first, status=200 if ok else 500,
        error_kind=None if ok else "http", error=None if ok else "boom",
        prompt_tokens=10, completion_tokens=11, cached_tokens=0, expected_tokens=11,
        recorded_prompt_tokens=10, prompt_tokens_ours=10, mismatch=False,
        ceiling_tokens=0, within_ceiling_tokens=0, gap_ns=None, recorded_gap_ns=None,
        finish_reason="stop", itl_ns=[],
    )  # fmt: skip


def test_the_percentile_interval_is_distribution_free_order_statistics() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    est, low, high = interval(values, 0.9)

    def at_least(u: int, n: int = 100, q: float = 0.9) -> float:  # P(Bin(n, q) ≥ u)
        return sum(math.comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(u, n + 1))

    # one-sided 95% bounds: the smallest u with P(Bin ≥ u) ≤ 5%, the largest l with
    # P(Bin ≤ l − 1) ≤ 5%
    assert (est, low, high) == (pytest.approx(90.1), 85.0, 96.0)
    assert at_least(96) <= 0.05 < at_least(95)
    assert 1 - at_least(85) <= 0.05 < 1 - at_least(86)
    assert interval(values[:5], 0.9)[2] is None  # too few to bound the top
    # 29 requests all under a p90 threshold bound it (0.9^29 < 5%); 28 do not
    assert interval(values[:29], 0.9)[2] == 29.0 and interval(values[:28], 0.9)[2] is None
    assert interval([], 0.5) == (None, None, None)
    # TTFT at p90 with a 2 s threshold: 100 requests, all fast → pass; all slow → fail.
    fast = [_rec(i, 100.0) for i in range(100)]
    (c,) = check_objectives(fast, {"ttft_ns": 2 * 10**9}, 90)
    assert c.verdict == "pass" and c.threshold == 2000.0 and c.unit == "ms"
    slow = [_rec(i, 3000.0) for i in range(100)]
    assert check_objectives(slow, {"ttft_ns": 2 * 10**9}, 90)[0].verdict == "fail"
    # Straddling: the p90 sits at the threshold, its interval on both sides.
    mixed = [_rec(i, 1000.0 + 20.0 * i) for i in range(100)]
    (m,) = check_objectives(mixed, {"ttft_ns": int(2.8 * 10**9)}, 90)
    assert m.verdict == "uncertain" and m.low is not None and m.low < 2800 < (m.high or 0)
    # A failed request is a miss: the worst value of every objective.
    failed = [_rec(i, 100.0, ok=i >= 20) for i in range(100)]
    assert samples(failed, Objective.TTFT)[-1] == math.inf
    assert samples(failed, Objective.TPS_USER)[0] == 0.0
    assert check_objectives(failed, {"ttft_ns": 2 * 10**9}, 90)[0].verdict == "fail"
    # the session objective is judged over sessions: their latencies, not the requests
    (sc,) = check_objectives(fast, {"session_ns": 60 * 10**9}, 90, [500.0 * i for i in range(100)])
    assert sc.objective == "session" and sc.n == 100 and sc.verdict == "pass"
    assert check_objectives(fast, {"session_ns": 60 * 10**9}, 90)[0].verdict == "uncertain"
    assert parse_slo("session=20m,tps_user=160") == {
        "ttft_ns": None, "tpot_ns": None, "e2e_ns": None, "tps_user": 160.0,
        "session_ns": 1_200_000_000_000,
    }  # fmt: skip
    # tokens/s per user is 1 s / TPOT: 10 tokens after the first in 100 ms → 100 tok/s
    assert samples(fast, Objective.TPS_USER)[0] == pytest.approx(100.0)


@pytest.mark.parametrize("capacity", [1, 3, 7, 11, 14, 37, 100, 1000])
def test_bisection_lands_on_the_capacity_and_beats_a_linear_scan(capacity: int) -> None:
    s = CapacitySearch(top=4096, sessions=1, share=None)
    while (level := s.next_level()) is not None:
        s.record(level, level <= capacity)
    assert s.answer == capacity
    if capacity >= 7:
        assert len(s.probes) < doubling_then_linear(capacity)
    rel = CapacitySearch(top=4096)  # 5%: stops within 5% of the lower end
    while (level := rel.next_level()) is not None:
        rel.record(level, level <= capacity)
    assert rel.answer is not None and 0 <= capacity - rel.answer <= max(1, capacity * 0.05)


@pytest.mark.parametrize("capacity", [0, 1, 3, 7, 11, 37, 100])
@pytest.mark.parametrize("ramp_error", [-2.0, 0.5, 1.0, 1.6])
def test_a_ramps_wrong_looks_are_overruled_by_full_probes(capacity: int, ramp_error: float) -> None:
    """The ramp's steps judge on a few requests, so they may err (here: a step sees a capacity
    ``ramp_error`` times the true one); the answer is still the full probes' one, and every
    level it rests on was a full probe."""
    s = CapacitySearch(top=4096, sessions=1, share=None, ramp=True)
    seen = max(0, round(capacity * ramp_error)) if ramp_error > 0 else capacity + 2
    kinds: list[bool] = []
    while (level := s.next_level()) is not None:
        kinds.append(s.full)
        s.record(level, level <= (capacity if s.full else seen), s.full)
    assert s.answer == (capacity or None), (capacity, ramp_error, s.probes)
    full = {lv: ok for (lv, ok), f in zip(s.probes, kinds, strict=True) if f}
    if capacity:
        assert full[capacity] is True
    assert full.get(capacity + 1) is False or capacity + 1 > 4096
    assert kinds[0] is False  # the ramp starts it


def test_margins_place_the_probes_near_the_answer() -> None:
    """With each level's margin (here a smooth curve: tokens/s per user of the timed profile
    against a threshold that makes ``capacity`` the answer), the climb stops doubling near the
    answer and the probes inside the bracket go where the margins cross zero: fewer probes in
    all than doubling and halving (at most two more at one capacity), the same answer."""

    def probes(capacity: int, use_margins: bool) -> tuple[int | None, int]:
        threshold = D / (1 + DEG * (capacity - 1))
        s = CapacitySearch(top=4096, sessions=1, share=None, ramp=True)
        while (level := s.next_level()) is not None:
            m = (D / (1 + DEG * (level - 1)) - threshold) / threshold
            s.record(level, level <= capacity, s.full, m if use_margins else None)
        return s.answer, len(s.probes)

    total = {True: 0, False: 0}
    for capacity in (14, 37, 90, 300, 1000):
        (with_m, n_m), (without, n) = probes(capacity, True), probes(capacity, False)
        assert with_m == without == capacity
        assert n_m <= n + 2, (capacity, n_m, n)
        total[True] += n_m
        total[False] += n
    assert total[True] < total[False], total


def test_the_search_ends_when_nothing_meets_or_the_top_is_reached() -> None:
    none = CapacitySearch(top=64)
    assert none.next_level() == 1
    none.record(1, False)
    assert none.next_level() is None and none.answer is None
    top = CapacitySearch(top=20)
    while (level := top.next_level()) is not None:
        top.record(level, True)
    assert [lv for lv, _ in top.probes] == [1, 2, 4, 8, 16, 20] and top.answer == 20


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--capacity"], "--capacity searches for the load that meets an SLO: give --slo"),
        (["--capacity", "--slo", "ttft=2s", "--sweep", "1,2"], "cannot be combined with --con"),
        (["--capacity", "--slo", "ttft=2s", "--capacity-resolution", "0"], "expected sessions"),
        (["--slo", "tps_user=fast"], "tps_user='fast': expected tokens/s per user"),
        (["--slo", "ttft=2s", "--slo-percentile", "100"], "--slo-percentile"),
        (["--capacity", "--slo", "ttft=2s", "--capacity-search", "fast"], "--capacity-search"),
        (
            ["--capacity", "--slo", "ttft=2s", "--capacity-search", "ramp", "--repeat", "2"],
            "--capacity-search ramp moves the lanes of one run on this machine",
        ),
        (
            ["--capacity", "--slo", "ttft=2s", "--duration", "30", "--capacity-min-window", "60"],
            "--capacity-min-window 60 is longer than the probe's cap, --duration 30",
        ),
    ],
)
def test_bad_capacity_options_are_one_line_and_exit_2(
    args: list[str], needle: str, tmp_path: Path
) -> None:
    trace = linear_trace(tmp_path / "t.agentload.jsonl.zst", sessions=1, calls=2)
    argv = [sys.executable, "-m", "agentload", "replay", str(trace)]
    argv += ["--endpoint", "http://127.0.0.1:9/v1", "--model", "m", *args]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("n", [30, 60, 200])
def test_requests_in_flight_count_the_worst_way_for_each_verdict(n: int) -> None:
    """A pass decided while requests are in flight holds whatever they turn out to be (they
    count as misses); a fail is judged on what completed (those in flight are the slower
    ones)."""
    fast = [100.0] * n
    slow = [9000.0] * n
    for pending in range(0, 12):
        for vals in (fast, slow, sorted(fast[: n // 2] + slow[: n // 2])):
            got = judge(vals, 0.9, 5000.0, False, pending=pending)
            as_miss = judge(sorted(vals + [math.inf] * pending), 0.9, 5000.0, False)
            plain = judge(vals, 0.9, 5000.0, False)
            assert (got is Verdict.PASS) == (as_miss is Verdict.PASS)
            assert (got is Verdict.FAIL) == (plain is Verdict.FAIL)
            # tokens/s per user: a miss is the lowest value
            tps = sorted(1e5 / v for v in vals)
            got = judge(tps, 0.1, 30.0, True, pending=pending)
            assert (got is Verdict.PASS) == (
                judge(sorted([0.0] * pending + tps), 0.1, 30.0, True) is Verdict.PASS
            )
            assert (got is Verdict.FAIL) == (judge(tps, 0.1, 30.0, True) is Verdict.FAIL)


def test_the_normal_approximation_takes_over_where_it_agrees_with_the_exact_tails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = binomial.EXACT_N + 1
    approx = [
        (binomial.upper_rank(n, q, 0.05), binomial.lower_rank(n, q, 0.05)) for q in (0.1, 0.9, 0.99)
    ]
    monkeypatch.setattr(binomial, "EXACT_N", 10**9)
    exact = [
        (binomial.upper_rank(n, q, 0.05), binomial.lower_rank(n, q, 0.05)) for q in (0.1, 0.9, 0.99)
    ]
    for (au, al), (eu, el) in zip(approx, exact, strict=True):
        assert abs(au - eu) <= 1 and abs(al - el) <= 1


def test_ctrl_c_keeps_the_probes_decided(timed: str, tmp_path: Path) -> None:
    """Ctrl-C during a search in one run: the run ends, results.json holds every probe decided
    until then (each a point), and the answer is the bracket so far."""
    trace = linear_trace(tmp_path / "lin.agentload.jsonl.zst", sessions=4, calls=8)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "agentload", "replay", str(trace), "--endpoint", timed]
    argv += ["--model", "agentload-sim", "--capacity", "--slo", f"tps_user={T:g}"]
    argv += ["--capacity-resolution", "1", "--gap-scale", "0", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("agentload: capacity probe 3 "):
            proc.send_signal(signal.SIGINT)
            break
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1, 130), "".join(seen) + err
    doc = orjson.loads((out / "results.json").read_bytes())
    cap = doc["capacity"]
    levels = [p["concurrency"] for p in cap["probes"]]
    assert levels[:3] == [1, 2, 4], levels
    assert len(doc["points"]) == len(cap["probes"])
    assert cap["max_concurrency"] is not None and cap["max_concurrency"] >= 4
    assert doc["interrupted"] is True
    if all(p["ramp"] for p in cap["probes"]):  # interrupted while it climbed: not confirmed
        assert "not yet confirmed by a full probe" in cap["answer"]


def test_a_probe_of_long_requests_is_decided_on_what_is_known_of_those_in_flight() -> None:
    """Long requests keep many in flight: counted as misses they hold a pass back, so a look
    also judges the complete prefix (every request sent before the earliest in flight), and
    a request that streams already brings its known TTFT."""
    fast = Sample(Objective.TTFT, 5000.0, 0.9, [90.0 * (1 + i) for i in range(50)])  # not precise
    empty = Sample(Objective.TTFT, 5000.0, 0.9, [])
    many = Pending(requests=60, first_request_ns=10**12)
    assert many.count(Objective.TTFT) == 60
    # 50 completed, 60 in flight as misses: no pass; nothing before the earliest in flight
    assert Sequential(SteadyRule()).look(Look([fast], [empty], many)) is None
    # the 50 were all sent before the earliest in flight: the prefix passes
    assert Sequential(SteadyRule()).look(Look([fast], [fast], many)) is Stop.DECIDED
    # or the 60 stream already: their TTFTs are in the sample, none is still to come
    known = Pending(requests=60, ttft_ms=(120.0,) * 60, first_request_ns=10**12)
    assert known.count(Objective.TTFT) == 0 and known.cut(Objective.TTFT) is None
    assert known.count(Objective.TPS_USER) == 60  # a decode's speed is known at its end
    # a prefix that says pass while all the completed say fail: not decided
    slow = Sample(Objective.TTFT, 5000.0, 0.9, [5100.0 * 1.1**i for i in range(50)])
    assert Sequential(SteadyRule()).look(Look([slow], [fast], many)) is None
