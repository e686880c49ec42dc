"""Bad input is one line on stderr and exit code 2, never a traceback: the ``agentload`` CLI
(run in this process) on bad ``--out``, scenario and profile files, ``serve`` ports, damaged
trace files, and traces whose values mean nothing."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from faultserver import FaultPlan, FaultServer

from agentload.cli import main
from agentload.generate.options import GenerateOptions
from agentload.generate.run import generate
from agentload.scenarios import load_scenario

BINARY = bytes(range(256)) * 4


def one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI; assert exit 2 and exactly one ``agentload: error:`` line on stderr."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert exc.value.code == 2, out + err
    assert len(lines) == 1 and lines[0].startswith("agentload: error: "), err
    assert "Traceback" not in out + err
    return lines[0]


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


# -- generate: --out, scenario files, option values ----------------------------------------

SCENARIOS: dict[str, tuple[bytes | str, str]] = {
    "binary": (BINARY, "not a YAML text file"),
    "list": ("- a\n- b\n", "must be a YAML mapping"),
    "number": ("42\n", "must be a YAML mapping"),
    "string": ("hello\n", "must be a YAML mapping"),
    "huge-int": ("extends: quick\norchestrator:\n  max_rounds: 1" + "0" * 30 + "\n", ":3:"),
    "huge-seed": ("extends: quick\nseed: 99999999999999999999999\n", "too large"),
    "infinite": ("extends: quick\nwall_budget_s: .inf\n", "finite"),
    "nested": ("extends: quick\norchestrator: [[[1, [2]]]]\n", "orchestrator"),
    "deep": ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    "memory": ("extends: quick\nsandbox: {memory: 99999999t}\n", "sandbox.memory"),
}


@pytest.mark.parametrize("case", sorted(SCENARIOS))
def test_a_bad_scenario_file_is_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, says = SCENARIOS[case]
    path = _write(tmp_path / f"{case}.yaml", data)
    line = one_line_exit_2(["generate", "-s", str(path), "-o", str(tmp_path / "out")], capsys)
    assert f"{case}.yaml" in line and says in line
    assert not (tmp_path / "out").exists()


def _existing_file(tmp: Path) -> Path:
    return _write(tmp / "afile", "x")


def _existing_trace(tmp: Path) -> Path:
    return _write(tmp / "run.agentload.jsonl.zst", b"")


OUTS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "in-proc": (lambda t: Path("/proc/x"), "cannot write there"),
    "unwritable-dir": (lambda t: Path("/proc/self"), "cannot write there"),
    "existing-file": (_existing_file, "is a file"),
    "under-a-file": (lambda t: _existing_file(t) / "sub", "cannot write there"),
    "existing-trace": (_existing_trace, "never overwrites"),
}


@pytest.mark.parametrize("case", sorted(OUTS))
def test_a_bad_out_is_one_line_before_any_work(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, says = OUTS[case]
    out = make(tmp_path)
    # An endpoint that never answers: reaching it would hang, not fail in one line.
    with FaultServer(FaultPlan(accept_only=True)) as srv:
        line = one_line_exit_2(
            ["generate", "-s", "quick", "--endpoint", srv.base_url, "-o", str(out)], capsys
        )
        assert srv.counts["accept_only"] == 0
    assert f"--out {out}" in line and says in line


OPTIONS = {
    "call-timeout-zero": (["--call-timeout", "0"], "--call-timeout"),
    "call-timeout-nan": (["--call-timeout", "nan"], "--call-timeout"),
    "retries-negative": (["--retries", "-1"], "--retries"),
    "endpoint-scheme": (["--endpoint", "ftp://host/v1"], "--endpoint"),
    "endpoint-port": (["--endpoint", "http://host:99999/v1"], "--endpoint"),
    "deep-override": (["-c", "seed=" + "[" * 5000], "-c seed="),
}


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_a_bad_option_value_is_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, says = OPTIONS[case]
    line = one_line_exit_2(["generate", "-s", "quick", "-o", str(tmp_path), *args], capsys)
    assert says in line


# -- serve ------------------------------------------------------------------------------------


@pytest.fixture
def port_in_use() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def test_serve_bad_ports_and_profiles_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], port_in_use: int
) -> None:
    for port in ("99999", "-1", str(port_in_use)):
        line = one_line_exit_2(["serve", "--port", port], capsys)
        assert f"--port {port}" in line
    binary = _write(tmp_path / "prof.yaml", BINARY)
    assert "not a YAML text file" in one_line_exit_2(["serve", "--profile", str(binary)], capsys)
    huge = _write(tmp_path / "huge.yaml", "kv_capacity_tokens: " + "9" * 40 + "\n")
    assert "kv_capacity_tokens" in one_line_exit_2(["serve", "--profile", str(huge)], capsys)


# -- damaged trace files ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real generate trace (quick, local sandbox, against the fault server's replies)."""
    out = tmp_path_factory.mktemp("real")
    with FaultServer(FaultPlan(chat=["ok"])) as srv:
        opts = GenerateOptions(
            scenario=load_scenario("quick"), endpoint=srv.base_url, out=out, sandbox="local"
        )
        return asyncio.run(generate(opts)).trace_path


def _records(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as f:
        data = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


DAMAGED: dict[str, Callable[[Path, Path], Path]] = {
    "binary": lambda t, real: _write(t / "g.agentload.jsonl.zst", BINARY),
    "empty": lambda t, real: _write(t / "e.agentload.jsonl.zst", b""),
    "zstd-garbage": lambda t, real: _write(t / "z.agentload.jsonl.zst", real.read_bytes()[:4] + BINARY),
    "cut-in-first-frame": lambda t, real: _write(t / "c.agentload.jsonl.zst", real.read_bytes()[:60]),
    "directory": lambda t, real: _mkdir(t / "d.agentload.jsonl.zst"),
}  # fmt: skip


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


@pytest.mark.parametrize("command", ["validate", "stats", "inspect"])
@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_trace_is_one_line(
    case: str, command: str, tmp_path: Path, real_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = DAMAGED[case](tmp_path, real_trace)
    line = one_line_exit_2(["trace", command, str(path)], capsys)
    assert path.name in line


def test_a_trace_cut_mid_way_stays_readable(
    tmp_path: Path, real_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A killed run's file: every complete record before the cut is read (exit 1: truncated)."""
    data = real_trace.read_bytes()
    cut = _write(tmp_path / "cut.agentload.jsonl.zst", data[: len(data) * 2 // 3])
    with pytest.raises(SystemExit) as exc:
        main(["trace", "validate", str(cut)])
    out, err = capsys.readouterr()
    assert exc.value.code == 1 and "TRUNCATED" in out and not err


# -- traces that parse but mean nothing --------------------------------------------------------


def _header(recs: list[dict[str, Any]], **kv: Any) -> None:
    recs[0].update(kv)


def _first(recs: list[dict[str, Any]], rtype: str) -> dict[str, Any]:
    return next(r for r in recs if r["type"] == rtype)


MEANINGLESS: dict[str, tuple[Callable[[list[dict[str, Any]]], None], str]] = {
    "block-size-0": (lambda r: _header(r, block_size=0), "header.block_size"),
    "block-size-negative": (lambda r: _header(r, block_size=-1), "header.block_size"),
    "unknown-tokenizer": (lambda r: _header(r, tokenizer="no-such-vocab"), "header.tokenizer"),
    "negative-prompt-tokens": (
        lambda r: _first(r, "llm_call")["usage"].update(prompt_tokens=-5),
        "llm_call.usage.prompt_tokens",
    ),
    "negative-our-tokens": (
        lambda r: _first(r, "llm_call")["usage"].update(prompt_tokens_ours=-1),
        "llm_call.usage.prompt_tokens_ours",
    ),
    # replay waits out recorded gaps: a time 146 years away had it wait forever (issue 28, 8)
    "submit-2**62": (
        lambda r: _first(r, "llm_call")["timings"].update(submit_ns=2**62),
        "llm_call.timings.submit_ns",
    ),
    "session-start-minus-1e18": (
        lambda r: _first(r, "session").update(start_ns=-(10**18)),
        "session.start_ns",
    ),
    "depends-on-nothing": (
        lambda r: _first(r, "llm_call").update(depends_on=["call_nowhere"]),
        "llm_call.depends_on.0",
    ),
}


@pytest.mark.parametrize("case", sorted(MEANINGLESS))
def test_validate_rejects_a_meaningless_trace(
    case: str, tmp_path: Path, real_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recs = _records(real_trace)
    change, field = MEANINGLESS[case]
    change(recs)
    path = tmp_path / "bad.agentload.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    line = one_line_exit_2(["trace", "validate", str(path)], capsys)
    assert "bad.agentload.jsonl:" in line and field in line
    lineno = int(line.split("bad.agentload.jsonl:", 1)[1].split(":", 1)[0])
    assert 1 <= lineno <= len(recs)


def test_the_real_trace_itself_validates(
    real_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["trace", "validate", str(real_trace)])
    assert exc.value.code == 0, capsys.readouterr()
