"""``agentload generate`` against a misbehaving endpoint: every fault ends in bounded time, with
the right end reason and exit code, and a valid trace that accounts for every attempt.

Each case runs the real CLI (``-s quick --sandbox local``) in a subprocess with a hard timeout,
against the fault server on 127.0.0.1, with ``--call-timeout 1`` and ``--retries`` 0 or 1.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
from faultserver import FaultPlan, FaultServer
from genrun import attempts, generate, session_wall_s, validate_cli

CALL_TIMEOUT_S = 1.0
BACKOFF_S = 0.5  # generate's first backoff; the n-th retry waits 0.5 * 2**(n-1) s
SLACK_S = 2.5  # scheduling on a busy 2-core machine, several runs at once
QUICK_CALLS = 6  # quick on a model that only answers: the first answer and 5 follow-ups


def _args(srv: FaultServer, retries: int, call_timeout: float = CALL_TIMEOUT_S) -> list[str]:
    return [
        "--endpoint",
        srv.base_url,
        "--call-timeout",
        f"{call_timeout:g}",
        "--retries",
        str(retries),
        "--json",
    ]


FAILING = [
    ("500", 1),
    ("429", 1),
    ("reset", 1),
    ("stall", 1),
    ("blackhole", 1),
    ("drip", 1),
    ("malformed", 1),
    ("endless", 1),
    ("stall", 0),
]


def _failing_case(tmp: Path, fault: str, retries: int) -> Callable[[], None]:
    """Run one failing-endpoint case; returns its checks (run on the test's thread)."""
    with FaultServer(FaultPlan(chat=[fault], retry_after_s=1)) as srv:
        run = generate(tmp, *_args(srv, retries))
        requests = srv.chat_requests

    def check() -> None:
        assert run.proc.returncode == 1, run.proc.stderr  # every session failed
        row = orjson.loads(run.proc.stdout)["sessions"][0]
        assert row["end_reason"] == "endpoint_error" and row["calls"] == 0
        trace = run.trace()
        assert trace.sessions["s0-0"].end_reason == "endpoint_error"
        # One attempt per try, all accounted for, the last one an error event.
        got = attempts(trace)
        assert got.total == requests == retries + 1
        assert (got.ok, got.retried, got.failed_last) == (0, retries, 1)
        (err,) = [e for e in trace.events if e.kind == "error"]
        assert err.details["reason"] == "endpoint_error"
        assert err.details["attempt"] == retries + 1
        # (retries + 1) attempts of at most --call-timeout, plus the waits in between.
        asked = 1.0 if fault == "429" else 0.0
        waits = sum(max(BACKOFF_S * 2**i, asked) for i in range(retries))
        bound = (retries + 1) * CALL_TIMEOUT_S + waits
        assert session_wall_s(trace) <= bound + SLACK_S
        assert run.wall_s <= bound + 30  # + interpreter start, workspace, shutdown (busy CPUs)

    check.trace_path = run.trace_path  # type: ignore[attr-defined]
    return check


def test_a_failing_endpoint_ends_the_session_in_bounded_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """500, 429 (Retry-After), reset mid-stream, stall, black hole, one-byte drip, malformed
    SSE, a body that never ends: each run ends on ``endpoint_error`` within
    ``(retries + 1) * --call-timeout`` plus the backoff. The runs go 4 at a time (they mostly
    wait), each on its own fault server."""
    dirs = [tmp_path / f"{fault}-r{retries}" for fault, retries in FAILING]
    with ThreadPoolExecutor(4) as pool:
        checks = list(
            pool.map(
                lambda c: _failing_case(*c), [(d, *c) for d, c in zip(dirs, FAILING, strict=True)]
            )
        )
    for (fault, retries), check in zip(FAILING, checks, strict=True):
        try:
            check()
            validate_cli(check.trace_path, capsys)  # type: ignore[attr-defined]
        except AssertionError as exc:
            raise AssertionError(f"fault {fault}, --retries {retries}: {exc}") from None


def test_a_share_of_failures_is_retried_and_the_session_completes(
    fault_server: Callable[..., FaultServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = ["ok", "500", "ok", "429", "ok", "reset", "ok", "malformed"]
    srv = fault_server(chat=plan, retry_after_s=1)
    run = generate(tmp_path, *_args(srv, retries=1))
    assert run.proc.returncode == 0, run.proc.stderr
    validate_cli(run.trace_path, capsys)
    trace = run.trace()
    assert trace.sessions["s0-0"].end_reason == "done"
    got = attempts(trace)
    assert got.ok == QUICK_CALLS and got.failed_last == 0
    assert got.total == srv.chat_requests and got.retried == srv.chat_requests - QUICK_CALLS
    assert got.retried >= 3
    errors = [e.details["error"] for e in trace.events if e.kind == "retry"]
    assert any("HTTP 500" in e for e in errors) and any("HTTP 429" in e for e in errors)


@pytest.mark.parametrize("plan", [{"models": "blackhole"}, {"accept_only": True}])
def test_a_silent_models_probe_is_one_line_and_exit_2(
    fault_server: Callable[..., FaultServer], tmp_path: Path, plan: dict[str, object]
) -> None:
    srv = fault_server(**plan)
    run = generate(tmp_path, "--endpoint", srv.base_url, "--call-timeout", "1")
    assert run.proc.returncode == 2, run.proc.stderr
    lines = run.proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "endpoint unreachable" in lines[0] and srv.base_url in lines[0]
    assert "within 1s" in lines[0]
    assert run.wall_s < 15  # the probe gives up after min(10 s, --call-timeout)
    assert srv.chat_requests == 0 and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("chat", "retry_after", "budget_s", "calls"),
    [
        (["ok", "stall"], 1, 2.0, 1),  # cut in flight at the deadline
        (["429"], 30, 2.0, 0),  # a retry wait past the deadline is not waited out
    ],
)
def test_the_wall_budget_ends_a_call_in_flight(
    fault_server: Callable[..., FaultServer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    chat: list[str],
    retry_after: int,
    budget_s: float,
    calls: int,
) -> None:
    srv = fault_server(chat=chat, retry_after_s=retry_after)
    run = generate(
        tmp_path, *_args(srv, retries=3, call_timeout=60), "-c", f"wall_budget_s={budget_s}"
    )
    assert run.proc.returncode == 0, run.proc.stderr  # wall_budget is not a failure
    validate_cli(run.trace_path, capsys)
    trace = run.trace()
    assert trace.sessions["s0-0"].end_reason == "wall_budget"
    got = attempts(trace)
    assert (got.ok, got.failed_last) == (calls, 1) and got.total == srv.chat_requests
    (err,) = [e for e in trace.events if e.kind == "error"]
    assert err.details["reason"] == "wall_budget"
    assert session_wall_s(trace) <= budget_s + SLACK_S


def test_an_endpoint_killed_mid_run_and_restarted_is_retried_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The endpoint dies during the third call and is back 1 s later on the same port: the
    call's retries (0.5 s, 1 s, 2 s apart) outlast the outage and the session completes."""
    first = FaultServer(FaultPlan(chat=["ok", "ok", "stall"])).start()
    servers = [first]

    def kill_and_restart() -> None:
        deadline = time.monotonic() + 30
        while first.counts["chat:stall"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        first.stop()
        time.sleep(1.0)
        servers.append(FaultServer(FaultPlan(chat=["ok"]), port=first.port).start())

    killer = threading.Thread(target=kill_and_restart, daemon=True)
    killer.start()
    try:
        run = generate(tmp_path, *_args(first, retries=3, call_timeout=10))
    finally:
        killer.join(10)
        for srv in servers:
            srv.stop()
    assert run.proc.returncode == 0, run.proc.stderr
    validate_cli(run.trace_path, capsys)
    trace = run.trace()
    assert trace.sessions["s0-0"].end_reason == "done"
    got = attempts(trace)
    assert got.ok == QUICK_CALLS and got.failed_last == 0 and got.retried >= 1
    served = sum(s.chat_requests for s in servers)
    assert got.total >= served  # refused connections reach no server but are attempts
    assert len(servers) == 2 and servers[1].chat_requests >= QUICK_CALLS - 2
