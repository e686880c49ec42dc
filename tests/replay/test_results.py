"""results.json is a typed, versioned document: it round-trips, and a file that is not one is
one error line naming the file (and the field), exit 2, for ``report`` and ``compare``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from replay_helpers import run_cli
from replay_servers import ChatServer

from agentload.errors import ResultsFormatError
from agentload.measure.results import (
    SCHEMA,
    SCHEMA_MAJOR,
    SCHEMA_MINOR,
    load_results,
    write_results,
)


@pytest.fixture
def results_dir(chat_server: ChatServer, fast_trace: Path, tmp_path: Path) -> Path:
    """A real run's output directory (two sweep points against the test server)."""
    out = tmp_path / "run"
    argv = ["replay", str(fast_trace), "--endpoint", chat_server.base_url, "--model"]
    argv += ["test-model", "--sweep", "1,2", "--sessions", "2", "--out", str(out)]
    assert run_cli(argv) == 0
    return out


def test_results_round_trip_through_the_model(results_dir: Path, tmp_path: Path) -> None:
    raw = orjson.loads((results_dir / "results.json").read_bytes())
    doc = load_results(results_dir)
    assert doc.schema_ == SCHEMA == raw["schema"] and doc.path == results_dir / "results.json"
    assert [p.concurrency for p in doc.points] == [1, 2]
    assert doc.points[0].requests[0].ttft_ns == raw["points"][0]["requests"][0]["ttft_ns"]
    again = write_results(doc, tmp_path / "again")
    assert orjson.loads(again.read_bytes()) == raw  # the same keys and values, written back


def test_a_newer_minor_version_keeps_the_fields_it_adds(results_dir: Path, tmp_path: Path) -> None:
    raw = orjson.loads((results_dir / "results.json").read_bytes())
    raw["schema"] = f"agentload.replay-results/{SCHEMA_MAJOR}.{SCHEMA_MINOR + 1}"
    raw["points"][0]["aggregates"]["queue_ms"] = {"p50": 4.0}
    newer = tmp_path / "newer.json"
    newer.write_bytes(orjson.dumps(raw))
    doc = load_results(newer)
    assert doc.points[0].aggregates.model_extra == {"queue_ms": {"p50": 4.0}}
    out = orjson.loads(write_results(doc, tmp_path / "w").read_bytes())
    assert out["points"][0]["aggregates"]["queue_ms"] == {"p50": 4.0}


def test_a_1_1_file_without_serving_fields_reads_and_reports(
    results_dir: Path, tmp_path: Path
) -> None:
    """1.2 added each request's serving workers and server timing, and the pools, workers and
    router hit rate they make: a 1.1 file has none of them and reads, summarises and reports."""
    from agentload.measure.report import text_summary

    raw = orjson.loads((results_dir / "results.json").read_bytes())
    raw["schema"] = "agentload.replay-results/1.1"
    for point in raw["points"]:
        for r in point["requests"]:
            for key in ("prefill_worker", "decode_worker", "server_timing"):
                del r[key]
        for key in ("pools", "served_by", "router_kv_hit_rate"):
            point["aggregates"].pop(key, None)
    old = tmp_path / "old" / "results.json"
    old.parent.mkdir()
    old.write_bytes(orjson.dumps(raw))
    doc = load_results(old)
    assert all(r.decode_worker is None for p in doc.points for r in p.requests)
    assert doc.points[0].aggregates.pools is None
    assert not any("pool" in line for line in text_summary(doc))
    assert run_cli(["report", str(old.parent), "--out", str(tmp_path / "report")]) == 0


def _drop(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        cur: Any = raw
        for key in path[:-1]:
            cur = cur[key]
        del cur[path[-1]]

    return edit


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda raw: raw.__setitem__(key, value)


@pytest.mark.parametrize(
    ("content", "edit", "message"),
    [
        (b"{not json", None, "not JSON ("),
        (b'{"type": "header", "schema": "agentload.trace/1"}', None, "not an agentload replay"),
        (b"[1, 2, 3]", None, "not an agentload replay results file"),
        (
            None,
            _set("schema", "agentload.replay-results/2"),
            "schema: results schema 'agentload.replay-results/2' is not supported by this "
            f"agentload (reads {SCHEMA}); upgrade agentload to read it",
        ),
        (
            None,
            _drop(["points", 1, "aggregates", "ttft_ms"]),
            "points.1.aggregates.ttft_ms: Field required",
        ),
        (None, _drop(["digest_manifest"]), "digest_manifest: Field required"),
        (
            None,
            _drop(["points", 0, "requests", 2, "send_ns"]),
            "points.0.requests.2.send_ns: Field required",
        ),
        (None, _set("points", "many"), "points: Input should be a valid list"),
    ],
)
def test_a_damaged_or_foreign_results_file_is_one_line(
    results_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes | None,
    edit: Callable[[dict[str, Any]], None] | None,
    message: str,
) -> None:
    bad = tmp_path / "bad" / "results.json"
    bad.parent.mkdir()
    if content is None:
        raw = orjson.loads((results_dir / "results.json").read_bytes())
        assert edit is not None
        edit(raw)
        content = orjson.dumps(raw)
    bad.write_bytes(content)
    with pytest.raises(ResultsFormatError, match="^" + str(bad)):
        load_results(bad.parent)
    capsys.readouterr()
    for argv in (
        ["report", str(bad.parent), "--out", str(tmp_path / "rep")],
        ["compare", str(results_dir), str(bad)],
    ):
        assert run_cli(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"agentload: error: {bad}: ") and "\n" not in err, err
        assert message in err, err


def test_a_directory_without_results_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["report", str(tmp_path), "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"agentload: error: {tmp_path / 'results.json'}: no such results file"


def test_kv_survival_is_read_and_tabulated_in_gap_order(results_dir: Path, tmp_path: Path) -> None:
    raw = orjson.loads((results_dir / "results.json").read_bytes())

    def row(bucket: str, lo: float, hi: float | None) -> dict[str, Any]:
        n = int(lo) + 1
        return dict(bucket=bucket, lo_s=lo, hi_s=hi, n=n, cached_tokens=n, ceiling_tokens=n)

    scrambled = [row("0-1s", 0, 1), row("15-60s", 15, 60), row("1-5s", 1, 5), row("5-15s", 5, 15)]
    raw["points"][0]["aggregates"]["kv_survival"] = [
        {**r, "ratio": 1.0, "mean_ratio": 1.0} for r in scrambled
    ]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "results.json").write_bytes(orjson.dumps(raw))
    doc = load_results(tmp_path / "in")
    order = ["0-1s", "1-5s", "5-15s", "15-60s"]
    assert [b.bucket for b in doc.points[0].aggregates.kv_survival] == order
    assert run_cli(["report", str(tmp_path / "in"), "--out", str(tmp_path / "rep")]) == 0
    html = (tmp_path / "rep" / "report.html").read_text()
    table = html.split("<h4>KV survival (cached / ceiling tokens)</h4>", 1)[1].split("</table>")[0]
    assert [table.index(f"<td>{b}</td>") for b in order] == sorted(
        table.index(f"<td>{b}</td>") for b in order
    )
