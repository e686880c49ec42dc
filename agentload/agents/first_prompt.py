"""The context builder: the orchestrator's first prompt, sized to the scenario's budget.

The system message is the scenario's orchestrator instructions, as written: with the tools,
the static prefix every session of an agent product starts with (a server caches it across
users). The repository context comes in the first user message, in front of the request, as
real coding agents send a workspace's context (the simulator's policy parses the headings)::

    ## Repository map
    <every workspace file, one relative path per line>

    ## File: <path>
    <the file's text>
    ...

    ## Task
    <the user's request>

Key files are the ones a real agent would load first, in this order: files the task names,
then source files (package ``__init__`` first, then by path), then test files. They are added
until the whole request (tools + system + user + reply priming, under agentload's framing
convention) reaches ``budget_tokens``; the last file is cut at a line boundary to land on the
budget. The result depends only on the workspace content and the inputs, never on timing.
Nothing agentload-specific is added to either prompt: an endpoint sees the scenario's own words.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agentload.contract import REPO_MAP_HEADING, TASK_HEADING
from agentload.tokenizer import ChatTokenCounter

__all__ = ["OrchestratorPrompt", "build_orchestrator_prompt", "build_subagent_prompt"]

_TEXT_SUFFIXES = frozenset(
    {".py", ".txt", ".md", ".rst", ".cfg", ".toml", ".ini", ".json", ".yaml", ".yml"}
)
_MAX_FILE_BYTES = 400_000
_token_cache: dict[bytes, int] = {}


@dataclass(frozen=True)
class OrchestratorPrompt:
    """The orchestrator's first messages (system instructions; the user message: repository
    context, then the task) and what went into them."""

    system: str
    user: str
    files: tuple[str, ...]
    cut_file: str | None
    tokens: int


def _count(counter: ChatTokenCounter, text: str) -> int:
    key = hashlib.blake2b(text.encode(), digest_size=16).digest()
    n = _token_cache.get(key)
    if n is None:
        n = counter.count_text(text)
        if len(_token_cache) > 50_000:
            _token_cache.clear()
        _token_cache[key] = n
    return n


def _is_test(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1]
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or any(p in ("test", "tests", "testing") for p in parts[:-1])
    )


def _rank(path: str, task: str) -> tuple[int, int, str]:
    p = PurePosixPath(path)
    mentioned = path in task or (p.name in task and p.suffix == ".py")
    if mentioned:
        tier = 0
    elif _is_test(path):
        tier = 2
    else:
        tier = 1
    return (tier, 0 if p.name == "__init__.py" else 1, path)


def _read_text(root: Path, rel: str) -> str | None:
    path = root / rel
    if PurePosixPath(rel).suffix not in _TEXT_SUFFIXES:
        return None
    try:
        if path.is_symlink() or path.stat().st_size > _MAX_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def build_orchestrator_prompt(
    *,
    root: Path,
    files: Sequence[str],
    instructions: str,
    task: str,
    tools: list[dict[str, Any]],
    budget_tokens: int,
    counter: ChatTokenCounter,
) -> OrchestratorPrompt:
    """The orchestrator's first prompt filled to ``budget_tokens`` (module docstring)."""
    files = sorted(files)
    system = f"{instructions.strip()}\n"
    head = f"{REPO_MAP_HEADING}\n" + "\n".join(files)
    tail = f"\n\n{TASK_HEADING}\n{task}"

    def messages(user: str) -> list[dict[str, Any]]:
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    fixed = counter.count_prompt(messages(head + tail), tools)
    room = budget_tokens - fixed
    chunks: list[str] = [head]
    chosen: list[str] = []
    cut: str | None = None
    for rel in sorted(files, key=lambda f: _rank(f, task)):
        if room <= 64:
            break
        text = _read_text(root, rel)
        if not text or not text.strip():
            continue
        piece = f"\n\n## File: {rel}\n{text.rstrip()}"
        cost = _count(counter, piece)
        if cost <= room:
            chunks.append(piece)
            chosen.append(rel)
            room -= cost
            continue
        # The last file: keep whole lines while they fit.
        lines = piece.split("\n")
        lo, hi = 0, len(lines)
        while lo < hi:  # largest prefix of lines that fits
            mid = (lo + hi + 1) // 2
            if _count(counter, "\n".join(lines[:mid])) <= room:
                lo = mid
            else:
                hi = mid - 1
        if lo > 4:
            chunks.append("\n".join(lines[:lo]))
            chosen.append(rel)
            cut = rel
        break
    user = "".join(chunks) + tail
    total = counter.count_prompt(messages(user), tools)
    return OrchestratorPrompt(
        system=system, user=user, files=tuple(chosen), cut_file=cut, tokens=total
    )


def build_subagent_prompt(instructions: str) -> str:
    """A sub-agent's system prompt: its kind's instructions."""
    return f"{instructions.strip()}\n"
