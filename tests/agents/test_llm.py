"""The LLM node's client against a real (scripted) HTTP endpoint: streaming, timing, retries."""

from __future__ import annotations

import datetime
import email.utils
import json
import time
from typing import Any

import pytest
from fake_endpoint import Fail, Reply, ScriptedEndpoint

from agentload.agents.limits import SessionEnd
from agentload.agents.llm import ChatClient, LLMResult
from agentload.auth import api_key_from_env

BODY = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}


async def test_stream_reassembles_tool_calls_and_times_every_chunk() -> None:
    calls = [
        {"id": "call_a", "name": "read_file", "arguments": json.dumps({"path": "a.py"})},
        {"id": "call_b", "name": "search_code", "arguments": json.dumps({"pattern": "x+"})},
    ]
    with ScriptedEndpoint(lambda b: Reply("thinking about it", calls, 1234)) as ep:
        client = ChatClient(ep.base_url, model="fake")
        try:
            r = await client.complete(dict(BODY))
        finally:
            await client.aclose()
        sent = ep.requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert r.content == "thinking about it"
    assert [tc["id"] for tc in r.tool_calls] == ["call_a", "call_b"]
    assert json.loads(r.tool_calls[0]["function"]["arguments"]) == {"path": "a.py"}
    assert r.tool_calls[1]["function"]["name"] == "search_code"
    assert r.finish_reason == "tool_calls"
    assert r.prompt_tokens == 1234 and r.completion_tokens == 5
    t = r.timings
    assert t.first_token_ns is not None and t.last_token_ns is not None
    assert t.submit_ns < t.first_token_ns <= t.last_token_ns
    assert len(t.chunk_offsets_ns) == r.chunks >= 8
    assert t.chunk_offsets_ns == sorted(t.chunk_offsets_ns)


async def _complete_after(
    answers: list[Reply | Fail], **client_kw: Any
) -> tuple[LLMResult, list[tuple[int, str]]]:
    """One ``complete`` against an endpoint that gives ``answers`` in order (the last one
    repeats); the result and the ``(attempt, error)`` of every retry."""
    served = iter(answers)

    def handler(body: dict[str, Any]) -> Reply | Fail:
        return next(served, answers[-1])

    retries: list[tuple[int, str]] = []

    async def on_retry(attempt: int, error: str) -> None:
        retries.append((attempt, error))

    with ScriptedEndpoint(handler) as ep:
        client = ChatClient(ep.base_url, model="fake", backoff_s=0.01, **client_kw)
        try:
            return await client.complete(dict(BODY), on_retry=on_retry), retries
        finally:
            await client.aclose()


async def test_transient_errors_are_retried_and_reported() -> None:
    overloaded = Fail(503, "overloaded")
    r, retries = await _complete_after([overloaded, overloaded, Reply("fine")], retries=3)
    assert r.content == "fine" and r.attempts == 3
    assert [a for a, _ in retries] == [1, 2]
    assert "503" in retries[0][1] and "overloaded" in retries[0][1]


async def test_rate_limits_wait_as_long_as_the_server_asks() -> None:
    later = email.utils.format_datetime(
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=3), usegmt=True
    )
    answers: list[Reply | Fail] = [
        Fail(429, "rate limited", retry_after="0.4"),
        Fail(503, "busy", retry_after=later),  # an HTTP date, ~2-3 s ahead
        Reply("fine"),
    ]
    t0 = time.monotonic()
    r, retries = await _complete_after(answers, retries=3)
    waited = time.monotonic() - t0
    assert r.content == "fine" and r.attempts == 3
    assert retries[0][1] == "HTTP 429: rate limited (retry after 0.4s, as the server asked)"
    assert retries[1][1].startswith("HTTP 503: busy (retry after ")
    # both waits honoured: 0.4 s, then the date (one-second resolution) less the time spent
    assert waited >= 0.4 + 1.5


async def test_a_long_retry_after_is_capped() -> None:
    answers: list[Reply | Fail] = [Fail(429, "slow down", retry_after="3600"), Reply("ok")]
    r, retries = await _complete_after(answers, max_retry_after_s=0.05)
    assert r.content == "ok" and r.attempts == 2
    assert retries == [(1, "HTTP 429: slow down (retry after 0.05s, as the server asked)")]


async def test_errors_after_retries_end_the_session() -> None:
    with ScriptedEndpoint(lambda b: Fail(503, "boom")) as ep:
        client = ChatClient(ep.base_url, model="fake", retries=2, backoff_s=0.01)
        try:
            with pytest.raises(SessionEnd) as info:
                await client.complete(dict(BODY))
        finally:
            await client.aclose()
        assert len(ep.requests) == 3
    assert info.value.reason == "endpoint_error" and info.value.cause == "retries_exhausted"
    assert "boom" in info.value.detail and "3 attempts" in info.value.detail


async def _fails_with(answers: list[Fail], retries: int = 3) -> tuple[SessionEnd, int]:
    """``complete`` against an endpoint failing with ``answers`` in order (the last repeats):
    the ``SessionEnd`` and how many requests were made."""
    served = iter(answers)
    with ScriptedEndpoint(lambda b: next(served, answers[-1])) as ep:
        client = ChatClient(ep.base_url, model="fake", retries=retries, backoff_s=0.01)
        try:
            with pytest.raises(SessionEnd) as info:
                await client.complete(dict(BODY))
        finally:
            await client.aclose()
        return info.value, len(ep.requests)


@pytest.mark.parametrize(
    ("answers", "requests", "cause"),
    [
        # a 4xx repeats: no retry
        ([Fail(400, "Invalid schema for function 'read_file'")], 1, "bad_request"),
        ([Fail(404, "no such model")], 1, "bad_request"),
        ([Fail(422, "Unprocessable Entity")], 1, "bad_request"),
        # llama.cpp's 500 for a history it cannot parse repeats too
        (
            [Fail(500, "Failed to parse tool call arguments as JSON: parse error")],
            1,
            "request_error",
        ),
        # a plain 500 is retried; the same text again means it will repeat
        ([Fail(500, "boom")], 2, "repeated"),
        # different 500s, then 503s: retried to the end
        ([Fail(500, "a"), Fail(500, "b"), Fail(503, "busy")], 4, "retries_exhausted"),
    ],
)
async def test_errors_are_classified_once(answers: list[Fail], requests: int, cause: str) -> None:
    end, made = await _fails_with(answers)
    assert (end.reason, end.cause, made) == ("endpoint_error", cause, requests)
    if cause != "retries_exhausted":
        assert "not retried" in end.detail


async def test_a_long_error_text_is_clipped() -> None:
    end, _ = await _fails_with([Fail(400, "bad: " + "x" * 1095)])
    assert len(end.detail) < 450 and end.detail.endswith(
        "... [810 more characters] (not retried: "
        "the endpoint refused the request, and "
        "would refuse it again)"
    )


async def test_on_chunk_counts_the_reply_chunks_as_they_stream() -> None:
    seen: list[int] = []
    with ScriptedEndpoint(lambda b: Reply("x" * 80)) as ep:  # 10 content chunks of 8
        client = ChatClient(ep.base_url, model="fake")
        try:
            r = await client.complete(dict(BODY), on_chunk=seen.append)
        finally:
            await client.aclose()
    assert seen == list(range(1, 11)) and r.content == "x" * 80


@pytest.mark.parametrize(
    "msg",
    [
        "This model's maximum context length is 8192 tokens. However, you requested 9000",
        # llama.cpp (replay counts the same text as context_overflow: one classifier)
        "request (40021 tokens) exceeds the available context size (32768 tokens)",
        # TensorRT-LLM
        "The sum of prompt length (40021.0), query length (0) should not exceed max_num_tokens "
        "(32768)",
    ],
)
async def test_context_limit_error_is_not_retried(msg: str) -> None:
    with ScriptedEndpoint(lambda b: Fail(400, msg)) as ep:
        client = ChatClient(ep.base_url, model="fake", retries=3, backoff_s=0.01)
        try:
            with pytest.raises(SessionEnd) as info:
                await client.complete(dict(BODY))
        finally:
            await client.aclose()
        assert len(ep.requests) == 1
    assert info.value.reason == "context_limit"


async def test_unreachable_endpoint_ends_with_endpoint_error() -> None:
    client = ChatClient("http://127.0.0.1:9/v1", model="x", retries=1, backoff_s=0.01)
    try:
        with pytest.raises(SessionEnd) as info:
            await client.complete(dict(BODY))
    finally:
        await client.aclose()
    assert info.value.reason == "endpoint_error"


def test_api_key_only_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTLOAD_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert api_key_from_env() is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-b")
    assert api_key_from_env() == "sk-b"
    monkeypatch.setenv("AGENTLOAD_API_KEY", "sk-a")
    assert api_key_from_env() == "sk-a"
