"""Issue 28, classes 7 and 9: values that used to end in a traceback (or in a whole run and
then exit 3) are one ``agentload: error:`` line and exit 2, up front: huge counts and seeds,
output places that cannot be written (``/proc``, a 5,000-character name, a full disk), bad
image tags and ``DOCKER_HOST``, absurd import timestamps, session headers and fields that would
break a request, and endpoints whose host carries bidi controls. A server's nonsense usage
report is counted as ``invalid_usage`` and the replay goes on."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from faultserver import FaultServer
from genrun import one_line_exit_2, run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))
from replay_traces import agentic_trace


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


DEAD = f"http://127.0.0.1:{_closed_port()}/v1"
HUGE = "9" * 40
LONG = "/tmp/" + "a" * 5000


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agentic_trace(tmp_path_factory.mktemp("t") / "t.agentload.jsonl.zst", sessions=4)


# -- 1, 7: counts and seeds ------------------------------------------------------------------

COUNTS = {
    "generate-sessions": (["generate", "-n", HUGE], "at most", "1000000"),
    "generate-parallel": (["generate", "-p", HUGE], "--parallel", "100000"),
    "generate-seed": (["generate", "--seed", HUGE], "--seed", "9007199254740992"),
    "generate-sweep": (["generate", "--sweep", f"1,{HUGE}"], "--sweep", "100000"),
    "generate-gpus": (["generate", "--gpus", HUGE], "--gpus", "1000000"),
    "replay-concurrency": (["replay", "--concurrency", HUGE], "--concurrency", "100000"),
    "replay-sessions": (["replay", "--sessions", HUGE], "--sessions", "1000000"),
    "replay-max-context": (["replay", "--max-context", HUGE], "--max-context", "100000000"),
    "replay-gpus": (["replay", "--gpus", HUGE], "--gpus", "1000000"),
    "replay-seed": (["replay", "--seed", HUGE], "--seed", "9007199254740992"),
}


@pytest.mark.parametrize("case", sorted(COUNTS))
def test_a_huge_count_is_refused_with_its_limit(case: str, trace: Path) -> None:
    args, option, limit = COUNTS[case]
    if args[0] == "replay":
        args = ["replay", str(trace), "--model", "m", *args[1:]]
    line = one_line_exit_2([*args, "--endpoint", DEAD])
    assert limit in line and (option in line or "--sessions" in line), line
    assert "unreachable" not in line and "does not answer" not in line


# -- 2: output places that cannot be written ------------------------------------------------


def _outs(trace: Path, tmp: Path) -> dict[str, list[str]]:
    t = str(trace)
    return {
        "record-proc": ["record", "--upstream", DEAD, "-o", "/proc/x"],
        "record-dev-full": ["record", "--upstream", DEAD, "-o", "/dev/full"],
        "record-long": ["record", "--upstream", DEAD, "-o", LONG],
        "generate-long": ["generate", "--endpoint", DEAD, "--out", LONG],
        "replay-long": ["replay", t, "--endpoint", DEAD, "--model", "m", "--out", LONG],
        "report-long": ["report", t, "--out", LONG],
        "weka-long": ["trace", "export", "weka", t, "-o", LONG],
        "redact-proc": ["trace", "redact", t, "-o", "/proc/x.zst"],
        "redact-long": ["trace", "redact", t, "-o", LONG + ".zst"],
        "plot-long": ["trace", "stats", t, "--plot", LONG + ".png"],
    }


@pytest.mark.parametrize(
    "case",
    [
        *("record-proc", "record-dev-full", "record-long", "generate-long", "replay-long"),
        *("report-long", "weka-long", "redact-proc", "redact-long", "plot-long"),
    ],
)
def test_an_unwritable_out_is_one_line(case: str, trace: Path, tmp_path: Path) -> None:
    line = one_line_exit_2(_outs(trace, tmp_path)[case])
    assert "aaaa" in line or "/proc/x" in line or "/dev/full" in line
    assert "File name too long" in line or "No such file" in line or "not a directory" in line
    assert len(line) < 600  # a long path is clipped, the reason still shown


# -- 3: a full disk, and --plot replacing a file ---------------------------------------------


def _fsize_limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))  # Python ignores SIGXFSZ: EFBIG


def run_full_disk(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process whose files may not grow past 256 bytes (a full disk)."""
    return subprocess.run(
        [sys.executable, "-m", "agentload", *argv],
        cwd=cwd, capture_output=True, text=True, timeout=120, preexec_fn=_fsize_limit,
    )  # fmt: skip


def _mooncake(tmp: Path) -> Path:
    rows = [{"timestamp": i, "input_length": 100_000, "output_length": 5} for i in range(400)]
    path = tmp / "mc.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


FULL: dict[str, Callable[[Path, Path], list[str]]] = {
    "import": lambda t, d: ["trace", "import", "mooncake", str(_mooncake(d)), "-o", "o.agentload.jsonl.zst"],
    "export-mooncake": lambda t, d: ["trace", "export", "mooncake", str(t), "-o", "o.jsonl"],
    "export-otel": lambda t, d: ["trace", "export", "otel", str(t), "-o", "o.json"],
    "redact": lambda t, d: ["trace", "redact", str(t), "-o", "o.agentload.jsonl.zst"],
    "plot": lambda t, d: ["trace", "stats", str(t), "--plot", "o.png"],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(FULL))
def test_a_full_disk_is_one_line_naming_the_file(case: str, trace: Path, tmp_path: Path) -> None:
    proc = run_full_disk(FULL[case](trace, tmp_path), tmp_path)
    err = proc.stderr
    assert "Traceback" not in err, err[-3000:]
    assert proc.returncode == 2, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("agentload: error: ")]
    assert len(lines) == 1 and " o." in lines[0] and "File too large" in lines[0], err
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(("o.", ".o."))]


def test_plot_never_replaces_a_png_without_force(trace: Path, tmp_path: Path) -> None:
    png = tmp_path / "p.png"
    png.write_bytes(b"mine")
    line = one_line_exit_2(["trace", "stats", str(trace), "--plot", str(png)])
    assert f"--plot {png}: exists; add --force" in line
    assert png.read_bytes() == b"mine"
    code, _, err = run_cli(["trace", "stats", str(trace), "--plot", str(png), "--force"])
    assert code == 0, err
    assert png.read_bytes().startswith(b"\x89PNG")


# -- 4: sandbox build ----------------------------------------------------------------------


def test_a_bad_image_tag_is_refused_before_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentload.sandboxes.docker_host as docker_host

    def no_docker(*a: object, **k: object) -> None:
        raise AssertionError("Docker contacted")

    monkeypatch.setattr(docker_host, "connect_docker", no_docker)
    for tag in ("Bad Tag!!", "UPPER:1", "a:-x", "a\nb", "x" * 300):
        line = one_line_exit_2(["sandbox", "build", "--tag", tag])
        assert "not a Docker image name" in line and "[HOST[:PORT]/]NAME[:TAG]" in line


def test_docker_host_is_the_only_daemon_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentload.sandboxes.docker_host import docker_hosts

    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    assert docker_hosts() == ["tcp://127.0.0.1:1"]
    line = one_line_exit_2(["sandbox", "build"])
    assert "DOCKER_HOST=tcp://127.0.0.1:1" in line and "unix://" not in line


# -- 5: absurd import timestamps -----------------------------------------------------------


def _tracelab(ts: str) -> dict[str, object]:
    return {
        "session_id": "s", "round_index": 0, "input_tokens_total": 10, "prefix_tokens": 0,
        "newly_append_tokens": 10, "output_tokens": 5, "model": "m", "tools": [],
        "timing_events": [{"event_type": "user_message", "timestamp": ts}],
    }  # fmt: skip


def _weka(**call: object) -> dict[str, object]:
    req = {"t": 0.0, "type": "n", "model": "m", "in": 10, "out": 5, **call}
    return {"id": "c", "models": ["m"], "block_size": 64, "requests": [req]}


MC = {"input_length": 10, "output_length": 5}
IMPORTS: dict[str, tuple[str, str, bytes, str]] = {
    "mooncake-1e20": ("mooncake", "a.jsonl", orjson.dumps({"timestamp": 1e20, **MC}), ":line 1: timestamp:"),
    "mooncake-1e300": ("mooncake", "a.jsonl", orjson.dumps({"timestamp": 1e300, **MC}), ":line 1: timestamp:"),
    "tracelab-9999": ("tracelab", "a.jsonl", orjson.dumps(_tracelab("9999-12-31T23:59:59Z")), ":line 1: timing_events[0].timestamp:"),
    "tracelab-0001": ("tracelab", "a.jsonl", orjson.dumps(_tracelab("0001-01-01T00:00:00Z")), ":line 1: timing_events[0].timestamp:"),
    "weka-t-1e300": ("weka", "a.json", orjson.dumps(_weka(t=1e300)), ":requests[0]: t:"),
    "weka-ttft-1e20": ("weka", "a.json", orjson.dumps(_weka(ttft=1e20)), ":requests[0]: ttft:"),
    "weka-in-10e30": ("weka", "a.json", json.dumps(_weka(**{"in": 10**30})).encode(), ":requests[0]: in:"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(IMPORTS))
def test_an_absurd_import_time_is_one_line(case: str, tmp_path: Path) -> None:
    fmt, name, data, says = IMPORTS[case]
    src = tmp_path / name
    src.write_bytes(data + b"\n")
    out = tmp_path / "o.agentload.jsonl.zst"
    line = one_line_exit_2(["trace", "import", fmt, str(src), "-o", str(out)])
    assert f"{name}{says}" in line, line
    assert "out of range" in line or "too large" in line
    assert not out.exists()


# -- 6: a nonsense usage report --------------------------------------------------------------


@pytest.mark.parametrize(
    "usage", ['{"prompt_tokens": 1000000000000000000000000000000}', '{"prompt_tokens": -5}',
              '{"prompt_tokens": 1.5, "completion_tokens": 8}']
)  # fmt: skip
def test_a_nonsense_usage_is_counted_and_the_replay_goes_on(
    usage: str, trace: Path, tmp_path: Path, fault_server: Callable[..., FaultServer]
) -> None:
    srv = fault_server(usage=usage)
    out = tmp_path / "res"
    argv = ["replay", str(trace), "--endpoint", srv.base_url, "--model", "fault-model"]
    argv += ["--start-at", "zero", "--gap-scale", "0", "--max-error-rate", "1", "--out", str(out)]
    code, stdout, err = run_cli(argv)
    assert "Traceback" not in stdout + err, err
    assert code == 0, stdout + err
    doc = orjson.loads((out / "results.json").read_bytes())
    reqs = [r for p in doc["points"] for r in p["requests"]]
    assert reqs and all(r["error_kind"] == "invalid_usage" for r in reqs)
    assert all(r["prompt_tokens"] is None for r in reqs)
    assert "prompt_tokens" in reqs[0]["error"]


# -- 8: session header and field -------------------------------------------------------------

SESSION = {
    "header-crlf": (["--session-header", "X\r\nY: 1"], "RFC 9110 token"),
    "header-space": (["--session-header", "x session"], "RFC 9110 token"),
    "header-reserved": (["--session-header", "Authorization"], "sets already"),
    "field-messages": (["--session-field", "messages"], "may use already"),
    "field-model": (["--session-field", "model"], "may use already"),
    "field-newline": (["--session-field", "a\nb"], "a body field name"),
}


@pytest.mark.parametrize("case", sorted(SESSION))
def test_a_bad_session_header_or_field_is_refused_up_front(
    case: str, trace: Path, fault_server: Callable[..., FaultServer]
) -> None:
    args, says = SESSION[case]
    srv = fault_server()
    line = one_line_exit_2(
        ["replay", str(trace), "--endpoint", srv.base_url, "--model", "m", *args]
    )
    assert args[0] in line and says in line
    assert srv.chat_requests == 0


def test_record_refuses_a_header_name_that_no_request_carries() -> None:
    line = one_line_exit_2(["record", "--upstream", DEAD, "--session-header", "a b"])
    assert "--session-header 'a b'" in line and "RFC 9110 token" in line


# -- 9: an endpoint host with bidi controls ----------------------------------------------------

BIDI = "http://a\u202eevil.example/v1"


@pytest.mark.parametrize("command", ["generate", "replay", "record"])
def test_a_bidi_host_is_one_escaped_line(command: str, trace: Path) -> None:
    argv = {
        "generate": ["generate", "--endpoint", BIDI],
        "replay": ["replay", str(trace), "--endpoint", BIDI, "--model", "m"],
        "record": ["record", "--upstream", BIDI],
    }[command]
    line = one_line_exit_2(argv)
    assert "\u202e" not in line and "\\u202e" in line


def test_a_warning_escapes_bidi_characters(trace: Path) -> None:
    url = f"http://user:pw@127.0.0.1:{_closed_port()}/v1?x=\u202e"
    code, _, err = run_cli(["replay", str(trace), "--endpoint", url, "--model", "m"])
    assert code == 2 and "Traceback" not in err
    assert "\u202e" not in err and "agentload: warning:" in err
