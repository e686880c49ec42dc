"""What the policy reads out of a conversation: paths, file:line locations, identifiers, errors.

Everything here is extracted from text a client actually sent (system prompt, task, tool
outputs, summaries), so a path the policy uses always appeared in the conversation. Extraction
is cached per message content (the conversation's history is parsed once, not on every call).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["Facts", "Location", "extract", "file_sections", "repo_map", "ticked"]

_EXT = (
    r"py|pyi|txt|cfg|toml|ini|md|rst|json|yaml|yml|c|h|cc|cpp|hpp|js|ts|tsx|go|rs|java|sh|"
    r"html|css|sql|rb|kt|swift|mk"
)
_PATH_RE = re.compile(
    rf"(?<![\w/.\-])((?:/workspace/)?(?:[\w.\-]+/)*[\w\-][\w.\-]*\.(?:{_EXT}))(?![\w/])"
)
_HIT_RE = re.compile(r"^((?:[\w.\-]+/)*[\w.\-]+):(\d+):", re.M)
_TRACE_RE = re.compile(r'File "([^"]+)", line (\d+)')
_READ_HEADER_RE = re.compile(r"^# ((?:[\w.\-]+/)*[\w.\-]+) \(lines (\d+)-(\d+) of (\d+)\)", re.M)
_IDENT_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*(?:_[A-Za-z0-9_]+|[a-z][A-Z][A-Za-z0-9]*))\b")
_DEF_RE = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)
_CALL_RE = re.compile(r"\b([A-Za-z_]\w{3,})\(")
_TICK_RE = re.compile(r"`([^`\n]{2,80})`")
_ERR_RE = re.compile(
    r"^(?:\w+\.)*\w*(?:Error|Exception|Warning)\b:? .{0,200}$|^(?:FAIL|ERROR): .{0,200}$", re.M
)
_FAILED_TEST_RE = re.compile(r"^(?:FAIL|ERROR): (test\w*) \(([\w.]+)\)", re.M)
_PYTEST_FAILED_RE = re.compile(r"^FAILED ([\w/.\-]+\.py)::(\w+)", re.M)
_LISTED_RE = re.compile(r"^(?:[\w.\-]+/)*[\w\-][\w.\-]*\.\w+$")
_FIELDS = (
    "paths",
    "locations",
    "idents",
    "defs",
    "errors",
    "failed_tests",
    "code_lines",
    "reads",
    "listed",
)
_STOP = frozenset(
    [
        "self",
        "cls",
        "None",
        "True",
        "False",
        "return",
        "import",
        "from",
        "class",
        "def",
        "elif",
        "else",
        "while",
        "with",
        "async",
        "await",
        "yield",
        "lambda",
        "pass",
        "break",
        "continue",
        "raise",
        "except",
        "finally",
        "assert",
        "global",
        "nonlocal",
    ]
)


@dataclass(frozen=True)
class Location:
    """A file position seen in a tool output: a search hit or a traceback frame."""

    path: str
    line: int
    kind: str  # "hit" | "trace" | "read"


@dataclass
class Facts:
    """Facts of one text (merged over a conversation by ``Facts.merge``)."""

    paths: list[str] = field(default_factory=list)
    locations: list[Location] = field(default_factory=list)
    idents: list[str] = field(default_factory=list)
    defs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed_tests: list[str] = field(default_factory=list)
    code_lines: list[str] = field(default_factory=list)
    reads: list[tuple[str, int, int, int]] = field(default_factory=list)
    listed: list[str] = field(default_factory=list)

    def merge(self, other: Facts) -> None:
        for name in _FIELDS:
            mine: list[object] = getattr(self, name)
            mine.extend(getattr(other, name))

    def dedupe(self) -> Facts:
        out = Facts()
        for name in _FIELDS:
            setattr(out, name, list(dict.fromkeys(getattr(self, name))))
        return out


def _norm(path: str) -> str | None:
    if path.startswith("/workspace/"):
        return path[len("/workspace/") :]
    if path.startswith("/") or path.startswith("..") or "site-packages" in path:
        return None
    return path[2:] if path.startswith("./") else path


def _extract(text: str) -> Facts:
    f = Facts()
    for m in _TRACE_RE.finditer(text):
        p = _norm(m.group(1))
        if p:
            f.locations.append(Location(p, int(m.group(2)), "trace"))
    for m in _HIT_RE.finditer(text):
        p = _norm(m.group(1))
        if p and "." in p.rsplit("/", 1)[-1]:
            f.locations.append(Location(p, int(m.group(2)), "hit"))
    for m in _READ_HEADER_RE.finditer(text):
        f.locations.append(Location(m.group(1), int(m.group(2)), "read"))
        f.reads.append((m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))))
    lines = text.splitlines()
    if lines and sum(1 for ln in lines[:50] if _LISTED_RE.match(ln)) >= min(len(lines), 50) * 0.8:
        f.listed = [ln for ln in lines if _LISTED_RE.match(ln)]
    for m in _PATH_RE.finditer(text):
        p = _norm(m.group(1))
        if p:
            f.paths.append(p)
    f.paths.extend(loc.path for loc in f.locations)
    f.defs.extend(m.group(1) for m in _DEF_RE.finditer(text))
    idents = [m.group(1) for m in _IDENT_RE.finditer(text)]
    idents += [m.group(1) for m in _CALL_RE.finditer(text)]
    f.idents = [i for i in dict.fromkeys(idents) if i not in _STOP and _codey(i)][:150]
    f.errors = [m.group(0).strip() for m in _ERR_RE.finditer(text)][:50]
    f.failed_tests = [f"{m.group(2)}" for m in _FAILED_TEST_RE.finditer(text)]
    f.failed_tests += [f"{m.group(1)}::{m.group(2)}" for m in _PYTEST_FAILED_RE.finditer(text)]
    code = [ln.strip() for ln in text.splitlines()[:3000] if _looks_like_code(ln)]
    f.code_lines = code[:60]
    return f


_SNAKE = re.compile(r"_*[a-z][a-z0-9]*(?:_+[a-z0-9]+)*_*|_*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_CAMEL = re.compile(r"_?(?:[A-Z]+[a-z0-9]*)+|[a-z]+(?:[A-Z]+[a-z0-9]*)+")
_RUNS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _codey(ident: str) -> bool:
    """Whether a token looks like a code identifier (not base64, not prose in test data)."""
    if not 4 <= len(ident) <= 40:
        return False
    digits = sum(c.isdigit() for c in ident)
    if _SNAKE.fullmatch(ident):
        if digits > 10:
            return False
    elif not _CAMEL.fullmatch(ident) or digits > 2:
        return False
    return all(len(r) <= 14 for r in _RUNS.findall(ident))


def _looks_like_code(line: str) -> bool:
    s = line.strip()
    if not 8 <= len(s) <= 100 or "`" in s:
        return False
    return s.startswith(("def ", "class ", "return ", "if ", "raise ", "for ", "self.")) or (
        " = " in s and "(" in s
    )


_CACHE: OrderedDict[str, Facts] = OrderedDict()
_LOCK = threading.Lock()


def extract(text: str, key: str | None = None) -> Facts:
    """Facts of ``text``; cached by ``key`` (the message's content id) when given."""
    if key is None:
        return _extract(text)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    f = _extract(text)
    with _LOCK:
        _CACHE[key] = f
        if len(_CACHE) > 8192:
            _CACHE.popitem(last=False)
    return f


def ticked(text: str) -> list[str]:
    """Backticked spans of ``text`` (identifiers and paths a task writer emphasised)."""
    return [m.group(1).strip() for m in _TICK_RE.finditer(text)]


def repo_map(system: str) -> list[str]:
    """Paths listed one per line under a ``## Repository map`` heading."""
    i = system.find("## Repository map")
    if i < 0:
        return []
    body = system[system.find("\n", i) + 1 :]
    j = body.find("\n## ")
    body = body if j < 0 else body[:j]
    out = []
    for ln in body.splitlines():
        s = ln.strip().lstrip("-* ").strip("`")
        if s and " " not in s and not s.startswith("#"):
            out.append(s)
    return out


def file_sections(system: str) -> list[str]:
    """Paths of the ``## File: <path>`` sections of a system prompt."""
    return [m.group(1).strip() for m in re.finditer(r"^## File: (\S+)", system, re.M)]
