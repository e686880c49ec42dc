"""The streaming client over real HTTP: timing with an injected clock, failures by kind."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pytest
from replay_helpers import run_point
from replay_servers import Behaviour, ChatServer

from agentload.client.stream import StreamClient
from agentload.errors import EndpointUnreachableError, ModelNotFoundError
from agentload.measure.metrics import MetricContext, aggregate


def _body(n: int = 4) -> bytes:
    return orjson.dumps(
        {
            "model": "test-model",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": n,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


async def test_times_come_from_the_injected_clock(chat_server: ChatServer) -> None:
    ticks = itertools.count(1_000, 1_000)  # every reading advances 1 µs
    client = StreamClient(chat_server.base_url, clock=lambda: next(ticks))
    try:
        out = await client.chat(_body(4))
    finally:
        await client.aclose()
    assert out.ok and out.status == 200
    # read when the request's bytes went out: after the connection was picked (1st reading)
    assert out.send_ns > 1_000 and out.send_ns % 1_000 == 0
    # one reading per network read that carried events, then one at the end
    assert out.first_ns == out.chunk_ns[0] and out.first_ns > out.send_ns
    assert len(out.chunk_ns) == 4
    assert all(b >= a for a, b in itertools.pairwise(out.chunk_ns))
    assert out.end_ns > out.chunk_ns[-1]
    assert (out.end_ns - 1_000) % 1_000 == 0
    assert out.completion_tokens == 4 and out.prompt_tokens and out.cached_tokens == 0
    assert out.finish_reason == "length"


async def test_probe_rejects_wrong_model_and_dead_endpoint(chat_server: ChatServer) -> None:
    client = StreamClient(chat_server.base_url)
    try:
        assert await client.probe("test-model") == ["test-model"]
        with pytest.raises(ModelNotFoundError, match="'nope' not served; available: test-model"):
            await client.probe("nope")
    finally:
        await client.aclose()
    dead = StreamClient("http://127.0.0.1:9/v1")
    try:
        with pytest.raises(EndpointUnreachableError, match="unreachable"):
            await dead.probe("x")
    finally:
        await dead.aclose()


async def test_server_errors_are_recorded_and_the_run_completes(
    make_server: object, fast_trace: Path
) -> None:
    srv: ChatServer = make_server(  # type: ignore[operator]
        Behaviour(fail={1: "500", 3: "reset", 5: "stall", 7: "overflow"}, stall_s=5.0)
    )
    run, _ = await run_point(
        srv.base_url, [fast_trace], start_at="zero", sessions=2, concurrency=1, timeout_s=0.5
    )
    kinds = [r.error_kind for r in sorted(run.requests, key=lambda r: r.send_ns)]
    assert len(run.requests) == 14  # every planned call was still sent
    failed = {k for k in kinds if k is not None}
    assert failed == {"http_500", "reset", "timeout", "context_overflow"}
    assert sum(k is not None for k in kinds) == 4
    http500 = next(r for r in run.requests if r.error_kind == "http_500")
    assert http500.status == 500 and "boom" in (http500.error or "")
    agg = aggregate(MetricContext(run.requests, run.sessions, run.window))
    assert agg["errors"] == {"http_500": 1, "reset": 1, "timeout": 1, "context_overflow": 1}
    assert agg["context_overflow"] == 1
    assert agg["e2e_ms"]["n"] == 10  # failed requests never enter the percentiles
    assert agg["ttft_ms"]["n"] == 10


async def test_llamacpp_context_overflow_is_counted_as_such(
    make_server: object, fast_trace: Path
) -> None:
    llama = "request (40021 tokens) exceeds the available context size (32768 tokens)"
    srv: ChatServer = make_server(  # type: ignore[operator]
        Behaviour(fail={0: "overflow"}, overflow_message=llama)
    )
    run, _ = await run_point(srv.base_url, [fast_trace], start_at="zero", sessions=1)
    kinds = [r.error_kind for r in run.requests if r.error_kind is not None]
    assert kinds == ["context_overflow"]  # not http_400: generate's client says context_limit


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        # the texts generate's client ends ``context_limit`` on (tests/test_errortext.py)
        ("The input (40021 tokens) is longer than the model's context length (32768 tokens).",
         "context_overflow"),
        ("The sum of prompt length (40021.0), query length (0) should not exceed max_num_tokens "
         "(32768)", "context_overflow"),
        ("This model's maximum context length is 32768 tokens. However, your request has 40021 "
         "input tokens. Please reduce the length of the input messages.", "context_overflow"),
        # a 400 for a bad parameter is not an overflow, on either side
        ("Invalid 'tools[0].function.name': string too long. Expected a string with maximum "
         "length 64, but got a string with length 80 instead.", "http_400"),
        ("max_tokens must be at least 1, got 0.", "http_400"),
    ],
)  # fmt: skip
async def test_replay_classifies_overflows_as_generate_does(
    make_server: object, message: str, kind: str
) -> None:
    srv: ChatServer = make_server(  # type: ignore[operator]
        Behaviour(fail={0: "overflow"}, overflow_message=message)
    )
    client = StreamClient(srv.base_url)
    try:
        out = await client.chat(_body())
    finally:
        await client.aclose()
    assert out.error_kind == kind


async def test_a_long_error_text_is_clipped(make_server: object) -> None:
    srv: ChatServer = make_server(  # type: ignore[operator]
        Behaviour(fail={0: "overflow"}, overflow_message="bad: " + "x" * 1095)
    )
    client = StreamClient(srv.base_url)
    try:
        out = await client.chat(_body())
    finally:
        await client.aclose()
    assert out.error_kind == "http_400" and out.error is not None
    assert len(out.error) < 400 and out.error.endswith("more characters]")


@pytest.mark.parametrize("spaced", [False, True])
async def test_compact_and_spaced_streams_give_the_same_timeline(
    make_server: object, spaced: bool
) -> None:
    srv: ChatServer = make_server(Behaviour(spaced=spaced))  # type: ignore[operator]
    client = StreamClient(srv.base_url)
    try:
        out = await client.chat(_body(12))
    finally:
        await client.aclose()
    assert out.ok and len(out.chunk_ns) == 12 and out.completion_tokens == 12
    assert out.cached_tokens == 0 and out.finish_reason == "length"
