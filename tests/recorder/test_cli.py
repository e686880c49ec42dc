"""``agentload trace validate|stats|inspect`` on real files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from agentload.cli import main
from agentload.trace.stats import STATS_KEYS

from .conftest import write_session


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


@pytest.fixture(scope="module")
def session_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import asyncio

    path = tmp_path_factory.mktemp("cli") / "run.agentload.jsonl.zst"
    asyncio.run(write_session(path, orchestrator_calls=4, sub_calls=3, flush_each_call=True))
    return path


def test_validate_whole_file(session_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "validate", str(session_file)], capsys)
    assert code == 0
    for rtype, n in [("llm_call", 7), ("tool_call", 3), ("session", 2), ("agent", 4)]:
        assert re.search(rf"│ {rtype}\s+│\s+{n} │", out), (rtype, out)
    assert "OK: whole file" in out


def test_validate_truncated_file_exits_1(
    session_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = tmp_path / "cut.agentload.jsonl.zst"
    data = session_file.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    code, out, _ = run(["trace", "validate", str(cut)], capsys)
    assert code == 1
    assert "TRUNCATED: truncated after record" in out


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentload", *args], capture_output=True, text=True, timeout=60
    )


def test_validate_bad_file_prints_one_line_and_exits_2(
    session_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import zstandard

    # A damaged record deep inside: the llm_call's seq is not an integer.
    plain = b""
    data = session_file.read_bytes()
    while data:
        d = zstandard.ZstdDecompressor().decompressobj()
        plain += d.decompress(data)
        data = d.unused_data
    records = plain.split(b"\n")
    idx = next(i for i, r in enumerate(records) if b'"type":"llm_call"' in r)
    rec = orjson.loads(records[idx])
    rec["seq"] = "first"
    records[idx] = orjson.dumps(rec)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join(records))
    proc = cli("trace", "validate", str(bad))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"agentload: error: bad.jsonl:{idx + 1}: llm_call.seq: ")
    assert "Traceback" not in proc.stderr

    truncated = tmp_path / "trunc.jsonl"
    truncated.write_bytes(plain[: len(plain) // 2])
    code, out, _ = run(["trace", "validate", str(truncated)], capsys)
    assert code == 1 and "TRUNCATED" in out


def test_validate_dangling_blob_reference_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .test_stats import call, header

    path = tmp_path / "dangling.jsonl"
    h = header().model_dump(mode="json", by_alias=True, exclude_none=True)
    c = call("c0", "a", 0, 0.0, 1.0, 16, ["A"]).model_dump(mode="json", exclude_none=True)
    path.write_bytes(orjson.dumps(h) + b"\n" + orjson.dumps(c) + b"\n")
    code, _, err = run(["trace", "validate", str(path)], capsys)
    assert code == 2
    assert err.strip().startswith("agentload: error: dangling.jsonl:2: llm_call.messages.0: blob")
    assert err.count("\n") == 1


def test_validate_an_edited_blob_is_invalid(
    session_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import zstandard

    raw = (
        zstandard.ZstdDecompressor()
        .stream_reader(session_file.read_bytes(), read_across_frames=True)
        .read()
    )
    lines = raw.splitlines()
    n = next(
        i for i, line in enumerate(lines) if b'"type":"blob"' in line and b"orchestrator" in line
    )
    lines[n] = lines[n].replace(b"You are the orchestrator.", b"You are the 0rchestrator.")
    path = tmp_path / "edited.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    code, _, err = run(["trace", "validate", str(path)], capsys)
    assert code == 2
    assert err.strip().startswith(f"agentload: error: edited.jsonl:{n + 1}: blob.id: ")
    assert "not the content id" in err and err.count("\n") == 1


def test_validate_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["trace", "validate", str(tmp_path / "nope.jsonl")], capsys)
    assert code == 2 and "no such trace file or directory" in err and err.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a trace\n")
    code, _, err = run(["trace", "stats", str(empty)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "empty: no trace files (*.agentload.jsonl[.zst]) in this directory" in err


def test_several_files_and_directories(
    session_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    d = tmp_path / "traces"
    d.mkdir()
    other = d / "b.agentload.jsonl"
    asyncio.run(write_session(other, orchestrator_calls=3, sub_calls=2))
    (d / "README.txt").write_text("ignored\n")
    png = tmp_path / "growth.png"
    # the same file twice (by name and through its directory) counts once
    argv = ["trace", "stats", str(session_file), str(d), str(other), "--json", "--plot", str(png)]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    rows = [orjson.loads(line) for line in out.strip().splitlines()]
    assert [r["file"] for r in rows] == [str(session_file), str(other)]
    assert [r["llm_calls"] for r in rows] == [7, 5]
    for i in (1, 2):
        assert (tmp_path / f"growth-{i}.png").read_bytes()[:4] == b"\x89PNG"
    assert not png.exists() and err.count("plot written to") == 2

    code, out, _ = run(["trace", "stats", str(session_file), str(other)], capsys)
    assert code == 0 and out.count("trace summary") == 2 and str(other) in out

    cut = d / "cut.agentload.jsonl.zst"
    data = session_file.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    code, out, _ = run(["trace", "validate", str(d)], capsys)
    assert code == 1  # one of the two is truncated; both are reported
    assert out.count("TRUNCATED") == 1 and out.count("OK: whole file") == 1


def test_stats_json_and_plot(
    session_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "growth.png"
    code, out, err = run(
        ["trace", "stats", str(session_file), "--json", "--plot", str(png)], capsys
    )
    assert code == 0
    assert len(out.strip().splitlines()) == 1
    st = orjson.loads(out)
    assert set(STATS_KEYS) <= set(st)
    assert st["llm_calls"] == 7 and st["sessions"] == 1
    assert [a["role"] for a in st["agents"]] == ["orchestrator", "code_search"]
    orch = st["agents"][0]
    # Server-reported prompt tokens are used when present (1000 + 100 * seq).
    assert (orch["prompt_tokens_first"], orch["prompt_tokens_last"]) == (1000, 1300)
    assert st["tool_calls_by_name"]["delegate"]["count"] == 1
    assert 0 < st["prefix_reuse_ceiling"] < 1
    assert png.read_bytes()[:4] == b"\x89PNG" and "plot written" in err


def test_stats_table(session_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["trace", "stats", str(session_file)], capsys)
    assert code == 0
    for word in ("prefix_reuse_ceiling", "orchestrator", "code_search", "search_code", "delegate"):
        assert word in out


def test_stats_plot_must_be_png(session_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["trace", "stats", str(session_file), "--plot", "x.jpg"], capsys)
    assert code == 2 and "PNG" in err
    unwritable = session_file / "under-a-file.png"
    code, _, err = run(["trace", "stats", str(session_file), "--plot", str(unwritable)], capsys)
    assert code == 2 and "cannot write there" in err and err.count("\n") == 1


def test_inspect_default_agent_and_one_call(
    session_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["trace", "inspect", str(session_file)], capsys)
    assert code == 0
    assert "session s1" in out and "orchestrator orch" in out and "code_search sub1" in out
    assert "delegate" in out and "search_code" in out  # tool calls of the orchestrator
    code, out, _ = run(
        ["trace", "inspect", str(session_file), "--agent", "sub", "--call", "2"], capsys
    )
    assert code == 0
    # The resolved messages of sub-agent call 2: roles and contents from the blobs.
    assert "You search code." in out and "continue 1" in out and "found 1" in out
    assert "system" in out and "assistant" in out
    code, out, _ = run(["trace", "inspect", str(session_file), "--call", "1"], capsys)
    assert code == 0
    assert "request messages" in out and "tool calls" in out and "child=sub1" in out


def test_inspect_bad_agent_or_call(session_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["trace", "inspect", str(session_file), "--agent", "zzz"], capsys)
    assert code == 2 and "no agent 'zzz'" in err and "orch" in err
    code, _, err = run(["trace", "inspect", str(session_file), "--call", "99"], capsys)
    assert code == 2 and "has no call 99" in err


async def test_inspect_shows_markup_like_content_literally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentload.tokenizer import ChatTokenCounter
    from agentload.trace import AgentRecord, CallCapture, ObservedCall, Timings, TraceWriter

    from .conftest import header

    path = tmp_path / "markup.jsonl"
    async with TraceWriter(path, header()) as w:
        await w.write(AgentRecord(id="a[/x]", session_id="s", role="[bold]odd", start_ns=0))
        cap = CallCapture(w, ChatTokenCounter("o200k_base"))
        body = {
            "model": "m",
            "messages": [
                {"role": "system", "content": "[agentload role=orchestrator] do it"},
                {"role": "user", "content": "closing tag [/red] and list[int] and [link=x]"},
            ],
        }
        await cap.record(
            ObservedCall(
                call_id="c",
                session_id="s",
                agent_id="a[/x]",
                seq=0,
                body=body,
                content="ok [/]",
                tool_calls=None,
                finish_reason="stop",
                usage=None,
                timings=Timings(submit_ns=1),
            )
        )
    code, out, err = run(["trace", "inspect", str(path), "--call", "0"], capsys)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "[agentload role=orchestrator] do it" in flat
    assert "closing tag [/red] and list[int] and [link=x]" in flat
    assert "ok [/]" in flat and "a[/x]" in flat
    code, out, err = run(["trace", "inspect", str(path)], capsys)
    assert code == 0 and "[bold]odd" in out, err
    code, out, err = run(["trace", "stats", str(path)], capsys)
    assert code == 0 and "[bold]odd" in out, err
