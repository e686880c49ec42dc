"""The timing model on virtual time: TTFT, inter-token times, queueing, preemption."""

from __future__ import annotations

import asyncio

import pytest

from agentload.endpoint import Profile, load_profile
from agentload.endpoint.timing import Engine, Sequence, VirtualClock

MS = 1_000_000


def _profile(**kw: object) -> Profile:
    base: dict[str, object] = dict(
        name="t",
        prefill_tokens_per_s=10_000,
        decode_tokens_per_s=100,
        decode_degradation=0.5,
        overhead_ms=2,
        max_batch=8,
        kv_capacity_tokens=16_384,
        max_context=16_384,
    )
    base.update(kw)
    return Profile.model_validate(base)


async def _collect(engine: Engine, seq: Sequence, clock: VirtualClock) -> list[tuple[int, int]]:
    out = []
    async for n in engine.run(seq):
        out.append((clock.now_ns(), n))
    return out


def _hashes(tag: str, n: int) -> list[str]:
    return [f"{tag}{i}" for i in range(n)]


async def test_ttft_and_itl_of_a_lone_request() -> None:
    clock = VirtualClock()
    eng = Engine(_profile(), clock)
    seq = Sequence(prompt_tokens=1000, hashes=_hashes("a", 62), output_tokens=5)
    task = asyncio.ensure_future(_collect(eng, seq, clock))
    await clock.run_until_idle()
    events = await task
    # TTFT = 1000 tokens / 10K tokens/s + 2 ms overhead = 102 ms; then 10 ms per token.
    assert events[0] == (102 * MS, 1)
    assert [t for t, _ in events[1:]] == [112 * MS, 122 * MS, 132 * MS, 142 * MS]
    assert sum(n for _, n in events) == 5
    assert eng.stats.ttft.count == 1 and abs(eng.stats.ttft.sum - 0.102) < 1e-9
    assert eng.kv.active_blocks == 0 and eng.kv.cached_blocks == 62


async def test_cached_prefix_shortens_prefill() -> None:
    clock = VirtualClock()
    eng = Engine(_profile(), clock)
    first = Sequence(1000, _hashes("a", 62), 1)
    t1 = asyncio.ensure_future(_collect(eng, first, clock))
    await clock.run_until_idle()
    await t1
    start = clock.now_ns()
    second = Sequence(1600, _hashes("a", 100), 1)  # shares 62 blocks = 992 tokens
    t2 = asyncio.ensure_future(_collect(eng, second, clock))
    await clock.run_until_idle()
    events = await t2
    assert second.cached_tokens == 992
    assert events[0][0] - start == int(608 / 10_000 * 1e9) + 2 * MS


async def test_decode_slows_with_batch_and_queue_when_batch_full() -> None:
    clock = VirtualClock()
    eng = Engine(_profile(max_batch=2, prefill_tokens_per_s=1e9, overhead_ms=0), clock)
    seqs = [Sequence(16, [f"s{i}"], 3) for i in range(3)]
    tasks = [asyncio.ensure_future(_collect(eng, s, clock)) for s in seqs]
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(eng.running) == 2 and len(eng.waiting) == 1
    await clock.run_until_idle()
    a, b, c = [await t for t in tasks]
    # Two running: 100 / (1 + 0.5) tokens/s each -> 6.67 ms between tokens.
    assert a[1][0] - a[0][0] == int(1e9 / (100 / 1.5))
    # The third starts only after one of the first two finished.
    assert c[0][0] >= min(a[-1][0], b[-1][0])
    assert eng.stats.finished == {"stop": 3}


async def test_preemption_when_kv_runs_out() -> None:
    clock = VirtualClock()
    prof = _profile(
        kv_capacity_tokens=64,
        max_context=64,
        prefill_tokens_per_s=1e9,
        overhead_ms=0,
        decode_degradation=0,
    )
    eng = Engine(prof, clock)
    # Each prompt takes 1 full block; each output of 40 tokens needs 3 more blocks: 2 x 4 > 4.
    seqs = [Sequence(16, [f"p{i}"], 40) for i in range(2)]
    tasks = [asyncio.ensure_future(_collect(eng, s, clock)) for s in seqs]
    await clock.run_until_idle()
    outs = [await t for t in tasks]
    assert [sum(n for _, n in o) for o in outs] == [40, 40]
    assert eng.stats.preemptions >= 1
    assert eng.kv.active_blocks == 0


async def test_cancelled_request_frees_its_blocks() -> None:
    clock = VirtualClock()
    eng = Engine(_profile(), clock)
    seq = Sequence(1000, _hashes("z", 62), 100)
    task = asyncio.ensure_future(_collect(eng, seq, clock))
    for _ in range(5):
        await asyncio.sleep(0)
    assert eng.kv.active_blocks > 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert eng.kv.active_blocks == 0 and not eng.running


@pytest.mark.parametrize("cancel", [False, True])
async def test_an_aborted_request_gives_back_the_prefill_it_had_not_used(cancel: bool) -> None:
    """Prefill is one line of work: a request that arrives behind a queued one waits for it,
    unless that one was aborted first (its client went away), as a real engine drops it."""
    clock = VirtualClock()
    eng = Engine(_profile(), clock)
    first = Sequence(5000, _hashes("a", 313), 1)  # 500 ms of prefill
    queued = Sequence(5000, _hashes("b", 313), 1)  # 500 ms more, behind it
    t1 = asyncio.ensure_future(_collect(eng, first, clock))
    t2 = asyncio.ensure_future(_collect(eng, queued, clock))
    for _ in range(5):
        await asyncio.sleep(0)
    if cancel:
        t2.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t2
    late = Sequence(1000, _hashes("c", 63), 1)  # 100 ms of prefill
    t3 = asyncio.ensure_future(_collect(eng, late, clock))
    await clock.run_until_idle()
    await t1
    if not cancel:
        await t2
    events = await t3
    # behind the first (500 ms) and, unless it was aborted, the queued one (500 ms more)
    expect = (500 + 100 + (0 if cancel else 500) + 2) * MS
    assert events[0][0] == expect


def test_shipped_profiles_load_and_bad_files_name_the_field(tmp_path: object) -> None:
    from pathlib import Path

    from agentload.errors import ConfigError

    assert load_profile("instant").instant
    big = load_profile("large-gpu")
    assert not big.instant and big.max_context <= big.kv_capacity_tokens
    bad = Path(str(tmp_path)) / "p.yaml"
    bad.write_text("name: x\nprefill_tokens_per_s: -3\n")
    with pytest.raises(ConfigError, match="prefill_tokens_per_s"):
        load_profile(bad)
    with pytest.raises(ConfigError, match="unknown simulator profile"):
        load_profile("no-such-profile")
