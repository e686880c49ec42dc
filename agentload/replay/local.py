"""A replay's points on this machine (``LocalPoints``, a ``points.PointExecutor``): one stream
client for the whole run, one ``PointRunner`` per point on this event loop, power measured
here (``--power nvml``)."""

from __future__ import annotations

from dataclasses import replace

from agentload.auth import api_key_from_env
from agentload.client.stream import StreamClient
from agentload.measure.capacity_stages import StageDriver, StageMark
from agentload.measure.metrics import SLO
from agentload.measure.power import NvmlPower
from agentload.measure.results import ClusterRun, Point
from agentload.replay.bodies import BodyBuilder
from agentload.replay.points import RunInputs, Watcher, run_point, run_staged
from agentload.replay.prepare import (
    choose_apis,
    connections,
    point_shape,
    recorded_warm,
    session_width,
)
from agentload.replay.salt import new_nonce, new_run_id
from agentload.replay.schedule import PointRunner

__all__ = ["LocalPoints"]


class LocalPoints:
    """Runs each point of a replay in this process (see the module docstring)."""

    def __init__(self, run: RunInputs) -> None:
        cfg, plans, engine = run.cfg, run.plans, run.engine
        self.cfg, self.plans, self.engine, self.progress = cfg, plans, engine, run.progress
        self.power = NvmlPower(cfg.gpus) if cfg.power == "nvml" else None  # first: it may refuse
        self.client = StreamClient(
            cfg.endpoint,
            api_key=api_key_from_env(),
            timeout_s=cfg.timeout_s,
            max_connections=connections(cfg, plans),
        )
        self.slo = SLO.of(cfg.slo)
        self.builder = BodyBuilder(cfg.model, engine, cfg.session_field or engine.session_field)
        self.nonce = new_run_id()
        self.width = session_width(plans)

    @property
    def cluster(self) -> ClusterRun | None:
        return None

    async def open(self) -> str | None:
        await self.client.probe(self.cfg.model)
        simulator = await self.client.simulator_profile(self.cfg.model)
        await choose_apis(self.client, self.plans, self.cfg)
        return simulator

    async def point(self, index: int, level: int, total: int, watcher: Watcher | None) -> Point:
        cfg, plans = self.cfg, self.plans
        shape = point_shape(cfg, level, len(plans), self.engine)
        runner = PointRunner(
            self.client, plans, self.builder, shape, nonce=new_nonce(self.nonce, index)
        )
        # closed loop: each lane may have its session's parallel calls in flight; the recorded
        # schedule: more than the recording had (``prepare.recorded_warm``); arrivals: none
        warm = recorded_warm(plans) if cfg.schedule == "recorded" else level * self.width
        await self.client.warm(warm if not cfg.arrival_rate else 0)
        return await run_point(
            runner, cfg, self.slo, self.power, self.progress, index, total, watcher
        )

    async def staged(
        self, index: int, level: int, search: StageDriver, marks: list[StageMark]
    ) -> list[Point]:
        cfg = self.cfg.model_copy(update={"duration_s": None})  # the search ends it
        shape = replace(
            point_shape(cfg, level, len(self.plans), self.engine), sessions=None
        )  # lanes recycle sessions until then
        runner = PointRunner(
            self.client, self.plans, self.builder, shape, nonce=new_nonce(self.nonce, index)
        )
        await self.client.warm(level * self.width)
        return await run_staged(
            runner, cfg, self.slo, self.power, self.progress, index, search, marks
        )

    async def aclose(self) -> None:
        await self.client.aclose()
        if self.power is not None:
            self.power.close()
