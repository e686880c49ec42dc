"""``generate`` never shows a secret: API keys from the environment, a password in the
endpoint URL and a key in its query string appear in no stdout, stderr or trace byte — also
when the endpoint fails or echoes the key back. The key goes out only as
``Authorization: Bearer``; the URL's query goes to the endpoint, its user:password nowhere."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import zstandard
from faultserver import FaultServer
from genrun import Run, generate

ENV = {"AGENTLOAD_API_KEY": "sk-SECRET123", "OPENAI_API_KEY": "sk-OPENAI456"}
PASSWORD = "PASS789word"
QUERY_KEY = "sk-QUERY000"
SECRETS = [*ENV.values(), PASSWORD, QUERY_KEY]


def _url(port: int) -> str:
    return f"http://agent:{PASSWORD}@127.0.0.1:{port}/v1?api_key={QUERY_KEY}&api-version=7"


def _trace_bytes(out: Path) -> bytes:
    data = b""
    for path in out.glob("*.zst"):
        with path.open("rb") as f:
            data += zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
    return data


def _assert_no_secret(run: Run) -> None:
    shown = {"stdout": run.proc.stdout, "stderr": run.proc.stderr}
    shown["trace"] = _trace_bytes(run.out).decode("utf-8", "replace")
    # The live benchmark's files beside the trace (results.json holds the endpoint and errors).
    for path in run.out.glob("*/*"):
        if path.suffix in (".json", ".csv", ".html"):
            shown[path.name] = path.read_text(errors="replace")
    for where, text in shown.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret} in {where}:\n{text[-2000:]}"


def test_a_run_sends_secrets_only_where_documented(
    fault_server: Callable[..., FaultServer], tmp_path: Path
) -> None:
    srv = fault_server(chat=["ok"])
    run = generate(tmp_path, "--endpoint", _url(srv.port), "--json", env=ENV)
    assert run.proc.returncode == 0, run.proc.stderr
    _assert_no_secret(run)
    assert _trace_bytes(tmp_path)  # there is a trace to search
    assert list(tmp_path.glob("*/results.json"))  # and a live results file
    # One warning line about the URL's user:password (masked), and nothing sent with it; the
    # fault server has no /completions, so the token calibration says so too (URL masked).
    warnings = [ln for ln in run.proc.stderr.splitlines() if "warning" in ln]
    calibration = [ln for ln in warnings if "token calibration failed" in ln]
    assert len(calibration) == 1 and "agent:***@" in calibration[0]
    warnings = [ln for ln in warnings if ln not in calibration]
    assert len(warnings) == 1 and "agent:***@" in warnings[0]
    paths = [(method, path) for method, path, _ in srv.requests]
    assert ("GET", f"/v1/models?api_key={QUERY_KEY}&api-version=7") in paths
    assert ("POST", f"/v1/chat/completions?api_key={QUERY_KEY}&api-version=7") in paths
    assert {h.get("authorization") for _, _, h in srv.requests} == {"Bearer sk-SECRET123"}


def test_a_failing_endpoint_that_echoes_the_key_does_not_leak_it(
    fault_server: Callable[..., FaultServer], tmp_path: Path
) -> None:
    srv = fault_server(chat=["401"])
    run = generate(tmp_path, "--endpoint", _url(srv.port), "--retries", "0", env=ENV)
    assert run.proc.returncode == 1, run.proc.stderr
    assert "endpoint_error" in run.proc.stdout and "HTTP 401" in run.proc.stdout
    _assert_no_secret(run)


def test_an_unreachable_endpoint_error_line_masks_the_url(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = generate(tmp_path, "--endpoint", _url(port), env=ENV)
    assert run.proc.returncode == 2
    (error,) = [ln for ln in run.proc.stderr.splitlines() if "error" in ln]
    assert "does not answer" in error and "api_key=***" in error
    _assert_no_secret(run)
