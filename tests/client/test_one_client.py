"""One client layer under replay and generate: the same probe, the same error kinds, the same
verdict on a retry — checked against real HTTP endpoints on 127.0.0.1."""

from __future__ import annotations

import socket
from typing import Any

import orjson
import pytest
from fake_endpoint import Fail, Reply, ScriptedEndpoint

from agentload.agents.limits import EndReason, SessionEnd
from agentload.agents.llm import ChatClient
from agentload.client.failures import Verdict, answer_failure, retry_after_s, verdict
from agentload.client.stream import StreamClient
from agentload.errors import AgentloadError, EndpointUnreachableError, ModelNotFoundError
from agentload.generate.run import check_endpoint
from agentload.measure.errorkinds import ErrorKind

BODY = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}


def _dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


async def _replay_probe(url: str, model: str) -> list[str]:
    client = StreamClient(url, timeout_s=2)
    try:
        return await client.probe(model)
    finally:
        await client.aclose()


async def _said(probe: Any) -> tuple[type[BaseException], str]:
    with pytest.raises(AgentloadError) as info:
        await probe
    return type(info.value), str(info.value)


async def test_generate_and_replay_say_the_same_of_an_endpoint() -> None:
    dead = _dead_url()
    replay = await _said(_replay_probe(dead, "fake"))
    generate = await _said(check_endpoint(dead, "fake", 2))
    assert replay == generate and replay[0] is EndpointUnreachableError
    assert f"{dead}/models: endpoint unreachable" in replay[1]
    with ScriptedEndpoint(lambda b: Reply()) as ep:
        replay = await _said(_replay_probe(ep.base_url, "nope"))
        generate = await _said(check_endpoint(ep.base_url, "nope", 2))
        assert replay == generate and replay[0] is ModelNotFoundError
        assert "model 'nope' not served; available: fake" in replay[1]
        # both find the listed model; generate alone may leave the choice to the list
        assert await _replay_probe(ep.base_url, "fake") == ["fake"]
        assert await check_endpoint(ep.base_url, None, 2) == "fake"
        # an endpoint that keeps no models list: replay refuses it, an agent run goes on
        bare = f"http://127.0.0.1:{ep.port}/elsewhere"
        with pytest.raises(EndpointUnreachableError, match="HTTP 404 from the models list"):
            await _replay_probe(bare, "fake")
        assert await check_endpoint(bare, "fake", 2) == "fake"


async def _replay_kind(url: str) -> str | None:
    client = StreamClient(url, timeout_s=5)
    try:
        out = await client.chat(orjson.dumps({**BODY, "stream": True}))
    finally:
        await client.aclose()
    return out.error_kind


async def _agent_end(url: str) -> tuple[EndReason | None, str | None, int]:
    """How an agent's call against ``url`` ends: its reason and cause, or (None, None) when a
    retry succeeded; and the attempts made."""
    client = ChatClient(url, model="fake", retries=1, backoff_s=0.01)
    try:
        r = await client.complete(dict(BODY))
    except SessionEnd as end:
        return end.reason, end.cause, 0
    finally:
        await client.aclose()
    return None, None, r.attempts


@pytest.mark.parametrize(
    ("fail", "kind", "agent"),
    [
        # a full context, in any refusal but a "not now": both sides call it an overflow
        (Fail(400, "This model's maximum context length is 8192 tokens"), "context_overflow",
         (EndReason.CONTEXT_LIMIT, "context_overflow", 0)),
        (Fail(500, "request (40021 tokens) exceeds the available context size (32768 tokens)"),
         "context_overflow", (EndReason.CONTEXT_LIMIT, "context_overflow", 0)),
        # a rate limit that speaks of tokens is a rate limit: retried, then it succeeds
        (Fail(429, "too many tokens per minute"), "http_429", (None, None, 2)),
        (Fail(404, "no such route"), "http_404",
         (EndReason.ENDPOINT_ERROR, "bad_request", 0)),
        (Fail(500, "Failed to parse tool call arguments as JSON"), "http_500",
         (EndReason.ENDPOINT_ERROR, "request_error", 0)),
    ],
)  # fmt: skip
async def test_replay_and_the_agents_classify_a_failure_once(
    fail: Fail, kind: str, agent: tuple[EndReason | None, str | None, int]
) -> None:
    answers = iter([fail])
    with ScriptedEndpoint(lambda b: next(answers, Reply("fine"))) as ep:
        assert await _replay_kind(ep.base_url) == kind
        answers = iter([fail])
        assert await _agent_end(ep.base_url) == agent


@pytest.mark.parametrize(
    ("kind", "status", "text", "last", "expected"),
    [
        (ErrorKind.CONTEXT_OVERFLOW, 400, "x", None, Verdict.CONTEXT_OVERFLOW),
        (ErrorKind.TIMEOUT, None, "x", None, Verdict.TRANSIENT),
        (ErrorKind.CONNECT, None, "x", None, Verdict.TRANSIENT),
        (ErrorKind.RESET, None, "x", None, Verdict.TRANSIENT),
        (ErrorKind.TRUNCATED, 200, "x", None, Verdict.TRANSIENT),
        (ErrorKind.STREAM_ERROR, 200, "boom", None, Verdict.TRANSIENT),
        (ErrorKind.STREAM_ERROR, 200, "failed to parse messages", None, Verdict.REQUEST_ERROR),
        ("http_503", 503, "busy", "busy", Verdict.TRANSIENT),
        ("http_401", 401, "no", None, Verdict.BAD_REQUEST),
        ("http_500", 500, "boom", "boom", Verdict.REPEATED),
        ("http_500", 500, "boom", "bang", Verdict.TRANSIENT),
    ],
)
def test_each_kind_has_one_verdict(
    kind: str, status: int | None, text: str, last: str | None, expected: Verdict
) -> None:
    assert verdict(kind, status, text, last) is expected


def test_overflow_is_read_from_any_refusal_but_a_not_now() -> None:
    assert answer_failure(413, b"prompt is too long") == ErrorKind.CONTEXT_OVERFLOW
    assert answer_failure(503, b"too many tokens in flight") == "http_503"
    assert answer_failure(400, b"string too long") == "http_400"
    assert retry_after_s("2.5") == 2.5 and retry_after_s("soon") is None


async def test_an_agent_call_is_timed_by_the_clients_stream_reader() -> None:
    # The answer is reassembled by wire's reader and every event (the role chunk and the
    # usage chunk too) has its time; the content events are the chunks the display counts.
    seen: list[int] = []
    with ScriptedEndpoint(lambda b: Reply("x" * 24, prompt_tokens=77)) as ep:
        client = ChatClient(ep.base_url, model="fake")
        try:
            r = await client.complete(dict(BODY), on_chunk=seen.append)
        finally:
            await client.aclose()
    assert r.content == "x" * 24 and r.prompt_tokens == 77 and r.finish_reason == "stop"
    assert seen == [1, 2, 3]  # three content chunks of 8
    assert r.chunks == len(r.timings.chunk_offsets_ns) == 6  # role, 3 content, finish, usage
    assert r.timings.first_token_ns is not None and r.timings.first_token_ns > r.timings.submit_ns
