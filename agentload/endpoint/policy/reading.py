"""What an agentload agent knows at one call, and the pickers the agent policies share.

``build_context`` reads the conversation once (facts cached per message): the task, the
repository map and file sections (of the first user message, else of the system prompt), every fact of the tool outputs, the
freshest results, and what was already read, searched, run and delegated. The pickers choose
identifiers, locations and paths that the conversation really contains and that were not used
yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentload.contract import (
    DELEGATE,
    READ_FILE,
    REPO_MAP_HEADING,
    RUN_TESTS,
    SEARCH_CODE,
    TASK_HEADING,
)
from agentload.endpoint.policy.base import BasePolicy
from agentload.endpoint.policy.facts import (
    Facts,
    Location,
    extract,
    file_sections,
    repo_map,
    ticked,
)
from agentload.endpoint.policy.prose import Prose
from agentload.endpoint.policy.types import Conversation

__all__ = [
    "READ_HEAD",
    "Call",
    "Ctx",
    "build_context",
    "continuations",
    "first_sentence",
    "first_user",
    "fresh_idents",
    "is_used",
    "known_def",
    "listed_paths",
    "note_call",
    "prose_for",
    "task_idents",
    "unread_locations",
    "unread_paths",
    "window_args",
]

READ_HEAD = re.compile(r"^# (\S+) \(lines (\d+)-(\d+) of (\d+)\)\n")
"""The first line of a ``read_file`` output (``tools.files``): path, first and last line, total."""
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DOTTED_TEST = re.compile(r"^(?:[\w]+\.)*test\w*(?:\.\w+)*$")
_SYS_CACHE: dict[str, tuple[list[str], list[str], Facts]] = {}

Call = tuple[str, dict[str, Any]]


@dataclass
class Ctx:
    """What an agent knows at this call (see module docstring)."""

    policy: BasePolicy
    conv: Conversation
    offered: set[str]
    task: str
    repo: list[str]
    sections: list[str]
    sys_facts: Facts
    facts: Facts
    last: Facts
    headers: list[tuple[str, int, int, int]]
    read: dict[str, set[int]] = field(default_factory=dict)
    read_end: dict[str, int] = field(default_factory=dict)
    whole: set[str] = field(default_factory=set)
    searched: set[str] = field(default_factory=set)
    said: str = ""
    ran_targets: list[str] = field(default_factory=list)

    @property
    def rng(self) -> Any:
        return self.conv.rng


def first_user(conv: Conversation) -> tuple[str, str]:
    """(repository context, request) of the first user message: a message that starts with
    the repository map (``agents.first_prompt``) carries the context, then the request under
    ``## Task``; any other is the request alone."""
    text = conv.text(1) if len(conv.messages) > 1 else ""
    if text.startswith(REPO_MAP_HEADING):
        context, sep, task = text.rpartition(f"\n{TASK_HEADING}\n")
        if sep:
            return context, task
    return "", text


def build_context(policy: BasePolicy, conv: Conversation) -> Ctx:
    context, task = first_user(conv)
    key = conv.mids[0] + (conv.mids[1] if context else "")
    cached = _SYS_CACHE.get(key)
    if cached is None:
        if len(_SYS_CACHE) > 256:
            _SYS_CACHE.clear()
        # the system prompt and the repository context: what the agent was given to start
        known = conv.text(0) + ("\n\n" + context if context else "")
        cached = (repo_map(known), file_sections(known), extract(known, key))
        _SYS_CACHE[key] = cached
    repo, sections, sys_facts = cached
    last_asst = max(
        (i for i, m in enumerate(conv.messages) if m.get("role") == "assistant"), default=0
    )
    if context:  # the request's facts, then the later messages' (the context's are above)
        facts = Facts()  # extract's result is cached: merge into a new one
        facts.merge(extract(task, conv.mids[1] + "#task"))
        facts.merge(conv.facts(2))
        facts = facts.dedupe()
    else:
        facts = conv.facts(1)
    ctx = Ctx(
        policy=policy,
        conv=conv,
        offered=set(conv.tools),
        task=task,
        repo=repo,
        sections=sections,
        sys_facts=sys_facts,
        facts=facts,
        last=conv.facts(last_asst + 1) if last_asst else facts,
        headers=facts.reads,
    )
    said = []
    for name, args in conv.calls():
        if name == READ_FILE and isinstance(args.get("path"), str):
            p = args["path"]
            start = int(args.get("start_line") or 1)
            ctx.read.setdefault(p, set()).add(start)
            if "end_line" not in args:
                ctx.whole.add(p)
            else:
                ctx.read_end[p] = max(ctx.read_end.get(p, 0), int(args["end_line"]))
        elif name == SEARCH_CODE:
            ctx.searched.add(str(args.get("pattern", "")))
        elif name == RUN_TESTS:
            ctx.ran_targets.append(str(args.get("target", "")))
        elif name == DELEGATE:
            said.append(str(args.get("task", "")))
    ctx.said = "\n".join(said)
    return ctx


def prose_for(ctx: Ctx) -> Prose:
    fresh = Facts()
    fresh.merge(ctx.last)
    fresh.merge(ctx.facts)
    vocab = ctx.policy.vocab_for(ctx.conv, fresh.dedupe())
    if not vocab.paths:
        vocab.paths = ctx.sections[:20] or ctx.repo[:20]
    return ctx.policy.prose(ctx.conv, vocab)


# -- shared pickers ----------------------------------------------------------------------------
def task_idents(text: str) -> list[str]:
    """Identifiers a task emphasised (backticked); without any, the code-like words in it."""
    out = [
        t for t in ticked(text) if _IDENT.match(t) and len(t) >= 3 and (not t.islower() or "_" in t)
    ]
    return list(dict.fromkeys(out)) or extract(text).idents


def known_def(ctx: Ctx, ident: str) -> bool:
    """Whether ``ident`` was seen defined (``def``/``class``) in the conversation."""
    return ident in ctx.facts.defs or ident in ctx.sys_facts.defs


def is_used(ctx: Ctx, ident: str) -> bool:
    return any(ident in s for s in ctx.searched) or f"`{ident}`" in ctx.said


def fresh_idents(ctx: Ctx) -> list[str]:
    pool = task_idents(ctx.task)
    pool += [t.rsplit(".", 1)[-1] for t in ctx.facts.failed_tests]
    pool += ctx.last.defs + ctx.facts.defs + ctx.last.idents + ctx.facts.idents
    pool += ctx.sys_facts.defs[:300]
    return [i for i in dict.fromkeys(pool) if len(i) >= 4 and not is_used(ctx, i)]


def window_args(ctx: Ctx, loc: Location, before: int, after: int) -> dict[str, Any]:
    return {"path": loc.path, "start_line": max(1, loc.line - before), "end_line": loc.line + after}


def unread_locations(ctx: Ctx, facts: Facts, kinds: tuple[str, ...]) -> list[Location]:
    out = []
    before, _ = ctx.policy.config.read_window
    for loc in facts.locations:
        if loc.kind not in kinds or loc.path in ctx.whole:
            continue
        starts = ctx.read.get(loc.path, set())
        if any(abs(s - max(1, loc.line - before)) < 40 for s in starts):
            continue
        out.append(loc)
    return out


def unread_paths(ctx: Ctx) -> list[str]:
    cands = [p for p in ctx.facts.paths if p not in ctx.read and p in repo_set(ctx)]
    cands += [p for p in ctx.facts.paths if p not in ctx.read and not ctx.repo]
    words = {w.lower() for w in task_idents(ctx.task)} | {
        w.lower() for w in re.findall(r"[A-Za-z_]{4,}", ctx.task)
    }
    ranked = sorted(
        (p for p in ctx.repo if p not in ctx.read and p not in ctx.sections),
        key=lambda p: (-sum(w in p.lower() for w in words), not p.endswith(".py"), p),
    )
    cands += ranked[:40]
    return list(dict.fromkeys(cands))


def repo_set(ctx: Ctx) -> set[str]:
    s = getattr(ctx, "repo_set", None)
    if s is None:
        s = set(ctx.repo)
        object.__setattr__(ctx, "repo_set", s)
    return s


def continuations(ctx: Ctx, span: int) -> list[dict[str, Any]]:
    out = []
    for path, _a, b, n in ctx.headers:
        if b < n and ctx.read_end.get(path, 0) <= b and path not in ctx.whole:
            out.append({"path": path, "start_line": b + 1, "end_line": min(n, b + span)})
    return out


def first_sentence(text: str) -> str:
    s = " ".join(text.split())
    cut = s.find(". ")
    return s[: cut + 1] if 0 < cut < 300 else s[:300]


def note_call(ctx: Ctx, name: str, args: dict[str, Any]) -> None:
    """Remember a call chosen in this round so a parallel sibling picks something else."""
    if name == READ_FILE:
        ctx.read.setdefault(args["path"], set()).add(int(args.get("start_line") or 1))
        if "end_line" not in args:
            ctx.whole.add(args["path"])
        else:
            ctx.read_end[args["path"]] = max(ctx.read_end.get(args["path"], 0), args["end_line"])
    elif name == SEARCH_CODE:
        ctx.searched.add(str(args.get("pattern")))


def listed_paths(ctx: Ctx) -> list[str]:
    """Paths that a tool output gave one per line (``list_files``)."""
    return ctx.facts.listed
