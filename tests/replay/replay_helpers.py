"""Running one replay point in-process against a test server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentload.cli import main
from agentload.client.stream import StreamClient
from agentload.measure.pointrun import PointRun
from agentload.options.engines import get_engine
from agentload.options.load import LoadOptions
from agentload.replay.bodies import BodyBuilder
from agentload.replay.plan import SessionPlan, build_plans
from agentload.replay.salt import SaltAt
from agentload.replay.schedule import LoadShape, PointRunner
from agentload.trace import load_trace


def plans_of(*paths: Path, salt_at: SaltAt = "after-system") -> list[SessionPlan]:
    return build_plans([load_trace(p) for p in paths], salt_at=salt_at)


async def run_point(
    base_url: str,
    paths: list[Path],
    *,
    model: str = "test-model",
    engine: str = "vllm",
    timeout_s: float = 30.0,
    salt_at: SaltAt = "after-system",
    **shape: Any,
) -> tuple[PointRun, PointRunner]:
    client = StreamClient(base_url, timeout_s=timeout_s, max_connections=64)
    try:
        runner = PointRunner(
            client,
            plans_of(*paths, salt_at=salt_at),
            BodyBuilder(model, get_engine(engine)),
            shape_of(**shape),
        )
        return await runner.run(), runner
    finally:
        await client.aclose()


def shape_of(
    concurrency: int = 1,
    sessions: int | None = None,
    session_header: str | None = None,
    parent_header: str | None = None,
    **load: Any,
) -> LoadShape:
    """A point's shape: ``concurrency`` lanes, ``sessions`` instances, the session headers,
    the other keywords ``LoadOptions``."""
    return LoadShape(LoadOptions(**load), concurrency, sessions, session_header, parent_header)


def run_cli(argv: list[str]) -> int:
    """``agentload ARGV`` in-process; its exit code."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0)
