"""``agentload trace import claude-code`` on a real log (``samples_agents``, written by the real
Claude Code 2.1.197) cut short the way a killed Claude Code leaves it: the rest imports, with
one warning line counting what was skipped; ``trace stats`` shows what the import derived and
accepted; ``trace redact`` keeps that and drops the text; a folder with no log is one line and
exit 2. (The import of logs the agents write during the run, against what ``record`` recorded
of the same run, is checked by ``tests/record/test_real_agents.py``.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import zstandard

from agentload.trace.trace import load_trace

SAMPLE = Path(__file__).parent / "samples_agents" / "claude-code-2.1.197"


def _agentload(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "agentload", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done


def test_a_cut_log_imports_what_it_holds_and_says_so(tmp_path: Path) -> None:
    whole = tmp_path / "whole.agentload.jsonl.zst"
    _agentload("trace", "import", "claude-code", str(SAMPLE), "-o", str(whole))
    n_whole = len(load_trace(whole).calls)
    logs = tmp_path / "projects"
    shutil.copytree(SAMPLE, logs)
    main = next(p for p in sorted(logs.rglob("*.jsonl")) if p.parent.name != "subagents")
    lines = main.read_bytes().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if b'"type":"assistant"' in line)
    # a line of garbage, then the file ends inside the last answer
    cut = [*lines[:last], b"not json\n", lines[last][: len(lines[last]) // 2]]
    main.write_bytes(b"".join(cut))
    before = main.read_bytes()
    out = tmp_path / "cut.agentload.jsonl.zst"
    err = _agentload("trace", "import", "claude-code", str(logs), "-o", str(out)).stderr
    assert main.read_bytes() == before  # an input is never changed
    assert err.count("\n") == 1, err
    assert "warning: 2 deviations from the claude-code schema accepted" in err, err
    assert "line: not JSON, skipped ×2" in err
    trace = load_trace(out)
    assert len(trace.calls) == n_whole - 1  # the cut answer is gone, the rest is there
    _agentload("trace", "validate", str(out))
    # trace stats says what the import derived and accepted; redact keeps it and drops the text.
    source = json.loads(_agentload("trace", "stats", "--json", str(out)).stdout)["source"]
    assert source["format"] == "claude-code" and {"system", "tools"} <= set(source["derived"])
    assert source["deviations"] == {"line: not JSON, skipped": 2}
    redacted = tmp_path / "cut.redacted.agentload.jsonl.zst"
    _agentload("trace", "redact", str(out), "-o", str(redacted))
    _agentload("trace", "validate", str(redacted))
    assert b"SUBTASK" not in zstandard.decompress(redacted.read_bytes(), max_output_size=1 << 30)
    again = load_trace(redacted)
    assert len(again.calls) == len(trace.calls) and again.header.source is not None
    assert trace.header.source is not None
    assert again.header.source.derived == trace.header.source.derived
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _agentload("trace", "import", "claude-code", str(empty), "-o",
                      str(tmp_path / "x.agentload.jsonl.zst"), code=2)  # fmt: skip
    assert done.stderr.count("\n") == 1 and "no Claude Code session logs" in done.stderr
