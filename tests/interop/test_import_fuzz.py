"""The full-content importers on damaged copies of real files: each import ends in a trace that
loads, or in one ``AgentloadError`` (the CLI's one line and exit 2), never another exception, and
never changes its input.

Corpora: the logs the real Claude Code 2.1.197 and Codex 0.169.0 wrote (``samples_agents``), the
published OpenHands, MLPerf, Harbor ATIF and OTel samples (``samples_fullcontent``). One file of
each is damaged by the fuzz suites' own strategies (``tests/reliability/fuzz_strategies.py``):
bytes flipped, lines cut, dropped, duplicated, values replaced by hostile ones. In-process (each
case is one import, ~0.1 s), examples fixed (``derandomize``).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))
from fuzz_strategies import damaged_doc, damaged_lines

from agentload.errors import AgentloadError
from agentload.interop.imports import import_trace
from agentload.trace.trace import load_trace

HERE = Path(__file__).parent
CORPORA = {
    # format: (the folder or file copied, the file damaged in it, damaged as JSON lines?)
    "claude-code": (
        HERE / "samples_agents" / "claude-code-2.1.197",
        "-tmp-explore-cc197-work/9caff6df-3cb8-4602-9f7e-74f08becfe46.jsonl",
        True,
    ),
    "codex": (
        HERE / "samples_agents" / "codex-0.169.0",
        "rollout-2026-12-03T19-56-44-01a23d7b-0e1a-79a3-8b73-802180d6c09d.jsonl",
        True,
    ),
    "openhands": (HERE / "samples_fullcontent" / "openhands_swe_rebench.jsonl", "", True),
    "mlperf": (HERE / "samples_fullcontent" / "mlperf_agentic_edge_coding.jsonl", "", True),
    "atif": (HERE / "samples_fullcontent" / "harbor_atif_openhands_hello_world.json", "", False),
    "otel": (HERE / "samples_fullcontent" / "otel_openllmetry_genai.json", "", False),
}


def _digest(root: Path) -> dict[str, str]:
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.mark.parametrize("fmt", sorted(CORPORA))
def test_the_undamaged_corpus_imports(fmt: str, tmp_path: Path) -> None:
    src, _, _ = CORPORA[fmt]
    out = tmp_path / "t.agentload.jsonl.zst"
    import_trace(fmt, [src], out)
    assert load_trace(out).calls


@pytest.mark.parametrize("fmt", sorted(CORPORA))
@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_damaged_file_imports_or_is_one_error(
    fmt: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    src, damaged, lines = CORPORA[fmt]
    work = tmp_path_factory.mktemp(fmt)
    copy = work / src.name
    if src.is_dir():
        shutil.copytree(src, copy)
        target = copy / damaged
    else:
        shutil.copyfile(src, copy)
        target = copy
    original = target.read_bytes()
    strategy = damaged_lines(original) if lines else damaged_doc(original)
    body, note = data.draw(strategy, label="damage")
    target.write_bytes(body)
    before = _digest(copy)
    out = work / "out.agentload.jsonl.zst"
    try:
        import_trace(fmt, [copy], out)
    except AgentloadError as exc:
        text = str(exc)
        assert text and "\n" not in text, (note, text)
        assert not out.exists(), note  # a failed import leaves nothing behind
    else:
        load_trace(out)  # what was written is a trace
    assert _digest(copy) == before, note  # the input is never changed
