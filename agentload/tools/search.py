"""``search_code``: a Python regex over the workspace, run *inside the sandbox* (a pathological
pattern is then bounded by the tool's timeout, not stuck in the agent's process)."""

from __future__ import annotations

import re

from agentload.tools.result import ToolError

__all__ = ["LINE_WIDTH", "PATTERN_MAX", "SEARCH_SCRIPT", "check_pattern", "search_argv"]

LINE_WIDTH = 240
PATTERN_MAX = 10_000

# argv: pattern, base path (relative to the cwd = workspace), max hits, line width.
# Prints `path:line: text` hits (sorted walk, no symlinks, no binaries), then `#total N`.
SEARCH_SCRIPT = r"""
import os, re, sys
rx = re.compile(sys.argv[1]); base = sys.argv[2]; cap = int(sys.argv[3]); width = int(sys.argv[4])
def files(base):
    if os.path.isfile(base):
        yield base
        return
    for d, dirs, fs in os.walk(base):
        dirs[:] = sorted(x for x in dirs
                         if x not in (".git", "__pycache__") and not os.path.islink(os.path.join(d, x)))
        for f in sorted(fs):
            p = os.path.join(d, f)
            if not os.path.islink(p) and not f.endswith(".pyc"):
                yield p
total = 0
out = []
for p in files(base):
    try:
        with open(p, "rb") as fh:
            data = fh.read(4000000)
    except OSError:
        continue
    if b"\0" in data[:8192]:
        continue
    for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if rx.search(line):
            total += 1
            if total <= cap:
                out.append("%s:%d: %s" % (os.path.normpath(p), n, line.strip()[:width]))
sys.stdout.write("".join(s + "\n" for s in out) + "#total %d\n" % total)
sys.exit(0 if total else 1)
"""


def check_pattern(pattern: str) -> None:
    """Compile ``pattern`` (cheap, no matching) so a bad regex is a clear tool error."""
    if not pattern:
        raise ToolError("`pattern` is empty")
    if len(pattern) > PATTERN_MAX:
        raise ToolError(f"`pattern` is {len(pattern)} characters long (at most {PATTERN_MAX})")
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:  # a{99999999999}, ((((...))))
        raise ToolError(f"invalid regular expression {pattern[:200]!r}: {exc}") from None


def search_argv(pattern: str, base: str, max_results: int) -> list[str]:
    """The command the sandbox runs."""
    # -I -S: no site, no user paths, no environment: ~20 ms less start-up per search
    return [
        "python3",
        "-I",
        "-S",
        "-c",
        SEARCH_SCRIPT,
        pattern,
        base,
        str(max_results),
        str(LINE_WIDTH),
    ]
