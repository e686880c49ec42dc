"""Engine presets and what replay reads of each engine: cached tokens, /metrics series."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from replay_helpers import run_point
from replay_servers import Behaviour, ChatServer

from agentload.options.engines import ENGINES, get_engine
from agentload.options.replay import ReplayConfig
from agentload.replay.scrape import parse_prometheus

# llama.cpp's /metrics as its server writes it (tools/server/server-task.cpp, to_metrics):
# HELP, TYPE and the value of every counter, then every gauge
_LLAMACPP_METRICS = [
    ("prompt_tokens_total", "counter", 2471),
    ("prompt_tokens_cached_total", "counter", 1905),
    ("prompt_seconds_total", "counter", 3.5),
    ("tokens_predicted_total", "counter", 96),
    ("tokens_predicted_seconds_total", "counter", 2.25),
    ("n_decode_total", "counter", 130),
    ("n_tokens_max", "counter", 1301),
    ("prompt_tokens_seconds", "gauge", 705.8),
    ("predicted_tokens_seconds", "gauge", 42.6),
    ("requests_processing", "gauge", 1),
    ("requests_deferred", "gauge", 0),
    ("n_busy_slots_per_decode", "gauge", 1.5),
]


def _llamacpp_text() -> str:
    return "".join(
        f"# HELP llamacpp:{n} {n}\n# TYPE llamacpp:{n} {t}\nllamacpp:{n} {v}\n"
        for n, t, v in _LLAMACPP_METRICS
    )


def test_every_llamacpp_series_is_kept() -> None:
    kept = parse_prometheus(_llamacpp_text())
    assert kept == {f"llamacpp:{n}": float(v) for n, _, v in _LLAMACPP_METRICS}


def test_llamacpp_is_a_preset_with_its_own_length_fields() -> None:
    cfg = ReplayConfig(traces=["t"], endpoint="http://x/v1", model="m", engine="llamacpp")
    eng = get_engine(cfg.engine)
    # max_tokens (an alias of n_predict) and ignore_eos pin the length; no min_tokens there
    assert eng.ignore_eos and not eng.min_tokens and eng.metrics_flag == "--metrics"
    assert set(ENGINES) >= {"vllm", "sglang", "trtllm", "dynamo", "llamacpp", "openai"}


@pytest.mark.parametrize("in_timings", [False, True])
async def test_cached_tokens_are_read_from_usage_or_llamacpp_timings(
    make_server: Any, trace_path: Path, in_timings: bool
) -> None:
    srv: ChatServer = make_server(Behaviour(cached_in_timings=in_timings))  # type: ignore[operator]
    run, _ = await run_point(
        srv.base_url, [trace_path], engine="llamacpp", start_at="zero", sessions=1
    )
    later = [r for r in run.requests if r.ceiling_tokens > 0]
    assert later and all(r.cached_tokens is not None for r in run.requests)
    assert sum(r.cached_tokens or 0 for r in later) > 0
