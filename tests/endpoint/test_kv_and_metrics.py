"""The KV-cache model over HTTP (prefix hits, eviction) and /metrics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from agentload.endpoint import Profile, SimulatorServer
from agentload.endpoint.timing import KVCache

from .conftest import post, root


def _para(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i} lorem ipsum dolor sit amet" for i in range(n))


def _cached(base_url: str, model: str, messages: list[dict[str, Any]]) -> tuple[int, int]:
    r = post(base_url, {"model": model, "messages": messages, "max_tokens": 4}).json()
    u = r["usage"]
    return u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"]


def test_cached_tokens_grow_with_shared_prefix_then_drop_after_eviction(
    make_server: Callable[..., SimulatorServer], small_kv: Profile
) -> None:
    srv = make_server(profile=small_kv)
    system = {"role": "system", "content": _para("sys", 60)}  # ~500 tokens
    convo = [system, {"role": "user", "content": "first question about the code"}]
    p0, c0 = _cached(srv.base_url, srv.model, convo)
    assert c0 == 0
    convo2 = [
        *convo,
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": "follow-up question"},
    ]
    p1, c1 = _cached(srv.base_url, srv.model, convo2)
    assert c1 % 16 == 0 and p0 - 16 < c1 <= p0  # the whole shared prefix, in full blocks
    convo3 = [
        *convo2,
        {"role": "assistant", "content": "more"},
        {"role": "user", "content": _para("q", 20)},
    ]
    _p2, c2 = _cached(srv.base_url, srv.model, convo3)
    assert c2 > c1 and p1 - 16 < c2 <= p1
    # Pressure: other prompts filling the 4096-token cache several times over.
    for k in range(12):
        _cached(srv.base_url, srv.model, [{"role": "user", "content": _para(f"x{k}y", 60)}])
    _, c3 = _cached(srv.base_url, srv.model, convo3)
    assert c3 < c1
    text = httpx.get(root(srv.base_url) + "/metrics").text
    assert 'agentload_sim:kv_evictions_total{model_name="agentload-sim"}' in text
    ev = _sample(text, "agentload_sim:kv_evictions")
    assert ev > 0


def _sample(text: str, name: str, **labels: str) -> float:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in (name, name + "_total") and all(
                s.labels.get(k) == v for k, v in labels.items()
            ):
                return float(s.value)
    raise AssertionError(f"{name} not in /metrics")


def test_metrics_parse_and_counters_move(make_server: Callable[..., SimulatorServer]) -> None:
    srv = make_server()
    url = root(srv.base_url) + "/metrics"
    before = httpx.get(url)
    assert before.status_code == 200 and before.headers["content-type"].startswith("text/plain")
    names = {f.name for f in text_string_to_metric_families(before.text)}
    for n in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:gpu_cache_usage_perc",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:num_preemptions",
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
    ):
        assert n in names, n
    msgs = [{"role": "user", "content": _para("m", 30)}]
    u1 = post(srv.base_url, {"model": srv.model, "messages": msgs}).json()["usage"]
    u2 = post(srv.base_url, {"model": srv.model, "messages": msgs, "stream": True})
    assert u2.status_code == 200
    after = httpx.get(url).text
    assert _sample(after, "vllm:prompt_tokens") == 2 * u1["prompt_tokens"]
    assert _sample(after, "vllm:generation_tokens") >= u1["completion_tokens"] + 1
    assert _sample(after, "vllm:prefix_cache_queries") == 2 * u1["prompt_tokens"]
    assert _sample(after, "vllm:prefix_cache_hits") > 0  # the second request hit the first's blocks
    assert _sample(after, "vllm:time_to_first_token_seconds_count") == 2
    assert _sample(after, "vllm:e2e_request_latency_seconds_count") == 2
    assert _sample(after, "vllm:request_success", finished_reason="stop") == 2
    assert _sample(after, "vllm:num_requests_running") == 0


def test_kv_cache_lru_unit() -> None:
    kv = KVCache(num_blocks=4)
    a = ["a1", "a2"]
    assert kv.can_allocate(a, 1)
    kv.allocate(a, 1)
    assert kv.active_blocks == 3 and kv.usage == 0.75
    kv.release(a, 1)
    assert kv.active_blocks == 0 and kv.cached_blocks == 2
    assert kv.resident_prefix(["a1", "a2", "a3"]) == 2
    kv.allocate(["b1", "b2", "b3"], 0)  # needs 3: 2 free + evict a2 (tail of a first)
    assert kv.evictions == 1
    assert kv.resident_prefix(a) == 1
    assert not kv.can_allocate(["c1", "c2"], 0)
    assert not kv.grow(2)


def test_health_and_models(simulator: Any) -> None:
    h = httpx.get(root(simulator.base_url) + "/health").json()
    assert h["status"] == "ok" and h["model"] == simulator.model
    m = httpx.get(simulator.base_url + "/models").json()
    assert [d["id"] for d in m["data"]] == [simulator.model]


def test_timed_profile_paces_the_stream_and_honours_parallel_tool_calls(
    make_server: Callable[..., SimulatorServer],
) -> None:
    import time

    prof = Profile(
        name="slowish",
        prefill_tokens_per_s=100_000,
        decode_tokens_per_s=400,
        decode_degradation=0,
        overhead_ms=20,
        max_batch=4,
        kv_capacity_tokens=65_536,
        max_context=65_536,
    )
    srv = make_server(profile=prof)
    body = {
        "model": srv.model,
        "messages": [{"role": "user", "content": "stream please"}],
        "max_tokens": 40,
        "ignore_eos": True,
        "stream": True,
    }
    t0 = time.perf_counter()
    arrivals = []
    with httpx.stream("POST", srv.base_url + "/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and '"content":"' in line:
                arrivals.append(time.perf_counter() - t0)
    # 20 ms overhead before the first token, then 39 tokens at 2.5 ms each: >= 117 ms in all.
    assert arrivals[0] >= 0.02
    assert arrivals[-1] >= 0.02 + 39 / 400 * 0.95
    assert len(arrivals) >= 41  # role chunk (empty content) + 40 tokens
    text = httpx.get(root(srv.base_url) + "/metrics").text
    assert _sample(text, "vllm:time_to_first_token_seconds_sum") >= 0.02
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "parameters": {}}} for i in range(3)
    ]
    r2 = post(
        srv.base_url,
        {
            "model": srv.model,
            "tools": tools,
            "parallel_tool_calls": False,
            "tool_choice": "required",
            "messages": [{"role": "user", "content": "use tools"}],
        },
    ).json()
    assert len(r2["choices"][0]["message"]["tool_calls"]) == 1
