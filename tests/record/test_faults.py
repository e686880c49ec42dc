"""A bad upstream through the recording proxy: the agent sees the error as the upstream sent it,
the trace records it, and the proxy keeps serving other streams. Credentials pass through to
the upstream and never reach the trace."""

from __future__ import annotations

import gzip
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
import zstandard

from agentload.masking import PLACEHOLDER_KEY
from agentload.trace.trace import load_trace

sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))

from faultserver import FaultPlan, FaultServer

_BODY = {
    "model": "fault-model",
    "messages": [{"role": "user", "content": "hello there"}],
    "stream": True,
}


def _fault(**plan: Any) -> FaultServer:
    return FaultServer(FaultPlan(**plan)).start()


def _raw(path: Path) -> bytes:
    with path.open("rb") as f:
        return zstandard.ZstdDecompressor().stream_reader(f).read()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_refused_upstream_is_a_502_the_agent_sees_and_the_trace_records(
    record_proxy: Callable[..., Any],
) -> None:
    rp = record_proxy(f"http://127.0.0.1:{_free_port()}/v1")
    with (
        openai.OpenAI(base_url=rp.base_url, api_key="x", max_retries=0) as client,
        pytest.raises(openai.APIStatusError) as err,
    ):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert err.value.status_code == 502
    assert "unreachable" in str(err.value)
    t = load_trace(rp.stop())
    (call,) = t.calls.values()
    assert call.error is not None and "unreachable" in call.error


def test_upstream_500_reaches_the_agent_unchanged(record_proxy: Callable[..., Any]) -> None:
    srv = _fault(chat=["500"])
    try:
        direct = httpx.post(srv.base_url + "/chat/completions", json=_BODY, timeout=10)
        rp = record_proxy(srv.base_url)
        proxied = httpx.post(rp.base_url + "/chat/completions", json=_BODY, timeout=10)
    finally:
        srv.stop()
    assert proxied.status_code == direct.status_code == 500
    # The upstream's body, byte for byte, but for the request line it echoes (same here).
    assert proxied.content == direct.content
    assert proxied.headers["content-type"] == direct.headers["content-type"]
    t = load_trace(rp.stop())
    (call,) = t.calls.values()
    assert call.error is not None and call.error.startswith("HTTP 500: internal error")


def test_a_stream_reset_mid_way_breaks_the_agents_stream_and_is_recorded(
    record_proxy: Callable[..., Any],
) -> None:
    srv = _fault(chat=["reset"], tokens=12)
    try:
        rp = record_proxy(srv.base_url)
        got: list[bytes] = []
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", rp.base_url + "/chat/completions", json=_BODY, timeout=10) as r,
        ):
            assert r.status_code == 200
            for chunk in r.iter_raw():
                got.append(chunk)
    finally:
        srv.stop()
    assert b"data:" in b"".join(got)  # the half that came before the reset reached the agent
    assert b"[DONE]" not in b"".join(got)
    t = load_trace(rp.stop())
    (call,) = t.calls.values()
    assert call.error is not None and "broke the stream" in call.error
    assert call.response.text_len > 0  # what was answered before the reset is kept


def test_the_proxy_keeps_serving_while_streams_fail(record_proxy: Callable[..., Any]) -> None:
    """An endless stream, a reset and a 500 in flight together; the good streams end well."""
    plan = ["endless", "ok", "reset", "ok", "500", "ok", "ok", "ok"]
    srv = _fault(chat=plan, tokens=6)
    results: dict[int, str] = {}
    try:
        rp = record_proxy(srv.base_url)
        endless_open = threading.Event()

        def endless() -> None:
            with httpx.stream(
                "POST", rp.base_url + "/chat/completions", json=_BODY, timeout=10
            ) as r:
                for i, _ in enumerate(r.iter_raw()):
                    endless_open.set()
                    if i > 200:
                        break
            results[0] = "left"

        t0 = threading.Thread(target=endless)
        t0.start()
        assert endless_open.wait(10)
        for n in range(1, len(plan)):
            try:
                r = httpx.post(rp.base_url + "/chat/completions", json=_BODY, timeout=10)
                results[n] = f"{r.status_code}:{b'[DONE]' in r.content}"
            except httpx.HTTPError as exc:
                results[n] = type(exc).__name__
        t0.join(20)
    finally:
        srv.stop()
    assert results == {
        0: "left",
        1: "200:True",
        2: "RemoteProtocolError",
        3: "200:True",
        4: "500:False",
        5: "200:True",
        6: "200:True",
        7: "200:True",
    }
    t = load_trace(rp.stop())
    errors = sorted((c.error or "ok").split(":")[0] for c in t.calls.values())
    assert len(t.calls) == len(plan)
    assert errors.count("ok") == 5


def test_a_client_that_leaves_closes_the_upstream_request(
    record_proxy: Callable[..., Any],
) -> None:
    srv = _fault(chat=["endless"])
    try:
        rp = record_proxy(srv.base_url)
        with httpx.stream("POST", rp.base_url + "/chat/completions", json=_BODY, timeout=10) as r:
            for i, _ in enumerate(r.iter_raw()):
                if i == 3:
                    break
        # The endless handler ends once its connection is gone (it writes every 10 ms).
        deadline = time.monotonic() + 10
        while srv._conns and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not srv._conns, "the upstream request was not closed"
    finally:
        srv.stop()
    t = load_trace(rp.stop())
    (call,) = t.calls.values()
    assert call.error is not None and "client disconnected" in call.error


def test_credentials_pass_through_and_never_reach_the_trace(
    record_proxy: Callable[..., Any],
) -> None:
    key = "sk-proj-" + "Zq7" * 12
    srv = _fault(chat=["ok", "401"])
    try:
        rp = record_proxy(srv.base_url)
        body = {**_BODY, "metadata": {"api_key": key}, "user": "u-1"}
        headers = {"Authorization": f"Bearer {key}", "x-api-key": key, "api-key": key}
        ok = httpx.post(rp.base_url + "/chat/completions", json=body, headers=headers, timeout=10)
        refused = httpx.post(
            rp.base_url + "/chat/completions", json=_BODY, headers=headers, timeout=10
        )
    finally:
        srv.stop()
    assert ok.status_code == 200 and refused.status_code == 401
    sent = srv.requests[0][2]
    assert sent["authorization"] == f"Bearer {key}" and sent["x-api-key"] == key
    assert orjson.loads(srv.bodies[0])["metadata"]["api_key"] == key  # the body is unchanged
    assert key in refused.text  # the upstream's own error quotes it back, to the agent only
    path = rp.stop()
    raw = _raw(path)
    assert key.encode() not in raw and b"Zq7Zq7" not in raw
    t = load_trace(path)
    assert len(t.calls) == 2
    assert all(key not in (c.error or "") for c in t.calls.values())


def test_the_placeholder_key_is_not_learned_as_a_secret(record_proxy: Callable[..., Any]) -> None:
    """``generate --agent`` without a key gives the agent ``agentload-no-key``; what the agent
    writes that names it (a config file, its workspace path ``/tmp/agentload-ws-1``) is kept."""
    srv = _fault(chat=["ok"])
    text = f"ls /tmp/agentload-ws-1  # the agent was given {PLACEHOLDER_KEY}"
    try:
        rp = record_proxy(srv.base_url)
        body = {**_BODY, "messages": [{"role": "user", "content": text}]}
        headers = {"Authorization": f"Bearer {PLACEHOLDER_KEY}"}
        ok = httpx.post(rp.base_url + "/chat/completions", json=body, headers=headers, timeout=10)
    finally:
        srv.stop()
    assert ok.status_code == 200
    assert srv.requests[0][2]["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
    t = load_trace(rp.stop())
    (call,) = t.calls.values()
    assert t.messages(call)[0]["content"] == text, "the text was masked"


class _GzipUpstream:
    """A real HTTP upstream (uvicorn, 127.0.0.1) that gzips its chat answers whatever the
    request accepts, as a misconfigured server or CDN does."""

    def __init__(self) -> None:
        import asyncio

        import uvicorn

        from agentload.endpoint.server.server import bind_socket

        answer = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "fault-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "squeezed hello"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
        body = gzip.compress(orjson.dumps(answer))

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            while (await receive()).get("more_body"):
                pass
            headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        self.sock = bind_socket("127.0.0.1", 0)
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def test_a_compressed_answer_reaches_the_agent_as_sent_and_is_read(
    record_proxy: Callable[..., Any],
) -> None:
    up = _GzipUpstream()
    try:
        rp = record_proxy(up.base_url)
        r = httpx.post(rp.base_url + "/chat/completions", json={**_BODY, "stream": False})
    finally:
        up.stop()
    assert r.headers["content-encoding"] == "gzip"  # as the upstream sent it
    assert r.json()["choices"][0]["message"]["content"] == "squeezed hello"
    t = load_trace(rp.stop())
    (call,) = t.calls.values()
    assert call.error is None and call.response.text_len == len("squeezed hello")
    assert call.usage.prompt_tokens == 5


def test_a_cut_tool_call_the_agent_repaired_keeps_its_thread(
    record_proxy: Callable[..., Any],
) -> None:
    """A reply cut at max_tokens inside a tool call's arguments; the agent carries the call on
    with repaired arguments (as generate does, with ``{}``) and its result: the same agent."""
    srv = _fault(chat=["cutcall", "ok"])
    try:
        rp = record_proxy(srv.base_url)
        url = rp.base_url + "/chat/completions"
        first = httpx.post(url, json=_BODY, timeout=10)
        assert first.status_code == 200 and b'"finish_reason":"length"' in first.content
        events = [orjson.loads(line[6:]) for line in first.content.split(b"\n")
                  if line.startswith(b"data: {")]  # fmt: skip
        deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
        text = "".join(d.get("content") or "" for d in deltas)
        cid = next(tc["id"] for d in deltas for tc in d.get("tool_calls", []) if tc.get("id"))
        history = [
            *_BODY["messages"],  # type: ignore[misc]
            {"role": "assistant", "content": text, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "read_file",
                                                              "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": cid, "content": "error: the call was cut"},
        ]  # fmt: skip
        second = httpx.post(url, json={**_BODY, "messages": history}, timeout=10)
        assert second.status_code == 200
    finally:
        srv.stop()
    t = load_trace(rp.stop())
    assert len(t.agents) == 1 and sorted(c.seq for c in t.calls.values()) == [0, 1]
    (tc,) = t.tool_calls.values()
    assert tc.id == cid and tc.arguments == {} and tc.name == "read_file"
