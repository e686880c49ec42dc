"""The sessions of a generate run, the same wherever they run.

* Which agent runs session ``i`` (a ``SessionRunner``): agentload's own agents
  (``BuiltinSessions``: ``agents.session.run_session`` on the run's client, trace writer and
  capture) or an agent product (``ProductSessions``: ``products.session.run_product_session``
  through the run's recording proxy). Session ``i`` is ``s{seed}-{i}`` with seed ``seed + i``
  (``SessionPlace.setup``) on any machine.
* How many at once (``run_sessions``): ``parallel`` at a time, progress told as each starts and
  ends; an interruption cancels every session and waits for them.

The executors use both: ``run.generate`` (this machine, agentload's agents), ``product_run``
(this machine, a product), ``ray_driver`` (``run_sessions`` over the cluster: each session sent
to a worker) and each Ray worker (``ray_actor``: the runner of its agent kind, one session per
call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agentload.agents.session import SessionSetup, run_session
from agentload.agents.tracing import SessionStats

if TYPE_CHECKING:
    from agentload.agents.llm import ChatClient
    from agentload.generate.options import GenerateOptions
    from agentload.products.session import ProductRun
    from agentload.protocols import TraceSink
    from agentload.scenarios.models import Scenario
    from agentload.trace.capture import CallCapture

__all__ = [
    "BuiltinSessions",
    "ProductSessions",
    "ProgressSink",
    "RunPlan",
    "SessionPlace",
    "SessionRunner",
    "StartHook",
    "run_sessions",
]

RunPlan = list[tuple["Scenario", str | None, int]]
"""(scenario, eval task, attempt) of each session of a run, in order
(``GenerateOptions.session_plan``)."""
StartHook = Callable[[SessionStats], None]
"""Told a session's counters as it starts."""


@dataclass(frozen=True)
class SessionPlace:
    """The run's sessions and where their files go."""

    opts: GenerateOptions
    plan: RunPlan
    seed: int
    workdir: Path
    kind: str
    """The sandbox kind."""

    def setup(self, i: int) -> SessionSetup:
        """Session ``i`` of the run: id ``s{seed}-{i}``, seed ``seed + i`` (wherever it runs)."""
        _, task, attempt = self.plan[i]
        return SessionSetup(
            index=i,
            session_id=f"s{self.seed}-{i}",
            seed=self.seed + i,
            workdir=self.workdir,
            sandbox_kind=self.kind,
            evaluate=self.opts.evaluate,
            keep_workspace=self.opts.keep_workspaces,
            task=task,
            attempt=attempt,
            pace_real=self.opts.pace == "real",
        )

    def scenario(self, i: int) -> Scenario:
        return self.plan[i][0]


class ProgressSink(Protocol):
    """Receives sessions as they start; reads their live ``SessionStats``."""

    def session_started(self, stats: SessionStats) -> None: ...

    def session_ended(self, stats: SessionStats) -> None: ...


class SessionRunner(Protocol):
    """Runs session ``i`` to its end, telling ``started`` its counters as it starts."""

    async def __call__(self, i: int, started: StartHook) -> SessionStats: ...


@dataclass(frozen=True)
class BuiltinSessions:
    """Sessions of agentload's own agents."""

    place: SessionPlace
    client: ChatClient
    writer: TraceSink
    capture: CallCapture
    token_ratio: float

    async def __call__(self, i: int, started: StartHook) -> SessionStats:
        return await run_session(
            self.place.setup(i),
            self.place.scenario(i),
            client=self.client,
            writer=self.writer,
            capture=self.capture,
            on_start=started,
            token_ratio=self.token_ratio,
        )


@dataclass(frozen=True)
class ProductSessions:
    """Sessions of an agent product."""

    place: SessionPlace
    run: ProductRun

    async def __call__(self, i: int, started: StartHook) -> SessionStats:
        from agentload.products.session import run_product_session

        return await run_product_session(
            self.place.setup(i), self.place.scenario(i), self.run, started
        )


async def run_sessions(
    n: int,
    parallel: int,
    runner: SessionRunner,
    progress: ProgressSink | None,
    watch: StartHook | None = None,
) -> list[SessionStats]:
    """Sessions ``0 … n-1``, ``parallel`` at a time; their counters in order. ``watch`` and
    ``progress`` are told as each starts (``progress`` as each ends too). On an interruption
    every session is cancelled and waited for."""

    def started(stats: SessionStats) -> None:
        if watch is not None:
            watch(stats)
        if progress is not None:
            progress.session_started(stats)

    gate = asyncio.Semaphore(parallel)

    async def one(i: int) -> SessionStats:
        async with gate:
            stats = await runner(i, started)
        if progress is not None:
            progress.session_ended(stats)
        return stats

    tasks = [asyncio.create_task(one(i)) for i in range(n)]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
