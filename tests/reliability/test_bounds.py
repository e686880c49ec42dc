"""Small hostile inputs that used to take unbounded time or memory (issue 28, classes 3 and 8):
each is now one line and exit 2, at once, under a memory cap."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import orjson

BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def _capped() -> None:  # in the child: 1 GiB of address space
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _one_line(*argv: str, within_s: float = 30) -> str:
    started = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "agentload", *argv],
        capture_output=True,
        text=True,
        timeout=within_s * 2,
        preexec_fn=_capped,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.monotonic() - started
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, res.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("agentload: error: "), res.stderr[-2000:]
    assert elapsed < within_s, elapsed
    return lines[0]


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    assert len(BOMB) < 700  # 9**9 = 387M strings once expanded
    scenario = tmp_path / "bomb.yaml"
    scenario.write_text("extends: quick\n" + BOMB)
    line = _one_line("generate", "-s", str(scenario), "-o", str(tmp_path / "out"))
    assert "YAML nodes once its aliases are expanded" in line
    profile = tmp_path / "bombprofile.yaml"
    profile.write_text(BOMB)
    line = _one_line("serve", "--profile", str(profile), "--port", "0")
    assert "YAML nodes once its aliases are expanded" in line
    parts = ["&a0 [l,l,l,l,l,l,l,l,l]"]
    parts += [f"&a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    line = _one_line("generate", "-s", "quick", "-c", "x=[" + ", ".join(parts) + "]")
    assert "YAML nodes once its aliases are expanded" in line


def test_an_include_of_a_fifo_or_a_device_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "prompt.fifo"
    os.mkfifo(fifo)
    scenario = tmp_path / "fifo.yaml"
    scenario.write_text("extends: quick\norchestrator:\n  system_prompt: !include prompt.fifo\n")
    line = _one_line("generate", "-s", str(scenario), "-o", str(tmp_path / "out"))
    assert "!include prompt.fifo: cannot read: not a regular file" in line
    scenario.write_text("extends: quick\norchestrator:\n  system_prompt: !include /dev/zero\n")
    assert "not a regular file" in _one_line("generate", "-s", str(scenario))
    assert "/dev/zero" in _one_line("generate", "-s", "/dev/zero")


def test_compare_of_devices_is_one_line_under_a_memory_cap(tmp_path: Path) -> None:
    # It reached 22 GB and the OOM killer before.
    assert "not a regular file" in _one_line("compare", "/dev/zero", "/dev/zero")


def test_replay_of_a_trace_whose_times_are_146_years_apart_refuses_at_once(
    tmp_path: Path,
) -> None:
    recs = _mooncake_trace(tmp_path)
    last = [r for r in recs if r["type"] == "llm_call"][-1]
    last["timings"]["submit_ns"] = 2**62  # type: ignore[index]
    bad = tmp_path / "far.agentload.jsonl"
    bad.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    line = _one_line(
        "replay", str(bad), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--duration", "5"
    )
    assert "llm_call.timings.submit_ns" in line and "days from the trace's clock anchor" in line


def test_a_zstd_bomb_without_newlines_is_one_line_under_a_memory_cap(tmp_path: Path) -> None:
    # A small .zst whose one frame inflates to 600 MB with no newline: validate, stats and
    # replay went past 3 GB on 2.5 GB (issue 28, class 3). Lines are bounded (256 MiB) and
    # one decompress call yields at most ~128 MiB.
    import zstandard

    bomb = tmp_path / "bomb.agentload.jsonl.zst"
    with bomb.open("wb") as f, zstandard.ZstdCompressor(level=1).stream_writer(f) as w:
        block = b"a" * (1 << 20)
        for _ in range(600):
            w.write(block)
    assert bomb.stat().st_size < 1 << 20
    for argv in (("trace", "validate"), ("trace", "stats")):
        line = _one_line(*argv, str(bomb), within_s=60)
        assert "a line longer than 256 MiB" in line and "bomb.agentload.jsonl.zst" in line


def _mooncake_trace(tmp_path: Path) -> list[dict[str, object]]:
    src = tmp_path / "ok.jsonl"
    src.write_bytes(
        b"".join(
            orjson.dumps({"timestamp": t, "input_length": 300, "output_length": 4}) + b"\n"
            for t in (0, 10)
        )
    )
    trace = tmp_path / "ok.agentload.jsonl"
    res = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "import", "mooncake", str(src),
         "-o", str(trace)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return [orjson.loads(line) for line in trace.read_bytes().splitlines() if line.strip()]


def test_a_token_count_of_a_trillion_is_refused_where_it_is_read(tmp_path: Path) -> None:
    # An import, or a trace, holding 1e12 input tokens: replay synthesized a content-free
    # prompt of that many tokens and died of MemoryError with a traceback (issue 28, class 3).
    # A call holds at most 16,777,216 tokens (recorder.schema.MAX_CALL_TOKENS).
    src = tmp_path / "mc.jsonl"
    src.write_bytes(orjson.dumps({"timestamp": 0, "input_length": 10**12, "output_length": 4}))
    line = _one_line("trace", "import", "mooncake", str(src), "-o", str(tmp_path / "t.jsonl"))
    assert "input_length: 1000000000000 is too large (at most 16,777,216)" in line
    recs = _mooncake_trace(tmp_path)
    last = [r for r in recs if r["type"] == "llm_call"][-1]
    last["usage"]["prompt_tokens_ours"] = 10**12  # type: ignore[index]
    bad = tmp_path / "huge.agentload.jsonl"
    bad.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    for argv in (("trace", "validate", str(bad)),
                 ("replay", str(bad), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m")):  # fmt: skip
        line = _one_line(*argv)
        assert "llm_call.usage.prompt_tokens_ours" in line and "16777216" in line
