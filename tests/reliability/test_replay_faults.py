"""``agentload replay`` against a misbehaving endpoint: it ends within a bound, accounts for
every request by cause, computes metrics on successes only, and exits 0, 3 or 2.

Runs go through the real CLI (``agentload.cli.main``) in a worker thread joined with a hard
limit, so a hang fails the test instead of hanging the suite; one case runs the installed
command in a subprocess. The trace is one tiny session of 7 calls (an orchestrator and two
parallel sub-agents); the fault server hands out faults in arrival order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from faultserver import FaultServer

from agentload.cli import main

sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))
from replay_traces import Shape, agentic_trace

MODEL = "fault-model"
CALLS = 7
"""Calls in one session of the trace."""
HARD_LIMIT_S = 45.0
"""No run may take longer than this, whatever it does (a hang fails here)."""


@dataclass
class Run:
    code: int
    wall_s: float
    out: str
    err: str
    results: dict[str, Any] | None
    out_dir: Path

    @property
    def requests(self) -> list[dict[str, Any]]:
        assert self.results is not None
        return [r for p in self.results["points"] for r in p["requests"]]

    @property
    def ok(self) -> int:
        return sum(1 for r in self.requests if r["error_kind"] is None)

    @property
    def failed(self) -> Counter[str]:
        return Counter(r["error_kind"] for r in self.requests if r["error_kind"] is not None)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "t.agentload.jsonl"
    shape = Shape(tool_gap_s=0.02, child_gap_s=0.02, post_gap_s=0.01, system_words=20)
    return agentic_trace(path, sessions=1, shape=shape)


@pytest.fixture
def replay(trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """``replay(url, *options)``: ``agentload replay TRACE --endpoint URL --model ... --out DIR
    OPTIONS`` in-process, joined within ``HARD_LIMIT_S``."""

    def run(url: str, *options: str, out: bool = True) -> Run:
        dest = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        argv = ["replay", str(trace), "--endpoint", url, "--model", MODEL, *options]
        argv += ["--out", str(dest)] if out else []
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                main(argv)
            except SystemExit as exc:
                box["code"] = int(exc.code or 0)
            except BaseException as exc:  # a bug: reported by the assertion below
                box["exc"] = exc

        capsys.readouterr()
        worker = threading.Thread(target=target, daemon=True)
        t0 = time.monotonic()
        worker.start()
        worker.join(HARD_LIMIT_S)
        wall = time.monotonic() - t0
        assert not worker.is_alive(), f"replay still running after {HARD_LIMIT_S}s"
        assert "exc" not in box, repr(box.get("exc"))
        cap = capsys.readouterr()
        assert "Traceback" not in cap.err
        path = dest / "results.json"
        results = orjson.loads(path.read_bytes()) if path.exists() else None
        return Run(box["code"], wall, cap.out, cap.err, results, dest)

    return run


def _assert_accounting(run: Run, srv: FaultServer, ok: int, failed: dict[str, int]) -> None:
    """Every request the server saw is one record, ok or failed by cause, and the latency
    metrics count the successes only."""
    assert len(run.requests) == srv.chat_requests == ok + sum(failed.values())
    assert (run.ok, dict(run.failed)) == (ok, failed)
    assert run.results is not None
    agg = run.results["points"][0]["aggregates"]
    assert agg["errors"] == failed
    measured_ok = [r for r in run.requests if r["phase"] == "measured" and r["error_kind"] is None]
    for tag in ("e2e_ms", "ttft_ms"):
        assert (agg[tag] or {"n": 0})["n"] == len(measured_ok), tag
    if agg["e2e_ms"] is not None:  # no timed-out request's E2E entered the distribution
        timeout_ms = run.results["config"]["timeout_s"] * 1000
        assert agg["e2e_ms"]["max"] < timeout_ms


FAULT_CASES = [
    # fault, --max-error-rate, (ok, {cause: n}), exit code, bound on the point's wall time (s);
    # 3 of 7 requests fail (42.9%): exit 0 at a limit of 0.5, exit 3 below 0.429
    pytest.param("500", "0.5", 4, {"http_500": 3}, 0, 3.0, id="500"),
    pytest.param("429", "0.25", 4, {"http_429": 3}, 3, 3.0, id="429-retry-after"),
    pytest.param("reset", "0.4", 4, {"reset": 3}, 3, 3.0, id="reset-mid-stream"),
    pytest.param("stall", "0.5", 4, {"timeout": 3}, 0, 3 * 0.6 + 2.0, id="stall"),
    pytest.param("malformed", "0.4", 4, {"stream_error": 3}, 3, 3.0, id="malformed-sse"),
    pytest.param("endless", "0.5", 4, {"timeout": 3}, 0, 3 * 0.6 + 2.0, id="endless-body"),
    pytest.param("drip", "0.4", 4, {"timeout": 3}, 3, 3 * 0.6 + 2.0, id="one-byte-drip"),
]


@pytest.mark.parametrize(("fault", "rate", "ok", "failed", "code", "bound"), FAULT_CASES)
def test_a_share_of_faulty_requests_is_counted_by_cause(
    fault_server: Callable[..., FaultServer],
    replay: Callable[..., Run],
    fault: str,
    rate: str,
    ok: int,
    failed: dict[str, int],
    code: int,
    bound: float,
) -> None:
    # every other request fails: 4 ok and 3 faulty of the session's 7 (in arrival order); the
    # drip writes a byte every 20 ms, so only a bound on the whole request stops it
    srv = fault_server(chat=["ok", fault], drip_s=0.02)
    run = replay(srv.base_url, "--start-at", "zero", "--timeout", "0.6", "--max-error-rate", rate)
    assert run.code == code, run.out + run.err
    assert run.results is not None and run.results["points"][0]["wall_s"] < bound
    _assert_accounting(run, srv, ok, failed)
    verdict = [line for line in run.out.splitlines() if line.startswith("exit code 3:")]
    [(cause, n)] = failed.items()
    expected = f"exit code 3: 3 of 7 requests failed (42.9%, above --max-error-rate {rate}): "
    assert verdict == ([f"{expected}{cause} {n}"] if code == 3 else [])


def test_a_kept_alive_connection_the_server_closes_as_a_request_arrives_is_retried_once(
    fault_server: Callable[..., FaultServer], replay: Callable[..., Run]
) -> None:
    # A server's idle timeout (5 s in uvicorn and cpp-httplib, as httpx's keep-alive) can close
    # a pooled connection just as a request goes out: it was never read, so it goes once more
    # on a new connection (llama-server did this once in CI: one request "Server disconnected
    # without sending a response"). Here every reused connection is closed so.
    srv = fault_server(chat=["dropkept"])
    run = replay(srv.base_url, "--start-at", "zero", "--timeout", "5")
    assert run.code == 0, run.out + run.err
    assert srv.counts["dropkept_closed"] >= 1  # the race happened
    assert run.ok == CALLS and not run.failed
    assert srv.chat_requests == CALLS + srv.counts["dropkept_closed"]


def test_a_run_against_a_black_hole_ends_by_its_duration(
    fault_server: Callable[..., FaultServer], replay: Callable[..., Run]
) -> None:
    """Every request hangs: the point still ends within --duration + --timeout (+ one more
    --timeout for the warm-up of a mid-flight join), and exits 3 with every request a timeout."""
    srv = fault_server(chat=["blackhole"])
    duration, timeout = 1.0, 0.5
    for start, bound in (("zero", duration + timeout), ("random", duration + 2 * timeout)):
        opts = ["--start-at", start, "--duration", "1", "--timeout", "0.5", "--concurrency", "2"]
        run = replay(srv.base_url, *opts)
        assert run.code == 3
        assert run.results is not None
        assert run.results["points"][0]["wall_s"] < bound + 0.5
        assert run.ok == 0 and set(run.failed) == {"timeout"}
        assert "requests failed (100.0%, above --max-error-rate 0.5): timeout" in run.out
        assert run.results["points"][0]["aggregates"]["ttft_ms"] is None
    assert srv.chat_requests == sum(srv.counts[k] for k in srv.counts if k.startswith("chat:"))


def test_an_arrival_rate_the_client_cannot_keep_up_with_still_ends_by_its_duration(
    fault_server: Callable[..., FaultServer], replay: Callable[..., Run]
) -> None:
    """The arrival loop, always behind schedule, still lets the deadline run. Sessions start
    faster than the server answers, so requests queue for the client's connections; one that
    waited past --timeout (the wait counts) is a timeout, possibly before it was ever sent,
    and with enough of them the run exits 3 (the endpoint's verdict, not a failure)."""
    srv = fault_server()
    run = replay(srv.base_url, "--arrival-rate", "1e9", "--duration", "0.5", "--timeout", "1")
    assert run.code in (0, 3) and run.results is not None
    assert run.results["points"][0]["wall_s"] < 0.5 + 1.0 + 1.0
    assert set(run.failed) <= {"timeout"}
    assert 0 < run.ok <= srv.chat_requests <= len(run.requests)


@pytest.mark.parametrize(
    "plan", [{"models": "blackhole"}, {"accept_only": True}], ids=["models-probe", "accept-only"]
)
def test_an_endpoint_that_never_answers_is_one_line_and_exit_2(
    fault_server: Callable[..., FaultServer], replay: Callable[..., Run], plan: dict[str, Any]
) -> None:
    srv = fault_server(**plan)
    run = replay(srv.base_url, "--timeout", "1")
    assert run.code == 2
    assert run.wall_s < 1.0 + 3.0  # the probe's bound (min(--timeout, 10 s)) + reading the trace
    assert run.err == (
        f"agentload: error: {srv.base_url}/models: endpoint unreachable "
        "(connected, but no answer within 1s)\n"
    )
    assert srv.chat_requests == 0 and run.results is None


def test_the_installed_command_gives_up_on_a_silent_listener(
    fault_server: Callable[..., FaultServer], trace: Path
) -> None:
    """The real process: one line, exit 2, no traceback, within the probe's bound."""
    srv = fault_server(accept_only=True)
    argv = [sys.executable, "-m", "agentload", "replay", str(trace), "--endpoint", srv.base_url]
    proc = subprocess.run(
        [*argv, "--model", MODEL, "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no answer within 1s" in proc.stderr
    assert srv.base_url in proc.stderr and "Traceback" not in proc.stderr


def test_an_endpoint_killed_and_restarted_mid_run(
    fault_server: Callable[..., FaultServer], trace: Path, tmp_path: Path
) -> None:
    """The run keeps going: requests in flight when the endpoint dies fail as ``reset``, those
    sent while it is down as ``connect`` (at once), and once it is back on the same port the
    next requests open new connections and succeed."""
    first = fault_server(chat=["ok"])
    out = tmp_path / "r"
    argv = ["replay", str(trace), "--endpoint", first.base_url, "--model", MODEL]
    argv += ["--duration", "2.5", "--timeout", "1", "--concurrency", "2", "--start-at", "zero"]
    argv += ["--max-error-rate", "1", "--out", str(out)]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            main(argv)
        except SystemExit as exc:
            box["code"] = exc.code

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    deadline = time.monotonic() + 20
    while first.chat_requests < 10 and time.monotonic() < deadline:
        time.sleep(0.02)
    first.stop()
    down_at = time.monotonic()
    time.sleep(0.5)
    second = fault_server(port=first.port, chat=["ok"])
    worker.join(HARD_LIMIT_S)
    assert not worker.is_alive() and box["code"] == 0
    assert time.monotonic() - down_at < 2.5 + 1.0 + 3.0
    res = orjson.loads((out / "results.json").read_bytes())
    reqs = res["points"][0]["requests"]
    failed = Counter(r["error_kind"] for r in reqs if r["error_kind"] is not None)
    ok = [r for r in reqs if r["error_kind"] is None]
    assert failed["connect"] > 0 and set(failed) <= {"connect", "reset"}
    assert second.chat_requests > 0  # it went on after the restart
    # a reset request may have died on a pooled connection before the server read it; the
    # requests still in flight when the window closed (at most --concurrency) are not measured
    seen = first.chat_requests + second.chat_requests
    assert len(ok) <= seen <= len(ok) + failed["reset"] + 2
    assert res["points"][0]["aggregates"]["errors"] == dict(failed)
    last_failure = max(r["end_ns"] for r in reqs if r["error_kind"] is not None)
    assert any(r["send_ns"] > last_failure for r in ok)  # successes after the gap


def test_url_credentials_never_appear_and_the_query_is_kept(
    fault_server: Callable[..., FaultServer],
    replay: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secrets = ("S3cretPass", "QueryKey123", "sk-envkey-0123456789abcdef")
    monkeypatch.setenv("AGENTLOAD_API_KEY", secrets[2])
    srv = fault_server(chat=["ok", "500"])  # the 500 echoes the request line, query included
    url = f"http://agent:{secrets[0]}@127.0.0.1:{srv.port}/v1?api_key={secrets[1]}&api-version=2"
    run = replay(url, "--start-at", "zero", "--scrape-metrics", url.replace("/v1", "/metrics"))
    assert run.code == 0, run.err
    query = f"?api_key={secrets[1]}&api-version=2"
    assert srv.targets[0] == "/v1/models" + query
    assert set(srv.targets[1:]) <= {
        "/v1/models" + query,
        "/v1/chat/completions" + query,
        "/metrics" + query,  # a 404: the scrape's error text carries the URL
    }
    assert srv.chat_requests == CALLS
    assert run.results is not None
    shown = f"http://***@127.0.0.1:{srv.port}/v1?api_key=***&api-version=2"
    assert run.results["config"]["endpoint"] == shown
    errors = [r["error"] for r in run.requests if r["error_kind"] == "http_500"]
    assert errors and all("api_key=***" in e for e in errors)
    scrape = run.results["points"][0]["scrape"]
    assert scrape["failures"] > 0 and scrape["url"].endswith("/metrics?api_key=***&api-version=2")
    written = sorted(p.name for p in run.out_dir.iterdir())
    assert {"results.json", "summary.csv", "report.html"} <= set(written)
    texts = [run.out, run.err, *(p.read_text(errors="replace") for p in run.out_dir.iterdir())]
    assert not [s for s in secrets for text in texts if s in text]
    # and an unreachable endpoint's line is redacted too
    hole = fault_server(models="blackhole")
    run = replay(url.replace(str(srv.port), str(hole.port)), "--timeout", "0.5", out=False)
    lines = run.err.splitlines()  # the user info warning, then the error
    assert run.code == 2 and len(lines) == 2 and "the user info in the URL" in lines[0]
    assert f"127.0.0.1:{hole.port}/v1/models?api_key=***&api-version=2" in run.err
    assert not any(s in run.err for s in secrets)


BAD_OPTIONS = [
    (["--gpus", "-1"], "--gpus -1: "),
    (["--gpus", "0"], "--gpus 0: "),
    (["--power-watts", "-5"], "--power-watts -5.0: "),
    (["--power-watts", "0"], "--power-watts 0.0: "),
    (["--power-watts", "nan"], "--power-watts nan: "),
    (["--power-watts", "inf"], "--power-watts inf: "),
    (["--timeout", "0"], "--timeout 0.0: "),
    (["--timeout", "-1"], "--timeout -1.0: "),
    (["--timeout", "nan"], "--timeout nan: "),
    (["--timeout", "inf"], "--timeout inf: "),
    (["--sessions", "0"], "--sessions 0: "),
    (["--sessions", "-5"], "--sessions -5: "),
    (["--duration", "-1"], "--duration -1.0: "),
    (["--duration", "0"], "--duration 0.0: "),
    (["--duration", "nan"], "--duration nan: "),
    (["--duration", "inf"], "--duration inf: "),
    (["--sweep", ""], "--concurrency/--sweep/--parallel '': "),
    (["--sweep", "1,,2"], "--concurrency/--sweep/--parallel '1,,2': "),
    (["--sweep", "0"], "--concurrency/--sweep/--parallel '0': "),
    (["--sweep", "-1"], "--concurrency/--sweep/--parallel '-1': "),
    (["--sweep", "abc"], "--concurrency/--sweep/--parallel 'abc': "),
    (["--sweep", "1,2,"], "--concurrency/--sweep/--parallel '1,2,': "),
    (["--concurrency", "0"], "--concurrency/--sweep/--parallel '0': "),
    (["--gap-scale", "nan"], "--gap-scale nan: "),
    (["--gap-scale", "inf"], "--gap-scale inf: "),
    (["--gap-scale", "-0.5"], "--gap-scale -0.5: "),
    (["--arrival-rate", "0"], "--arrival-rate 0.0: "),
    (["--arrival-rate", "-2"], "--arrival-rate -2.0: "),
    (["--arrival-rate", "nan"], "--arrival-rate nan: "),
    (["--arrival-rate", "inf"], "--arrival-rate inf: "),
    (["--max-error-rate", "-0.1"], "--max-error-rate -0.1: "),
    (["--max-error-rate", "1.5"], "--max-error-rate 1.5: "),
    (["--max-error-rate", "nan"], "--max-error-rate nan: "),
    (["--max-error-rate", "inf"], "--max-error-rate inf: "),
    (["--target-tps-user", "0"], "--target-tps-user 0.0: "),
    (["--target-tps-user", "nan"], "--target-tps-user nan: "),
    (["--target-tps-user", "inf"], "--target-tps-user inf: "),
    (["--max-context", "0"], "--max-context 0: "),
    (["--slo", "ttft=0"], "--slo 'ttft=0': "),
    (["--slo", "e2e=0ms"], "--slo 'e2e=0ms': "),
]


@pytest.mark.parametrize(
    ("options", "names"), BAD_OPTIONS, ids=[" ".join(o) or "empty" for o, _ in BAD_OPTIONS]
)
def test_a_meaningless_option_value_is_one_line_and_exit_2(
    fault_server: Callable[..., FaultServer],
    replay: Callable[..., Run],
    options: list[str],
    names: str,
) -> None:
    srv = fault_server()
    run = replay(srv.base_url, *options)
    assert run.code == 2
    assert run.err.startswith(f"agentload: error: {names}") and run.err.count("\n") == 1, run.err
    assert not srv.counts  # not even the probe


def _under_a_file(tmp: Path) -> Path:
    (tmp / "plain").write_text("x")
    return tmp / "plain" / "sub"


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        (lambda tmp: tmp / "plain", "exists and is not a directory"),
        (lambda tmp: Path("/proc/agentload-x"), "cannot write there"),
        (_under_a_file, "cannot write there"),
    ],
    ids=["a-file", "proc", "under-a-file"],
)
def test_an_unwritable_out_is_one_line_before_any_load(
    fault_server: Callable[..., FaultServer],
    replay: Callable[..., Run],
    tmp_path: Path,
    where: Callable[[Path], Path],
    reason: str,
) -> None:
    (tmp_path / "plain").write_text("x")
    out = where(tmp_path)
    srv = fault_server()
    run = replay(srv.base_url, "--out", str(out), out=False)
    assert run.code == 2
    assert run.err.startswith(f"agentload: error: --out {out}: {reason}")
    assert run.err.count("\n") == 1 and not srv.counts


def test_report_checks_its_out_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plain").write_text("x")
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path / "none"), "--out", str(tmp_path / "plain")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == f"agentload: error: --out {tmp_path / 'plain'}: exists and is not a directory\n"
