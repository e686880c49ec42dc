"""The scheduler of the simulated server: admission, queueing, prefill and decode timing.

A request becomes a ``Sequence`` with a known prompt (token count and block hashes) and a
known number of output tokens. ``Engine.run(seq)`` yields how many new tokens are ready, when
they are ready:

* admission, FCFS: a sequence runs when fewer than ``max_batch`` run and its blocks fit in the
  KV cache (cached blocks are evicted LRU to make room); otherwise it waits in the queue;
* TTFT = queue wait + (prefill backlog) + uncached prompt tokens / prefill rate + overhead;
  prefills are served one after another at the profile's rate;
* decode: each running sequence gets ``decode_tokens_per_s / (1 + d·(running − 1))`` tokens/s;
  tokens that fall due together are yielded together;
* when a generated token needs a block and none is free, the most recently admitted sequence is
  preempted (its blocks freed, back to the head of the queue, recomputed on readmission),
  as vLLM does.

All sleeps go through the injected clock. With the ``instant`` profile nothing sleeps.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from agentload.endpoint.timing.clock import Clock, RealClock
from agentload.endpoint.timing.kv import KVCache
from agentload.endpoint.timing.profiles import Profile

__all__ = ["E2E_BUCKETS", "TTFT_BUCKETS", "Engine", "EngineStats", "Histogram", "Sequence"]

# vLLM's bucket boundaries (seconds), so dashboards built for vLLM read ours the same way.
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


class Histogram:
    """Cumulative-bucket histogram kept as plain ints (exported by the metrics collector)."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)


@dataclass
class EngineStats:
    """Counters the ``/metrics`` collector reads at scrape time."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    preemptions: int = 0
    finished: dict[str, int] = field(default_factory=dict)
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))


@dataclass(eq=False)
class Sequence:
    """One request inside the engine."""

    prompt_tokens: int
    hashes: list[str]
    output_tokens: int
    arrival_ns: int = 0
    cached_tokens: int = 0
    generated: int = 0
    anon: int = 0
    order: int = 0
    preempted: bool = False
    first_token_ns: int | None = None
    finish_reason: str = "stop"
    prefill: tuple[int, int] | None = None
    """Its prefill's reserved span on the engine's prefill line (start, end ns) until done."""
    _admitted: asyncio.Future[None] | None = None


class Engine:
    """Admission, KV accounting and timing for every request of one simulated server."""

    def __init__(self, profile: Profile, clock: Clock | None = None) -> None:
        self.profile = profile
        self.clock: Clock = clock or RealClock()
        self.kv = KVCache(profile.kv_blocks, profile.block_size)
        self.stats = EngineStats()
        self.running: list[Sequence] = []
        self.waiting: deque[Sequence] = deque()
        self._order = itertools.count()
        self._prefill_free_ns = 0

    # -- admission ---------------------------------------------------------------------------
    def _blocks_for(self, tokens: int) -> int:
        bs = self.profile.block_size
        return -(-tokens // bs)

    def _anon_needed(self, seq: Sequence) -> int:
        return max(0, self._blocks_for(seq.prompt_tokens + seq.generated) - len(seq.hashes))

    def _try_admit_one(self, seq: Sequence) -> bool:
        if len(self.running) >= self.profile.max_batch:
            return False
        anon = self._anon_needed(seq)
        if not self.kv.can_allocate(seq.hashes, anon):
            return False
        hit_blocks = self.kv.resident_prefix(seq.hashes)
        bs = self.profile.block_size
        if hit_blocks * bs >= seq.prompt_tokens:  # the last prompt token is always computed
            hit_blocks = max(0, (seq.prompt_tokens - 1) // bs)
        self.kv.allocate(seq.hashes, anon)
        seq.anon = anon
        if not seq.preempted:
            seq.cached_tokens = hit_blocks * bs
            self.stats.prefix_queries += seq.prompt_tokens
            self.stats.prefix_hits += seq.cached_tokens
        seq.order = next(self._order)
        self.running.append(seq)
        return True

    def _admit_waiting(self) -> None:
        while self.waiting and self._try_admit_one(self.waiting[0]):
            seq = self.waiting.popleft()
            if seq._admitted is not None and not seq._admitted.done():
                seq._admitted.set_result(None)

    async def _admit(self, seq: Sequence) -> None:
        if not self.waiting and self._try_admit_one(seq):
            return
        seq._admitted = asyncio.get_running_loop().create_future()
        if seq.preempted:
            self.waiting.appendleft(seq)
        else:
            self.waiting.append(seq)
        try:
            await seq._admitted
        except BaseException:
            if seq in self.waiting:
                self.waiting.remove(seq)
            raise

    def _release(self, seq: Sequence) -> None:
        if seq.prefill is not None:  # aborted before its prefill was done: give back the rest
            start, end = seq.prefill
            now = self.clock.now_ns()
            if end > now:
                rest = end - max(now, start)
                self._prefill_free_ns = max(now, self._prefill_free_ns - rest)
            seq.prefill = None
        if seq in self.running:
            self.running.remove(seq)
            self.kv.release(seq.hashes, seq.anon)
            seq.anon = 0
        self._admit_waiting()

    def _need_block(self, seq: Sequence) -> bool:
        """Give ``seq`` a block for its next token, preempting the newest sequence if needed.
        Returns False when ``seq`` itself was preempted."""
        while not self.kv.grow(1):
            victim = max(self.running, key=lambda s: s.order)
            self.running.remove(victim)
            self.kv.release(victim.hashes, victim.anon)
            victim.anon = 0
            victim.preempted = True
            self.stats.preemptions += 1
            if victim is seq:
                return False
        seq.anon += 1
        return True

    # -- timing ------------------------------------------------------------------------------
    def _prefill_done_ns(self, seq: Sequence, uncached: int) -> int:
        """When ``seq``'s prefill of ``uncached`` tokens is done: prefill is one line of work
        in arrival order (its span is kept until done, so an abort gives back what it had not
        used: the work the next arrivals wait behind is conserved)."""
        now = self.clock.now_ns()
        start = max(now, self._prefill_free_ns)
        work = int(uncached / self.profile.prefill_tokens_per_s * 1e9)
        self._prefill_free_ns = start + work
        seq.prefill = (start, start + work)
        return start + work + int(self.profile.overhead_ms * 1e6)

    def _itl_ns(self) -> int:
        p = self.profile
        rate = p.decode_tokens_per_s / (1.0 + p.decode_degradation * max(0, len(self.running) - 1))
        return max(1, int(1e9 / rate))

    async def run(self, seq: Sequence) -> AsyncIterator[int]:
        """Admit ``seq`` and yield counts of newly generated tokens as they become ready."""
        seq.arrival_ns = self.clock.now_ns()
        self.stats.prompt_tokens += seq.prompt_tokens
        reason = "abort"
        try:
            if self.profile.instant:
                await self._admit(seq)
                seq.first_token_ns = self.clock.now_ns()
                seq.generated = seq.output_tokens
                self.stats.generation_tokens += seq.output_tokens
                reason = seq.finish_reason
                yield seq.output_tokens
                return
            async for n in self._run_timed(seq):
                yield n
            reason = seq.finish_reason
        finally:
            self._release(seq)
            now = self.clock.now_ns()
            if seq.first_token_ns is not None:
                self.stats.ttft.observe((seq.first_token_ns - seq.arrival_ns) / 1e9)
                self.stats.e2e.observe((now - seq.arrival_ns) / 1e9)
            self.stats.finished[reason] = self.stats.finished.get(reason, 0) + 1

    async def _run_timed(self, seq: Sequence) -> AsyncIterator[int]:
        while True:
            await self._admit(seq)
            was_preempted, seq.preempted = seq.preempted, False
            uncached = seq.prompt_tokens + seq.generated
            uncached -= 0 if was_preempted else seq.cached_tokens
            if was_preempted:
                hit = self.kv.resident_prefix(seq.hashes) * self.profile.block_size
                uncached = max(1, uncached - min(hit, seq.prompt_tokens - 1))
            t = self._prefill_done_ns(seq, uncached)
            await self.clock.sleep_until(t)
            seq.prefill = None
            if seq.preempted:
                continue
            if seq.first_token_ns is None:
                seq.first_token_ns = self.clock.now_ns()
                if not self._emit(seq):
                    continue
                yield 1
            while seq.generated < seq.output_tokens and not seq.preempted:
                t += self._itl_ns()
                await self.clock.sleep_until(t)
                if seq.preempted:
                    break
                now = self.clock.now_ns()
                ready = 0
                while seq.generated < seq.output_tokens:
                    if not self._emit(seq):
                        break
                    ready += 1
                    if t + self._itl_ns() > now:
                        break
                    t += self._itl_ns()
                if ready:
                    yield ready
            if seq.generated >= seq.output_tokens:
                return

    def _emit(self, seq: Sequence) -> bool:
        """Account one generated token (a block when it starts one); False if preempted."""
        if seq.output_tokens == 0:
            return True
        if (seq.prompt_tokens + seq.generated) % self.profile.block_size == 0 and not (
            self._need_block(seq)
        ):
            return False
        seq.generated += 1
        self.stats.generation_tokens += 1
        return True
