"""The house rules the code must keep: no import cycle, no upward import, no import through a
wall, sizes within their limits, docs that point inside the repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_script(name: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``scripts/NAME`` run over the tree at ``root`` (a copy of ours in ``root`` when it is not
    the repository: the script reads the tree beside it)."""
    script = root / "scripts" / name
    if root != ROOT:
        script.parent.mkdir(exist_ok=True)
        script.write_text((ROOT / "scripts" / name).read_text())
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)


def test_no_import_cycle_and_no_upward_import() -> None:
    res = run_script("import_graph.py")
    assert res.returncode == 0, res.stdout + res.stderr
    assert " 0 cycles, 0 layer problems" in res.stdout


def test_the_checker_finds_a_cycle_an_upward_import_and_a_crossed_wall(tmp_path: Path) -> None:
    # A copy of the checker over a tiny package with the three defects must report each.
    pkg = tmp_path / "agentload"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("from agentload.low import b\n")
    (pkg / "low" / "b.py").write_text("def f():\n    from agentload.low import a\n")
    (pkg / "top.py").write_text("")
    (pkg / "low" / "c.py").write_text("import agentload.top\n")
    (pkg / "side.py").write_text("from agentload import top\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(
        "| floor | modules |\n|---|---|\n| 0 | `low` |\n| 1 | `top`, `side` |\n\n"
        "Walls: `side` ↮ `top`.\n"
    )
    res = run_script("import_graph.py", tmp_path)
    assert res.returncode == 1
    assert "cycle: agentload.low.a <-> agentload.low.b" in res.stdout
    assert "upward: agentload.low.c (floor 0) imports agentload.top (floor 1)" in res.stdout
    assert "through a wall: agentload.side imports agentload.top" in res.stdout


def test_docs_point_only_inside_the_repository() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text, f"{page.name} points outside the repository"
        for target in re.findall(r"\]\(([^)#\s]+)\)", text):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
        for path in re.findall(r"`((?:agentload|docs|scripts|benchmarks|tests)/[\w./-]+)`", text):
            assert (ROOT / path).exists(), f"{page.name}: `{path}` does not exist"


def test_sizes_are_within_their_limits() -> None:
    res = run_script("size_check.py")
    assert res.returncode == 0, res.stdout + res.stderr
    assert " 0 size problems" in res.stdout


def test_the_size_checker_finds_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    pkg = tmp_path / "agentload"
    pkg.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(61))
    (pkg / "long.py").write_text("def long_one():\n" + body)
    (pkg / "big.py").write_text("x = 1\n" * 451)
    res = run_script("size_check.py", tmp_path)
    assert res.returncode == 1
    assert "module: agentload/big.py has 451 lines (at most 450)" in res.stdout
    assert "function: agentload/long.py:1 long_one has 62 lines (at most 60)" in res.stdout


def test_one_client_speaks_to_llm_apis() -> None:
    # Replay and generate's agents send through agentload.client alone: no module outside it
    # holds an HTTP client of its own (httpx elsewhere: the /metrics scraper and URL syntax
    # checks), and nothing imports the openai SDK.
    others = {"agentload/replay/scrape.py", "agentload/options/values.py"}
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "agentload").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for name in ("httpx", "openai"):
            if re.search(rf"^\s*(import|from) {name}\b", path.read_text(), re.MULTILINE):
                found.setdefault(name, set()).add(rel)
    assert "openai" not in found
    outside = {p for p in found["httpx"] if not p.startswith("agentload/client/")}
    assert outside == others
