"""What an agent sends that the recorder cannot type still leaves a valid trace (issue 28,
class 5). Before, ``"max_tokens": "lots"`` (forwarded and answered) failed in the recorder after
the call's prefix blocks were registered: the next call named the lost one as its
``prefix.base`` and ``trace validate``, ``stats`` and ``replay`` refused the whole file. A
message whose content is an object crashed replay's salting with a traceback.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx

from agentload.options.replay import ReplayConfig
from agentload.replay.run import run_replay
from agentload.trace.trace import load_trace

_SYSTEM = {"role": "system", "content": "You are a careful assistant. " * 20}


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentload", *argv], capture_output=True, text=True, timeout=120
    )


def test_a_request_with_odd_values_is_recorded_and_the_trace_stays_valid(
    record_proxy: Callable[..., Any], simulator: Any
) -> None:
    proxy = record_proxy(simulator.base_url)
    history: list[dict[str, Any]] = [_SYSTEM, {"role": "user", "content": "Count to three."}]
    odd = [
        {},
        {"max_tokens": "lots", "temperature": "warm", "seed": True},
        {"max_tokens": -5, "top_p": "1e999", "tools": "none"},
        {},
    ]
    with httpx.Client(base_url=proxy.base_url, timeout=30) as client:
        for extra in odd:
            body = {"model": simulator.model, "messages": history, **extra}
            r = client.post("/chat/completions", json=body)
            reply = r.json()["choices"][0]["message"] if r.status_code == 200 else None
            history = [*history, reply or {"role": "assistant", "content": "..."}]
            history.append({"role": "user", "content": "Go on."})
    path = proxy.stop()
    trace = load_trace(path)
    calls = sorted(trace.calls.values(), key=lambda c: c.seq)
    assert len(calls) == 4  # none lost
    assert calls[1].request.max_tokens is None
    assert calls[1].request.extra["max_tokens"] == "lots"  # kept as sent
    assert (
        calls[1].request.extra["temperature"] == "warm" and calls[1].request.extra["seed"] is True
    )
    assert calls[2].request.extra["max_tokens"] == -5
    assert calls[2].request.extra["tools"] == "none" and calls[2].request.tools is None
    assert calls[3].prefix.base == calls[2].id  # the chain holds through the odd calls
    for argv in (("trace", "validate", str(path)), ("trace", "stats", str(path), "--json")):
        res = _cli(*argv)
        assert res.returncode == 0, res.stderr


def test_a_message_whose_content_is_an_object_replays_without_a_traceback(
    record_proxy: Callable[..., Any], simulator: Any
) -> None:
    proxy = record_proxy(simulator.base_url)
    messages = [_SYSTEM, {"role": "user", "content": {"odd": "an object, not text"}}]
    with httpx.Client(base_url=proxy.base_url, timeout=30) as client:
        client.post("/chat/completions", json={"model": simulator.model, "messages": messages})
    path = proxy.stop()
    assert len(load_trace(path).calls) == 1
    for at in ("start", "after-system"):
        cfg = ReplayConfig(
            traces=[str(path)], endpoint=simulator.base_url, model=simulator.model, levels=[1],
            sessions=2, start_at="zero", gap_scale=0.0, salt_at=at, max_error_rate=1.0,
        )  # fmt: skip
        res = asyncio.run(run_replay(cfg))
        assert len(res.points[0].requests) == 2


def test_an_unread_request_is_counted_on_the_stop_line_and_by_validate(
    record_proxy: Callable[..., Any], simulator: Any
) -> None:
    # Issue 29, finding 9: before, the unread request was only an event: the stop line said
    # "recorded 1 calls ... (0 failed)" and `trace validate` said "OK: whole file".
    from agentload.record.cli import stop_line
    from agentload.trace.validate import validate_trace

    proxy = record_proxy(simulator.base_url)
    with httpx.Client(base_url=proxy.base_url, timeout=30) as client:
        client.post("/chat/completions", content=b"not json", headers={"content-type": "x"})
        client.post("/chat/completions", json={"model": simulator.model, "messages": "hi"})
        body = {"model": simulator.model, "messages": [_SYSTEM, {"role": "user", "content": "Hi"}]}
        assert client.post("/chat/completions", json=body).status_code == 200
    path = proxy.stop()
    st = proxy.server.stats
    assert (st.calls, st.unread) == (1, 2)
    line = stop_line(st, str(path), "stopped")
    assert line.startswith("recorded 1 calls in 1 sessions (0 failed); 2 requests not recorded")
    assert "(first: unread_request: " in line and "WebSocket" not in line
    report = validate_trace(path)
    assert report.truncated is None and report.not_recorded == {"unread_request": 2}
    [warning] = report.warnings
    assert warning.startswith("WARNING: 2 requests were not recorded as calls (unread_request 2)")
    done = _cli("trace", "validate", str(path))
    assert done.returncode == 0, done.stderr  # whole: still exit 0
    assert "WARNING: 2 requests were not recorded as calls" in done.stdout, done.stdout
    assert done.stdout.rstrip().endswith("OK: whole file")


def test_a_request_to_a_path_no_api_reads_is_noted_counted_and_shown(
    record_proxy: Callable[..., Any], simulator: Any
) -> None:
    """Issue 48: Gemini CLI's calls were forwarded, answered and recorded as nothing: the stop
    line said "recorded 0 calls" and validate said OK. Every request with a body to a path the
    proxy reads as no API call is an ``unread_request`` event with its method, path (no query),
    status and sizes, counted on the stop line, by validate and by stats; a token count and a
    ``GET`` are not calls and are not counted."""
    from agentload.record.cli import stop_line
    from agentload.trace.stats import compute_stats
    from agentload.trace.validate import validate_trace

    proxy = record_proxy(simulator.base_url)
    sent = [("POST", "/files", b'{"input": "hi"}'), ("PUT", "/api/chat", b"{}"),
            ("POST", "/chat/completions/x?key=sekrit-key-1", b"{}")]  # fmt: skip
    with httpx.Client(base_url=proxy.base_url, timeout=30) as client:
        for method, path, body in sent:
            client.request(method, path, content=body, headers={"content-type": "application/json"})
        client.get("/models")
        client.post("/messages/count_tokens", json={"messages": []})
    path = proxy.stop()
    st = proxy.server.stats
    assert (st.calls, st.unread) == (0, 3)
    line = stop_line(st, str(path), "stopped")
    assert "; 3 requests not recorded (first: unread_request: POST /v1/files: " in line, line
    events = [e for e in load_trace(path).events if e.kind == "unread_request"]
    assert [(e.details["method"], e.details["path"]) for e in events] == [
        ("POST", "/v1/files"), ("PUT", "/v1/api/chat"), ("POST", "/v1/chat/completions/x")
    ]  # fmt: skip
    assert all(e.details["status"] == 404 and e.details["answer_bytes"] > 0 for e in events)
    assert [e.details["request_bytes"] for e in events] == [15, 2, 2]
    assert b"sekrit-key-1" not in path.read_bytes()
    assert validate_trace(path).not_recorded == {"unread_request": 3}
    assert compute_stats(load_trace(path))["unread_requests"] == 3
