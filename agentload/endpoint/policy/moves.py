"""The foreign agent's moves, each a call of whichever tool the product offers for it.

``Moves`` turns an intention (list the files, search an identifier, read a window of a file,
run the tests, replace a text, delegate a sub-task, wait for sub-agents, run the finish
command) into ``(tool name, arguments)``, or ``None`` when no offered tool can do it: a
dedicated tool when there is one (``Read``, ``Grep``, ``Glob``, ``Edit``, ``apply_patch``),
else a shell command that does the same. ``intent`` reads a call back into the intention it
served, so the policy knows what it has done whatever tools it used. ``Play`` is one request
being decided: the conversation, its session, its tools and the intention of each earlier call.

Every call is made valid for its tool's schema by ``Kit.call`` (``argfill``), with a note of
what it is for (the text of a required string no move gives). A delegation names the kind of
agent that suits its purpose where the tool takes one (``pick_kind``: an explorer for a search,
a general agent otherwise), from the kinds the tool or the conversation lists.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agentload.endpoint.policy.base import BasePolicy
from agentload.endpoint.policy.facts import Facts, extract
from agentload.endpoint.policy.session import Session, Step
from agentload.endpoint.policy.toolkinds import NEW_KEYS, OLD_KEYS, PATH_KEYS, Kit
from agentload.endpoint.policy.types import Conversation

__all__ = ["Call", "Intent", "Moves", "Play", "intent", "pick_kind"]

Call = tuple[str, dict[str, Any]]

LIST_CMD = (
    "find . -type f -not -path '*/.*' -not -path '*/__pycache__/*' -not -path '*/node_modules/*'"
    " | sort | head -200"
)
DEFAULT_TESTS = "python3 -m pytest -q 2>&1 | tail -40"
FALLBACK_TESTS = "python3 -m unittest -v 2>&1 | tail -40"
"""The tests when pytest is not installed (what the default's output then says)."""
_DIR_KEYS = ("path", "dir_path", "directory", "dir")
_EXPLORER = re.compile(r"explor", re.IGNORECASE)
_GENERAL = re.compile(r"general|any task|all tools", re.IGNORECASE)


def pick_kind(kinds: list[tuple[str, str]], purpose: str) -> str | None:
    """The agent kind (``(name, what it is for)``) for a delegation: for a ``search``, one
    named an explorer (Claude Code's and Qwen Code's ``Explore``, opencode's ``explore``); else
    the general one (its name says general, else its text: ``general-purpose``, ``general``,
    ``generalist``), else the first listed; None when there are none. A specialised kind
    (Gemini CLI's ``codebase_investigator``, ``Plan``) brings a contract of its own — a pinned
    model, a structured report to return — that a general agent does not."""
    if not kinds:
        return None
    if purpose == "search":
        explorer = next((n for n, _ in kinds if _EXPLORER.search(n)), None)
        if explorer is not None:
            return explorer
    named = next((n for n, _ in kinds if _GENERAL.search(n)), None)
    return named or next((n for n, what in kinds if _GENERAL.search(what)), kinds[0][0])


class Intent(StrEnum):
    """What a call of the conversation was for."""

    LIST = "list"
    SEARCH = "search"
    READ = "read"
    EDIT = "edit"
    TEST = "test"
    DELEGATE = "delegate"
    WAIT = "wait"
    FINISH = "finish"
    OTHER = "other"


_SHELL_INTENTS = (
    (Intent.LIST, re.compile(r"^(?:find \. -type f|ls\b|git ls-files)")),
    (Intent.SEARCH, re.compile(r"^grep -rn")),
    (Intent.READ, re.compile(r"^(?:nl -ba|cat|sed -n)\b")),
    (Intent.EDIT, re.compile(r"^python3 - <<")),
)


def intent(kit: Kit, step: Step, session: Session, test_cmd: str) -> Intent:
    """What a call of the conversation was for (``Intent``): by the kind of tool it called,
    and for a shell command by the command."""
    t = kit.tools.get(step.name)
    if t is None:
        return Intent.OTHER
    by_tool = (
        (kit.delegate, Intent.DELEGATE),
        (kit.wait, Intent.WAIT),
        (kit.read, Intent.READ),
        (kit.edit, Intent.EDIT),
        (kit.patch, Intent.EDIT),
        (kit.grep, Intent.SEARCH),
        (kit.glob, Intent.LIST),
    )
    found = next((what for tool, what in by_tool if t is tool), None)
    if found is not None:
        return found
    if t is kit.shell:
        cmd = _command(step.args)
        if session.finish and cmd.strip() == session.finish:
            return Intent.FINISH
        if cmd == test_cmd or "pytest" in cmd or "unittest" in cmd:
            return Intent.TEST
        return next((what for what, rx in _SHELL_INTENTS if rx.search(cmd)), Intent.OTHER)
    return Intent.OTHER


def _command(args: dict[str, Any]) -> str:
    v = args.get("command", args.get("cmd", ""))
    if isinstance(v, list):
        return str(v[-1]) if v else ""
    return str(v)


@dataclass
class Moves:
    """The calls that carry out each intention with ``kit``'s tools (see the module docstring)."""

    kit: Kit
    session: Session

    def shell(self, command: str, description: str) -> Call | None:
        kit = self.kit
        if kit.shell is None:
            return None
        args = {**kit.shell_args(command), "description": description}
        if "test" in command:
            args.update(yield_time_ms=30000, timeout=600000)
        return kit.call(kit.shell, args, description)

    def list_files(self) -> Call | None:
        what = "List the files of the repository"
        if self.kit.glob is not None:
            where = self.kit.glob.key(_DIR_KEYS) or "path"
            return self.kit.call(self.kit.glob, {"pattern": "**/*", where: self.session.cwd}, what)
        return self.shell(LIST_CMD, what)

    def search(self, ident: str) -> Call | None:
        kit, cwd = self.kit, self.session.cwd
        if kit.grep is not None:
            key = kit.grep.key(("pattern", "regex")) or "pattern"
            where = kit.grep.key(_DIR_KEYS) or "path"
            args = {key: ident, where: cwd, "output_mode": "content", "-n": True}
            return kit.call(kit.grep, args, f"Search the code for {ident}")
        q = shlex.quote(ident)
        cmd = f"grep -rnIw --exclude-dir=.git --exclude-dir=node_modules -e {q} . | head -40"
        return self.shell(cmd, f"Search the code for {ident}")

    def read(self, path: str, start: int = 1, count: int = 0) -> Call | None:
        """Read ``path`` (relative): from line ``start``, ``count`` lines (0: the whole file)."""
        kit = self.kit
        if kit.read is not None:
            key = kit.read.key(PATH_KEYS) or "path"
            args: dict[str, Any] = {key: self.session.path(path)}
            if count:
                win = {"offset": start, "limit": count, "start_line": start}
                args.update(win, end_line=start + count - 1, view_range=[start, start + count - 1])
            return kit.call(kit.read, args, f"Read {path}")
        end = f"{start + count - 1}" if count else "$"
        cmd = f"nl -ba {shlex.quote(path)} | sed -n '{start},{end}p'"
        return self.shell(cmd, f"Show {path.rsplit('/', 1)[-1]}")

    def tests(self, command: str) -> Call | None:
        return self.shell(command, "Run the tests")

    def finish(self) -> Call | None:
        return self.shell(self.session.finish, "Submit") if self.session.finish else None

    def replace(self, path: str, old: str, new: str, shell: bool = False) -> Call | None:
        """Replace the one ``old`` in ``path`` by ``new``: ``Edit``-like strings, an
        ``apply_patch`` patch, or (``shell``, or neither offered) a python3 heredoc."""
        kit = self.kit
        if kit.edit is not None and not shell:
            t = kit.edit
            keys = [t.key(ks) for ks in (PATH_KEYS, OLD_KEYS, NEW_KEYS)]
            vals = (self.session.path(path), old, new)
            what = f"Replace the faulty line in {path}"
            return kit.call(t, {k: v for k, v in zip(keys, vals, strict=True) if k}, what)
        if kit.patch is not None and not shell:
            key = kit.patch.key(("input", "patch")) or "input"
            return kit.call(kit.patch, {key: patch_text(path, old, new)}, f"Edit {path}")
        script = (
            "python3 - <<'PY'\nimport pathlib\n"
            f"p = pathlib.Path({path!r})\ns = p.read_text()\nold = {old!r}\nnew = {new!r}\n"
            "assert s.count(old) == 1, s.count(old)\np.write_text(s.replace(old, new, 1))\n"
            "print('edited', p)\nPY"
        )
        return self.shell(script, f"Edit {path.rsplit('/', 1)[-1]}")

    def delegate(self, text: str, short: str, name: str, purpose: str = "tests") -> Call | None:
        """Start a sub-agent on ``text`` (``short``: its title; ``name``: a task name where the
        tool takes one; ``purpose``: ``search`` or ``tests``, which kind of agent suits it)."""
        kit = self.kit
        if kit.delegate is None:
            return None
        style = kit.delegate_style
        if style == "task":
            args: dict[str, Any] = {"description": short, "prompt": text}
            kind = pick_kind(kit.agent_kinds(self.session.texts), purpose)
            if kind is None and kit.selector in kit.delegate.required:
                kind = "general-purpose"  # none listed: the usual name of the default kind
            if kit.selector and kind:
                args[kit.selector] = kind
            args["run_in_background"] = False
        elif style == "spawn2":
            args = {"task_name": name, "message": text, "fork_turns": "none"}
        elif style == "spawn":
            args = {"message": text}
        else:
            key = kit.delegate.key(("input", "task", "prompt", "message", "request", "query"))
            args = {key or "input": text}
        return kit.call(kit.delegate, args, short)

    def wait(self, targets: list[str]) -> Call | None:
        kit = self.kit
        if kit.wait is None:
            return None
        args: dict[str, Any] = {"timeout_ms": 30000}
        if "targets" in kit.wait.props:
            args["targets"] = targets
        return kit.call(kit.wait, args, "Wait for the sub-agents")


def patch_text(path: str, old: str, new: str) -> str:
    """A Codex ``apply_patch`` patch that replaces the lines ``old`` by ``new`` in ``path``."""
    body = [f"-{ln}" for ln in old.split("\n")] + [f"+{ln}" for ln in new.split("\n")]
    return "\n".join(["*** Begin Patch", f"*** Update File: {path}", "@@", *body, "*** End Patch"])


@dataclass
class Play:
    """One request being decided: the conversation, its session, tools and history."""

    policy: BasePolicy
    conv: Conversation
    kit: Kit
    s: Session
    moves: Moves
    done: Counter[Intent]
    intents: list[Intent]
    test_cmd: str

    def work_facts(self) -> Facts:
        """Facts of the results of the calls that worked on the code (not the delegations)."""
        out = Facts()
        for step, what in zip(self.s.steps, self.intents, strict=True):
            if step.result and what not in (Intent.DELEGATE, Intent.WAIT, Intent.OTHER):
                out.merge(
                    extract(self.s.rel(step.result), f"{self.conv.mids[step.at]}@{self.s.cwd}")
                )
        return out.dedupe()

    def read_paths(self) -> set[str]:
        out = set()
        for step, what in zip(self.s.steps, self.intents, strict=True):
            if what != Intent.READ:
                continue
            p = next((v for k, v in step.args.items() if "path" in k or k == "file"), None)
            cmd = step.args.get("command", step.args.get("cmd"))
            if p is None and isinstance(cmd, str) and cmd.startswith("nl -ba "):
                p = cmd.split()[2].strip("'")
            if isinstance(p, str):
                out.add(self.s.rel(p))
        return out
