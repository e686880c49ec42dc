#!/usr/bin/env python3
"""Check agentload's sizes: no module over MAX_MODULE_LINES lines, no function over
MAX_FUNCTION_LINES lines (but those named in LONG_FUNCTIONS, each with its reason).

Usage: python scripts/size_check.py [--list]

Reads ``agentload/`` with ``ast`` (nothing is imported). Ruff checks the rest of the shape in
``pyproject.toml``: complexity (C901) and parameters (PLR0913). ``--list`` prints the largest
modules and functions too. Exit status: 0 when every size is within its limit, 1 otherwise (an
entry of LONG_FUNCTIONS that is no longer long is a failure too: the list only shrinks).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "agentload"

MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
LONG_FUNCTIONS: dict[str, str] = {}
"""``path:function`` → why it may stay longer than MAX_FUNCTION_LINES (at most a few)."""


def functions(tree: ast.AST) -> list[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every function and method in ``tree``."""
    out: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                out.append(
                    (name, child.lineno, (child.end_lineno or child.lineno) - child.lineno + 1)
                )
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def main(argv: list[str]) -> int:
    problems: list[str] = []
    modules: list[tuple[int, str]] = []
    funcs: list[tuple[int, str]] = []
    seen_long: set[str] = set()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        modules.append((n, rel))
        if n > MAX_MODULE_LINES:
            problems.append(f"module: {rel} has {n} lines (at most {MAX_MODULE_LINES})")
        for name, line, length in functions(ast.parse(text, filename=rel)):
            funcs.append((length, f"{rel}:{line} {name}"))
            if length <= MAX_FUNCTION_LINES:
                continue
            key = f"{rel}:{name}"
            if key in LONG_FUNCTIONS:
                seen_long.add(key)
                continue
            problems.append(
                f"function: {rel}:{line} {name} has {length} lines (at most {MAX_FUNCTION_LINES})"
            )
    for key in sorted(set(LONG_FUNCTIONS) - seen_long):
        problems.append(f"allowed but no longer long (remove it from LONG_FUNCTIONS): {key}")
    if "--list" in argv:
        for n, rel in sorted(modules, reverse=True)[:10]:
            print(f"{n:6d}  {rel}")
        for n, name in sorted(funcs, reverse=True)[:10]:
            print(f"{n:6d}  {name}")
    for p in problems:
        print(p)
    print(
        f"{len(modules)} modules (largest {max(modules)[0]} lines), {len(funcs)} functions "
        f"(longest {max(funcs)[0]} lines), {len(problems)} size problems"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
