"""One worker of a sharded replay (``replay --ray``): a Ray actor with its own event loop and
stream client that runs its shard of each point (see ``sharded``, which drives it).

The class is plain Python (Ray wraps it in the driver: ``ray.remote(ReplayWorker)``), so it is
importable and typed without Ray. Its times are its own monotonic clock (``clock``); every
record it returns is in ns since its own point start (``t0``), which the driver moves onto its
own time line with the measured clock offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
import time
from collections.abc import Sequence
from typing import Any

from agentload.client.stream import StreamClient
from agentload.measure.pointrun import PointRun
from agentload.measure.records import RequestRecord
from agentload.options.engines import get_engine
from agentload.options.replay import ReplayConfig
from agentload.replay.bodies import BodyBuilder
from agentload.replay.plan import SessionPlan
from agentload.replay.schedule import LoadShape, PointRunner
from agentload.replay.shapes import Shard

__all__ = ["PACK", "ReplayWorker", "unpack_requests"]

PACK = 4
"""Request records pickled in one piece of a poll (each piece ~0.15 ms)."""


def unpack_requests(pieces: list[bytes]) -> list[RequestRecord]:
    """The request records of a worker's poll (``ReplayWorker.poll``)."""
    return [r for piece in pieces for r in pickle.loads(piece)]  # from our own worker


class ReplayWorker:
    """A replay worker (see the module docstring)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.client: StreamClient | None = None
        self.plans: Sequence[SessionPlan] = ()
        self.builder: BodyBuilder | None = None
        self.runner: PointRunner | None = None
        self.task: asyncio.Task[PointRun] | None = None
        self._stopper: asyncio.Task[None] | None = None
        self._sent_requests = 0
        self._sent_sessions: set[int] = set()

    # ---- identity and clock -------------------------------------------------------------
    def clock(self) -> int:
        """This worker's monotonic clock, ns."""
        return time.perf_counter_ns()

    def where(self) -> dict[str, Any]:
        """Node, process and its scheduling niceness, with a wall-clock anchor of the
        monotonic clock."""
        return {
            "node": socket.gethostname(),
            "pid": os.getpid(),
            "wall_ns": time.time_ns(),
            "mono_ns": time.perf_counter_ns(),
            "nice": os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None,
        }

    # ---- setup --------------------------------------------------------------------------
    async def setup(
        self,
        cfg: ReplayConfig,
        plans: Sequence[SessionPlan],
        api_key: str | None,
        max_connections: int,
    ) -> None:
        """The plans (their APIs chosen by the driver), a client and the body builder."""
        engine = get_engine(cfg.engine)
        if not cfg.extras:
            engine = engine.without_extras()
        self.plans = plans
        self.builder = BodyBuilder(cfg.model, engine, cfg.session_field or engine.session_field)
        self.client = StreamClient(
            cfg.endpoint,
            api_key=api_key,
            timeout_s=cfg.timeout_s,
            max_connections=max_connections,
        )
        await self.client.probe(cfg.model)  # this node reaches the target, or one line

    async def prepare(self, shape: LoadShape, nonce: str, shard: Shard, warm: int) -> None:
        """A point: its runner over this worker's shard; ``warm`` connections opened."""
        assert self.client is not None and self.builder is not None
        self.runner = PointRunner(self.client, self.plans, self.builder, shape, nonce=nonce)
        self.runner.source.shard = shard
        self.task = None
        self._stopper = None
        self._sent_requests = 0
        self._sent_sessions = set()
        await self.client.warm(warm)

    async def start(self, at_ns: int) -> None:
        """Start the point at ``at_ns`` on this worker's clock (returns at once)."""
        runner = self.runner
        assert runner is not None

        async def go() -> PointRun:
            delay = (at_ns - time.perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            return await runner.run()

        self.task = asyncio.create_task(go())

    async def stop_at(self, at_ns: int) -> None:
        """Stop sending at ``at_ns`` (the end of ``--duration`` on the common time line)."""
        runner = self.runner
        assert runner is not None

        async def stop() -> None:
            delay = (at_ns - time.perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            runner.mark_drain()
            runner.stop()

        self._stopper = asyncio.create_task(stop())

    # ---- results ------------------------------------------------------------------------
    async def poll(self) -> dict[str, Any]:
        """What happened since the last poll: new request and session records, counters, the
        requests and sessions in flight, warm-up end and drain (ns since ``t0``). The request
        records go pickled a few at a time (``unpack_requests`` reads them), with a loop turn
        between: pickling a poll's worth at once (~1 ms, in Ray's return) would hold up the
        sends that fall due meanwhile."""
        runner = self.runner
        assert runner is not None
        t0 = runner.t0
        done = self.task is not None and self.task.done()
        reqs = runner.records[self._sent_requests :]
        # (the runner sorts its sessions when the point ends: new ones are told by number)
        sess = [s for s in runner.sessions if s.session not in self._sent_sessions]
        self._sent_requests += len(reqs)
        self._sent_sessions.update(s.session for s in sess)
        warm = runner.warm
        got: dict[str, Any] = {
            "started": t0 != 0,
            "t0": t0,
            "now": time.perf_counter_ns() - t0 if t0 else 0,
            "requests": [],
            "sessions": list(sess),
            "stats": runner.stats,
            "inflight": [(*f[:3], f[3] - t0, f[4] - t0, f[5]) for f in runner.inflight.values()],
            "active": [(i, key, lane, st - t0) for i, (key, lane, st) in runner.active.items()],
            "started_sessions": runner.source.next_index,
            "warm_end": runner.warm_end - t0 if warm else None,
            "drain": None if runner.drain_at is None else runner.drain_at - t0,
            "done": done,
            "cpu_s": runner.cpu_s,
        }
        pieces: list[bytes] = got["requests"]
        for i in range(0, len(reqs), PACK):
            pieces.append(pickle.dumps(reqs[i : i + PACK], protocol=5))
            runner.waker.poll()
            await asyncio.sleep(0)
        return got

    async def finish(self) -> dict[str, Any]:
        """Wait for the point to end, then the last poll."""
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([self.task])
        if self._stopper is not None:
            self._stopper.cancel()
        return await self.poll()

    async def interrupt(self) -> dict[str, Any]:
        """Ctrl-C on the driver: cancel the point (requests in flight are dropped), keep what
        it measured, then the last poll."""
        runner = self.runner
        assert runner is not None
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.wait([self.task])
            runner.result()  # the window and phases of what it did
        return await self.finish()

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
