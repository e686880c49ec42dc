"""Progress lines (plain, non-TTY), NVML-free power averaging, option parsing."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from pydantic import ValidationError
from replay_helpers import plans_of, shape_of
from replay_servers import ChatServer
from replay_traces import Shape, agentic_trace
from rich.console import Console

from agentload.client.stream import StreamClient
from agentload.measure.pointrun import PointRun
from agentload.measure.power import average_watts
from agentload.options.engines import get_engine
from agentload.options.replay import ReplayConfig
from agentload.options.values import parse_duration_ns
from agentload.replay.bodies import BodyBuilder
from agentload.replay.progress import Progress
from agentload.replay.schedule import PointRunner


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
        shape_of(concurrency=2, sessions=4, start_at="zero"),
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
    base = {"traces": ["t.jsonl"], "endpoint": "http://127.0.0.1:1/v1", "model": "m"}
    cfg = ReplayConfig.model_validate({**base, "slo": "ttft=2s, tpot=50ms", "levels": "1,2,4"})
    assert cfg.slo is not None and cfg.slo["ttft_ns"] == 2_000_000_000
    assert cfg.slo["tpot_ns"] == 50_000_000 and cfg.slo["e2e_ns"] is None
    assert ReplayConfig.model_validate({**base, "slo": ""}).slo is None
    assert cfg.levels == [1, 2, 4]
    for bad in ("0,1", "", "a"):
        with pytest.raises(ValidationError):
            ReplayConfig.model_validate({**base, "levels": bad})
    # the checks across options and of the Python form of --slo live in the model too
    for bad_cfg, message in (
        ({"levels": [1, 2], "arrival_rate": 2.0}, "cannot be combined with --arrival-rate"),
        ({"power": "nvml", "power_watts": 500.0}, "not both"),
        ({"slo": {"ttft": 5}}, r"unknown objective\(s\) ttft;"),
    ):
        with pytest.raises(ValidationError, match=message):
            ReplayConfig.model_validate({**base, **bad_cfg})
    assert ReplayConfig.model_validate({**base, "levels": [4], "arrival_rate": 2.0}).levels == [4]


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
        shape_of(concurrency=1, sessions=2, start_at="zero"),
    )
    task = asyncio.create_task(progress(runner, 1, 3))
    await runner.run()
    await asyncio.sleep(0.1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.aclose()
    out = buf.getvalue()
    assert "agentload replay" in out and "point 2/3 (load 1)" in out and "2 done" in out


def test_sessions_stopped_by_the_deadline_are_cut_not_done(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    # a recorded tool wait of 5 s: no session can finish within a 0.3 s --duration
    trace = agentic_trace(tmp_path / "slow.jsonl", sessions=2, shape=Shape(tool_gap_s=5.0))
    buf = io.StringIO()
    progress = Progress(Console(file=buf, force_terminal=False, width=200), interval_s=10)

    async def run() -> PointRun:
        client = StreamClient(chat_server.base_url)
        runner = PointRunner(
            client,
            plans_of(trace),
            BodyBuilder("test-model", get_engine("vllm")),
            shape_of(concurrency=2, duration_s=0.3, start_at="zero"),
        )
        task = asyncio.create_task(progress(runner, 0, 1))
        result = await runner.run()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.aclose()
        return result

    result = asyncio.run(run())
    assert len(result.sessions) == 2 and not any(s.complete for s in result.sessions)
    last = buf.getvalue().strip().splitlines()[-1]
    assert "sessions 0 active, 0 done, 2 cut |" in last
