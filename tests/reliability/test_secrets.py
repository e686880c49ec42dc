"""``generate`` never shows a secret: API keys from the environment, a password in the
endpoint URL and a key in its query string appear in no stdout, stderr or trace byte — also
when the endpoint fails or echoes the key back. The key goes out only as
``Authorization: Bearer``; the URL's query goes to the endpoint, its user:password nowhere."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import zstandard
from faultserver import FaultServer
from genrun import Run, generate

sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))
from replay_traces import agentic_trace

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
    assert len(calibration) == 1 and "http://***@" in calibration[0]
    warnings = [ln for ln in warnings if ln not in calibration]
    assert len(warnings) == 1 and "http://***@" in warnings[0]
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
    assert "endpoint unreachable" in error and "api_key=***" in error
    _assert_no_secret(run)


# -- issue 28, class 6: secret by structure, not by the shape of a vendor's key -----------------
# None of these looks like an OpenAI key: each is secret because of where it sits.
TOKEN = "ghp0tokenOnlyUserinfo42"  # http://TOKEN@host, the usual form of a Git token
GIT_PW, GIT_TOK = "GitPassw0rd77", "QueryT0ken99"
ODD_KEY = "gsk_notAnSkKey_0123456"  # a Groq-style key an upstream's 401 quotes back
OTLP_TOK = "OtlpQueryT0k3n"
ODD = [TOKEN, GIT_PW, GIT_TOK, ODD_KEY, OTLP_TOK]


def _cli(*argv: str, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "agentload", *argv],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )  # fmt: skip


def _files_text(root: Path) -> str:
    text = ""
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".zst":
                with path.open("rb") as f:
                    reader = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
                    data = reader.read()
            text += data.decode("utf-8", "replace")
    return text


def _no_odd_secret(*texts: str) -> None:
    for text in texts:
        for secret in ODD:
            if text.islower():
                secret = secret.lower()
            assert secret not in text, f"{secret} in:\n{text[-3000:]}"


def test_token_only_userinfo_is_masked_in_lines_trace_and_results(
    fault_server: Callable[..., FaultServer], tmp_path: Path
) -> None:
    srv = fault_server(chat=["ok"])
    url = f"http://{TOKEN}@127.0.0.1:{srv.port}/v1?page={GIT_TOK}&api-version=7"
    run = generate(tmp_path, "--endpoint", url, "--json", env=ENV)
    assert run.proc.returncode == 0, run.proc.stderr
    _no_odd_secret(run.proc.stdout, run.proc.stderr, _files_text(tmp_path))
    assert "http://***@127.0.0.1" in run.proc.stderr  # the warning says what is ignored
    assert "api-version=7" in _files_text(tmp_path)  # a plain query value is shown


def test_a_git_recipe_credentials_reach_no_line_header_or_event(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    recipe = f"git:http://gituser:{GIT_PW}@127.0.0.1:{port}/x.git?token={GIT_TOK}"
    run = generate(tmp_path, "-c", f"workspace.recipe={recipe}")
    assert run.proc.returncode == 2, run.proc.stderr  # the clone fails: one line
    assert "git clone failed" in run.proc.stderr
    _no_odd_secret(run.proc.stdout, run.proc.stderr, _files_text(tmp_path))


@pytest.mark.parametrize("key", ["sk-abc\ndef-0123456789", "sk-kéy-0123456789"])
def test_an_api_key_no_header_can_carry_is_one_line_that_does_not_show_it(
    fault_server: Callable[..., FaultServer], tmp_path: Path, key: str
) -> None:
    srv = fault_server(chat=["ok"])
    run = generate(tmp_path, "--endpoint", srv.base_url, env={"AGENTLOAD_API_KEY": key})
    assert run.proc.returncode == 2 and "Traceback" not in run.proc.stderr, run.proc.stderr
    (line,) = run.proc.stderr.strip().splitlines()
    assert line.startswith("agentload: error: AGENTLOAD_API_KEY holds")
    assert "0123456789" not in line
    assert not srv.requests  # nothing was sent


@pytest.mark.parametrize("sep", ["/", "#", "?", "?x"])
def test_a_malformed_url_password_is_not_echoed(tmp_path: Path, sep: str) -> None:
    """A password holding "/", "#" or "?" makes no parsable URL; the line says which part and
    how to mend it, and shows no piece of it (short pieces included: "pa55" of "pa55?word")."""
    run = generate(tmp_path, "--endpoint", f"http://user:pa55{sep}{GIT_PW}@127.0.0.1:1/v1")
    assert run.proc.returncode == 2, run.proc.stderr
    (line,) = run.proc.stderr.strip().splitlines()
    assert "user:password part does not parse (percent-encode" in line
    assert "pa55" not in line and "http://***@127.0.0.1:1/v1" in line
    _no_odd_secret(run.proc.stdout, run.proc.stderr)


def test_a_password_ending_at_a_question_mark_is_not_taken_for_the_host(tmp_path: Path) -> None:
    """``http://hunter2?@host``: a URL parser takes "hunter2" for the host and the rest for a
    query; its author meant a password, and the unreachable-host line shows none of it."""
    run = generate(tmp_path, "--endpoint", f"http://{GIT_PW}?@127.0.0.1:1/v1")
    assert run.proc.returncode == 2, run.proc.stderr
    assert "endpoint unreachable" in run.proc.stderr
    _no_odd_secret(run.proc.stdout.lower(), run.proc.stderr.lower())  # a host is lowercased


def test_the_otlp_exporter_does_not_repeat_the_query(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    trace = agentic_trace(tmp_path / "t.agentload.jsonl.zst")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1/traces?token={OTLP_TOK}&sig=ab1"
    run = _cli("trace", "export", "otel", str(trace), "--otlp-endpoint", url)
    assert run.returncode == 2, run.stderr
    assert "export of session 1 failed" in run.stderr
    _no_odd_secret(run.stdout, run.stderr)
    # a value shorter than a learned secret is masked where a quoted query holds it
    assert "ab1" not in run.stderr and "sig=***" in run.stderr
    assert "?token=***&sig=***: export of session 1" in run.stderr  # the colon kept


def test_an_upstream_401_quoting_an_odd_key_is_masked_in_the_recorded_error(
    fault_server: Callable[..., FaultServer], tmp_path: Path
) -> None:
    srv = fault_server(chat=["401"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentload", "record", "--upstream", srv.base_url,
         "--listen", "127.0.0.1:0", "-o", str(tmp_path), "--idle-timeout", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # agentload record on http://HOST:PORT -> ...
        base = first.split(" on ", 1)[1].split(" ", 1)[0]
        r = httpx.post(
            f"{base}/v1/chat/completions",
            headers={"Authorization": f"Bearer {ODD_KEY}"},
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
        assert r.status_code == 401 and ODD_KEY in r.text  # the agent gets the answer as sent
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    trace = _files_text(tmp_path)
    assert '"llm_call"' in trace and "invalid key in" in trace  # the error is recorded
    _no_odd_secret(first + out, err, trace)


def test_trace_inspect_masks_a_forged_header(tmp_path: Path) -> None:
    src = agentic_trace(tmp_path / "t.agentload.jsonl.zst")
    lines = _files_text(src.parent).splitlines()
    header = orjson.loads(lines[0])
    header["endpoint"] = f"https://{TOKEN}@h/v1?key={GIT_TOK}"
    forged = tmp_path / "forged.agentload.jsonl"
    forged.write_text("\n".join([orjson.dumps(header).decode(), *lines[1:]]) + "\n")
    for argv in (["trace", "inspect", str(forged)], ["trace", "stats", str(forged), "--json"]):
        run = _cli(*argv)
        assert run.returncode == 0, run.stderr
        _no_odd_secret(run.stdout, run.stderr)
