"""The fault server does what the reliability cases rely on (each fault, over real HTTP)."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
from faultserver import FaultServer


def _first_bytes(srv: FaultServer, timeout: float = 1.0) -> tuple[int | str, int]:
    try:
        with (
            httpx.Client(timeout=timeout) as c,
            c.stream("POST", srv.base_url + "/chat/completions", json={}) as r,
        ):
            n = 0
            t0 = time.monotonic()
            for chunk in r.iter_bytes():
                n += len(chunk)
                if time.monotonic() - t0 > timeout:
                    break
            return r.status_code, n
    except httpx.HTTPError as exc:
        return type(exc).__name__, 0


def test_each_fault_behaves_as_documented(fault_server: Callable[..., FaultServer]) -> None:
    srv = fault_server(
        chat=["ok", "500", "429", "reset", "malformed", "stall", "blackhole", "endless"]
    )
    ok = _first_bytes(srv)
    assert ok[0] == 200 and ok[1] > 0
    assert _first_bytes(srv)[0] == 500
    with httpx.Client() as c:
        r = c.post(srv.base_url + "/chat/completions", json={})
    assert (r.status_code, r.headers["retry-after"]) == (429, "1")
    assert _first_bytes(srv)[0] == "ReadError"  # reset mid-stream
    assert _first_bytes(srv)[0] == 200  # malformed events, but a 200
    assert _first_bytes(srv)[0] == "ReadTimeout"  # stall after one chunk
    assert _first_bytes(srv)[0] == "ReadTimeout"  # black hole
    endless = _first_bytes(srv, 0.5)
    assert endless[0] == 200 and endless[1] > 2000
    assert srv.chat_requests == 8


@pytest.mark.parametrize("plan", [{"models": "blackhole"}, {"accept_only": True}])
def test_silent_listeners_never_answer(
    fault_server: Callable[..., FaultServer], plan: dict[str, object]
) -> None:
    srv = fault_server(**plan)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(srv.base_url + "/models", timeout=0.5)
