"""Progress lines (plain, non-TTY), NVML-free power averaging, option parsing."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from replay_helpers import plans_of
from replay_servers import ChatServer
from rich.console import Console

from agentload.errors import ConfigError
from agentload.replay.bodies import BodyBuilder
from agentload.replay.client import StreamClient
from agentload.replay.engines import get_engine
from agentload.replay.options import parse_duration_ns, parse_levels, parse_slo
from agentload.replay.power import average_watts
from agentload.replay.progress import Progress
from agentload.replay.schedule import LoadShape, PointRunner


async def test_plain_progress_prints_periodic_lines(
    chat_server: ChatServer, fast_trace: Path
) -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=200)
    progress = Progress(console, interval_s=0.05)
    assert not progress.live
    client = StreamClient(chat_server.base_url)
    runner = PointRunner(
        client,
        plans_of(fast_trace),
        BodyBuilder("test-model", get_engine("vllm")),
        LoadShape(concurrency=2, sessions=4, start_at="zero"),
    )
    task = asyncio.create_task(progress(runner, 0, 1))
    await runner.run()
    await asyncio.sleep(0.06)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.aclose()
    lines = buf.getvalue().strip().splitlines()
    assert len(lines) >= 2
    assert lines[-1].startswith("point 1/1 (load 2): sessions 0 active, 4 done |")
    assert "errors 0" in lines[-1] and "p50 TTFT" in lines[-1]


def test_average_watts_interpolates_energy() -> None:
    s = 1_000_000_000
    samples = [(0, 0.0), (s, 500_000.0), (2 * s, 1_500_000.0)]  # mJ: 500 W then 1000 W
    assert average_watts(samples, 0, s) == pytest.approx(500.0)
    assert average_watts(samples, s // 2, 3 * s // 2) == pytest.approx(750.0)
    assert average_watts(samples, 0, 3 * s) is None  # beyond the last sample
    assert average_watts(samples[:1], 0, s) is None


def test_option_parsing() -> None:
    assert parse_duration_ns("50ms") == 50_000_000
    assert parse_duration_ns("1.5") == 1_500_000_000
    slo = parse_slo("ttft=2s, tpot=50ms")
    assert slo is not None and slo.ttft_ns == 2_000_000_000 and slo.tpot_ns == 50_000_000
    assert slo.e2e_ns is None and parse_slo(None) is None
    assert parse_levels("1,2,4") == [1, 2, 4]
    for bad in ("0,1", "", "a"):
        with pytest.raises(ConfigError):
            parse_levels(bad)


async def test_live_progress_renders_on_a_terminal(
    chat_server: ChatServer, fast_trace: Path
) -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=200)
    progress = Progress(console, interval_s=0.02)
    assert progress.live
    client = StreamClient(chat_server.base_url)
    runner = PointRunner(
        client,
        plans_of(fast_trace),
        BodyBuilder("test-model", get_engine("vllm")),
        LoadShape(concurrency=1, sessions=2, start_at="zero"),
    )
    task = asyncio.create_task(progress(runner, 1, 3))
    await runner.run()
    await asyncio.sleep(0.1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.aclose()
    out = buf.getvalue()
    assert "agentload replay" in out and "point 2/3 (load 1)" in out and "2 done" in out
