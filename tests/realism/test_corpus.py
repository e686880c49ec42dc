"""`agentload realism` on real files: the corpus read through `trace import`, every statistic
computed from the trace model, the outputs a user asks for, bad input as one line."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

from agent_runs import agentload

from agentload.interop.weka import import_weka
from agentload.realism.statistics import observe, session_views
from agentload.trace.schema import TurnKind
from agentload.trace.timeline import turn_of
from agentload.trace.trace import load_trace


def test_the_import_keeps_what_each_request_appends(kvct_train: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.agentload.jsonl.zst"
    import_weka([kvct_train / "trace_0010.json"], out)
    trace = load_trace(out)
    raw = json.loads((kvct_train / "trace_0010.json").read_text())
    root = [r for r in raw["requests"] if r["type"] in ("n", "s")]
    users = sum(
        1 for r in root if "text" in r["input_types"] and "tool_result" not in r["input_types"]
    )
    (view,) = session_views(trace)
    (main,) = view.roots
    turns = [turn_of(trace, c) for c in main.calls]
    assert turns.count(TurnKind.USER) == users == 18  # text alone: the user typed
    assert all(turn_of(trace, a.calls[0]) is TurnKind.BRIEF for a in view.subs)
    assert len(view.subs) == 4
    # a gap after tool results is the request's think_time, as the file wrote it
    thinks = [r["think_time"] for r in root[1:] if "tool_result" in r["input_types"]]
    gaps = [g.seconds for g in main.gaps if g.turn is TurnKind.TOOL]
    assert len(gaps) == len(thinks)
    assert abs(statistics.median(gaps) - statistics.median(thinks)) <= 1


def test_a_corpus_against_itself_is_in_band_at_distance_zero(
    kvct_train: Path, tmp_path: Path
) -> None:
    out = tmp_path / "c.agentload.jsonl.zst"
    r = agentload("trace", "import", "weka", str(kvct_train), "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = agentload("realism", str(out), "--against", str(kvct_train), "--json", "--strict")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.splitlines()[-1])
    assert doc["schema"] == "agentload.realism/1"
    assert doc["ours"]["sessions"] == doc["corpus"]["sessions"] == 71
    rows = {row["key"]: row for row in doc["rows"]}
    for key in ("output_tokens_per_call", "gap_after_tool_s", "user_turns_per_session",
                "subagents_per_session", "session_wall_s", "prefix_reuse"):  # fmt: skip
        assert rows[key]["verdict"] == "in", key
        assert rows[key]["ks_d"] in (0.0, None), key
    assert rows["gap_before_user_s"]["corpus"]["p50"] > 100  # people take minutes
    assert 7 <= rows["gap_after_tool_s"]["corpus"]["p50"] <= 12
    assert doc["in_band"] == doc["judged"]


def test_outputs_html_png_markdown_and_labels(kvct_train: Path, tmp_path: Path) -> None:
    ours = tmp_path / "ours"
    ours.mkdir()
    for name in ("trace_0030.json", "trace_0040.json"):
        shutil.copy(kvct_train / name, ours / name)
    html, png = tmp_path / "r.html", tmp_path / "r.png"
    r = agentload("realism", str(ours), "--against", str(kvct_train), "--html", str(html),
                  "--plot", str(png), "--labels", "two,all")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "ours:   two (2 sessions)" in r.stdout and "corpus: all (71 sessions)" in r.stdout
    page = html.read_text()
    assert (
        page.startswith("<!doctype html>")
        and "<svg" in page
        and "http" not in page.split("<svg")[0].lower().replace("http://www.w3.org", "")
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = agentload("realism", str(ours), "--against", str(kvct_train), "--markdown")
    lines = r.stdout.splitlines()
    assert lines[0].startswith("| statistic |") and any(
        "gap before a user turn" in x for x in lines
    )
    # an existing output is replaced only with --force
    r = agentload("realism", str(ours), "--against", str(kvct_train), "--plot", str(png))
    assert r.returncode == 2 and "--force" in r.stderr


def test_bad_input_is_one_line(kvct_train: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"what": 1}')
    cases = [
        (["realism", str(kvct_train)], "--against"),
        (["realism", "--against", str(kvct_train)], "give our traces"),
        (["realism", str(tmp_path / "none"), "--against", str(kvct_train)], "no such file"),
        (["realism", str(kvct_train), "--against", str(junk)], "not a format"),
        (["realism", str(kvct_train), "--against", str(kvct_train), "--labels", "x"], "--labels"),
        (["realism", str(kvct_train), "--against", str(kvct_train), "--gaps", "no"], "--gaps"),
    ]
    for args, said in cases:
        r = agentload(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert said in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) <= 3, r.stderr  # auto-detect and import lines


def test_observe_counts_units_per_session(kvct_train: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.agentload.jsonl.zst"
    import_weka([kvct_train / "trace_0270.json", kvct_train / "trace_0050.json"], out)
    obs = observe(load_trace(out))
    assert obs.sessions == 2
    assert sorted(len(v) for v in obs.values["subagents_per_session"].values()) == [0, 1]
    assert len(obs.units("output_tokens_per_call")) == 2  # per-session medians
    assert len(obs.pooled("output_tokens_per_call")) > 100  # every call


def test_each_statistic_is_defined_once_in_the_docs() -> None:
    """docs/realism.md holds every statistic's key, title and definition as the code has them."""
    from agentload.realism.statistics import STATISTICS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "realism.md").read_text()
    for st in STATISTICS:
        assert f"| `{st.key}` | {st.title} | {st.unit.value} | {st.definition} |" in doc, st.key
