#!/usr/bin/env python3
"""Print agentload's internal import graph problems: cycles, and imports that run up a floor.

Usage: python scripts/import_graph.py [--graph]

Reads every module of ``agentload/`` with ``ast`` (nothing is imported or run). An import
inside a function, or under ``if TYPE_CHECKING:``, counts like one at the top: an import written
lazily to dodge a cycle still says the two modules need each other.

The floors come from the layer table in ``docs/architecture.md``: a row
``| N | `pkg`, `pkg2` | ...`` puts those packages/modules on floor N; a module may import only from
its own floor or below. A line ``... `a` ↮ `b` ...`` names two packages (a wall) that may not
import each other in either direction, whatever their floors. Exit status: 0 when there is no cycle and no upward import, 1 otherwise.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "agentload"
ARCH = ROOT / "docs" / "architecture.md"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The agentload modules ``path`` imports (resolved to modules that exist)."""
    me = module_name(path)
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("agentload"):
                    target = resolve(alias.name)
                    if target:
                        found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = me.split(".") if is_pkg else me.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            if not mod.startswith("agentload"):
                continue
            for alias in node.names:
                target = resolve(f"{mod}.{alias.name}")
                if target:
                    found.add(target)
    found.discard(me)
    return found


def build_graph() -> dict[str, set[str]]:
    files = sorted(PKG.rglob("*.py"))
    modules = {module_name(p) for p in files}
    graph = {module_name(p): imports_of(p, modules) for p in files}
    # A package's __init__ is imported on the way to any of its submodules; that is not an
    # edge of ours (Python resolves it), so a module importing its own package is dropped.
    for mod, deps in graph.items():
        graph[mod] = {d for d in deps if not mod.startswith(d + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def floors() -> dict[str, int]:
    """``{dotted prefix: floor}`` from the layer table of docs/architecture.md."""
    if not ARCH.exists():
        return {}
    table: dict[str, int] = {}
    for line in ARCH.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if not m:
            continue
        for name in re.findall(r"`([a-z_./]+)`", m.group(2)):
            dotted = name.strip("/").removesuffix(".py").replace("/", ".")
            table[f"agentload.{dotted}"] = int(m.group(1))
    return table


def walls() -> list[tuple[str, str]]:
    """The pairs of packages that may not import each other (a line with `a` ↮ `b`)."""
    if not ARCH.exists():
        return []
    text = ARCH.read_text(encoding="utf-8")
    return [
        (f"agentload.{a}", f"agentload.{b}")
        for a, b in re.findall(r"`([a-z_.]+)`\s*↮\s*`([a-z_.]+)`", text)
    ]


def inside(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def floor_of(mod: str, table: dict[str, int]) -> int | None:
    name = mod
    while name:
        if name in table:
            return table[name]
        name = name.rpartition(".")[0]
    return None


def main(argv: list[str]) -> int:
    graph = build_graph()
    if "--graph" in argv:
        for mod in sorted(graph):
            print(f"{mod} -> {', '.join(sorted(graph[mod])) or '-'}")
    bad = 0
    found = cycles(graph)
    for comp in found:
        print("cycle: " + " <-> ".join(comp))
        bad += 1
    table = floors()
    unplaced = sorted(m for m in graph if m != "agentload" and floor_of(m, table) is None)
    for mod in unplaced:
        print(f"no floor: {mod} (add its package to the layer table in docs/architecture.md)")
        bad += 1
    for mod in sorted(graph):
        mine = floor_of(mod, table)
        if mine is None:
            continue
        for dep in sorted(graph[mod]):
            theirs = floor_of(dep, table)
            if theirs is not None and theirs > mine:
                print(f"upward: {mod} (floor {mine}) imports {dep} (floor {theirs})")
                bad += 1
    for a, b in walls():
        for mod in sorted(graph):
            for dep in sorted(graph[mod]):
                if (inside(mod, a) and inside(dep, b)) or (inside(mod, b) and inside(dep, a)):
                    print(f"through a wall: {mod} imports {dep} ({a} ↮ {b})")
                    bad += 1
    print(
        f"{len(graph)} modules, {sum(len(d) for d in graph.values())} imports, "
        f"{len(found)} cycles, {bad - len(found)} layer problems"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
