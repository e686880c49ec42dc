"""The foreign agent's moves, each a call of whichever tool the product offers for it.

``Moves`` turns an intention (list the files, search an identifier, read a window of a file,
run the tests, replace a text, delegate a sub-task, wait for sub-agents, run the finish
command) into ``(tool name, arguments)``, or ``None`` when no offered tool can do it: a
dedicated tool when there is one (``Read``, ``Grep``, ``Glob``, ``Edit``, ``apply_patch``),
else a shell command that does the same. ``intent`` reads a call back into the intention it
served, so the policy knows what it has done whatever tools it used. ``Play`` is one request
being decided: the conversation, its session, its tools and the intention of each earlier call.
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
from agentload.endpoint.policy.toolkinds import Kit
from agentload.endpoint.policy.types import Conversation

__all__ = ["Call", "Intent", "Moves", "Play", "intent"]

Call = tuple[str, dict[str, Any]]

LIST_CMD = (
    "find . -type f -not -path '*/.*' -not -path '*/__pycache__/*' -not -path '*/node_modules/*'"
    " | sort | head -200"
)
DEFAULT_TESTS = "python3 -m pytest -q 2>&1 | tail -40"
FALLBACK_TESTS = "python3 -m unittest -v 2>&1 | tail -40"
"""The tests when pytest is not installed (what the default's output then says)."""


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
    by_tool = ((kit.delegate, Intent.DELEGATE), (kit.wait, Intent.WAIT), (kit.read, Intent.READ),
               (kit.edit, Intent.EDIT), (kit.patch, Intent.EDIT), (kit.grep, Intent.SEARCH),
               (kit.glob, Intent.LIST))  # fmt: skip
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
        return kit.call(kit.shell, args)

    def list_files(self) -> Call | None:
        if self.kit.glob is not None:
            return self.kit.call(self.kit.glob, {"pattern": "**/*", "path": self.session.cwd})
        return self.shell(LIST_CMD, "List the files of the repository")

    def search(self, ident: str) -> Call | None:
        kit, cwd = self.kit, self.session.cwd
        if kit.grep is not None:
            key = kit.grep.key(("pattern", "regex")) or "pattern"
            args = {key: ident, "path": cwd, "output_mode": "content", "-n": True}
            return kit.call(kit.grep, args)
        q = shlex.quote(ident)
        cmd = f"grep -rnIw --exclude-dir=.git --exclude-dir=node_modules -e {q} . | head -40"
        return self.shell(cmd, f"Search the code for {ident}")

    def read(self, path: str, start: int = 1, count: int = 0) -> Call | None:
        """Read ``path`` (relative): from line ``start``, ``count`` lines (0: the whole file)."""
        kit = self.kit
        if kit.read is not None:
            key = kit.read.key(("file_path", "path", "filename", "file", "filepath")) or "path"
            args: dict[str, Any] = {key: self.session.path(path)}
            if count:
                win = {"offset": start, "limit": count, "start_line": start}
                args.update(win, end_line=start + count - 1, view_range=[start, start + count - 1])
            return kit.call(kit.read, args)
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
            keys = [t.key(ks) for ks in (("file_path", "path", "filename", "file"),
                    ("old_string", "old_str", "old", "old_text", "search"),
                    ("new_string", "new_str", "new", "new_text", "replace"))]  # fmt: skip
            vals = (self.session.path(path), old, new)
            return kit.call(t, {k: v for k, v in zip(keys, vals, strict=True) if k})
        if kit.patch is not None and not shell:
            key = kit.patch.key(("input", "patch")) or "input"
            return kit.call(kit.patch, {key: patch_text(path, old, new)})
        script = (
            "python3 - <<'PY'\nimport pathlib\n"
            f"p = pathlib.Path({path!r})\ns = p.read_text()\nold = {old!r}\nnew = {new!r}\n"
            "assert s.count(old) == 1, s.count(old)\np.write_text(s.replace(old, new, 1))\n"
            "print('edited', p)\nPY"
        )
        return self.shell(script, f"Edit {path.rsplit('/', 1)[-1]}")

    def delegate(self, text: str, short: str, name: str) -> Call | None:
        kit = self.kit
        if kit.delegate is None:
            return None
        style = kit.delegate_style
        if style == "task":
            args: dict[str, Any] = {"description": short, "prompt": text}
            if "general-purpose" in self.session.texts:
                args["subagent_type"] = "general-purpose"
            args["run_in_background"] = False
        elif style == "spawn2":
            args = {"task_name": name, "message": text, "fork_turns": "none"}
        elif style == "spawn":
            args = {"message": text}
        else:
            key = kit.delegate.key(("input", "task", "prompt", "message", "request", "query"))
            args = {key or "input": text}
        return kit.call(kit.delegate, args)

    def wait(self, targets: list[str]) -> Call | None:
        kit = self.kit
        if kit.wait is None:
            return None
        args: dict[str, Any] = {"timeout_ms": 30000}
        if "targets" in kit.wait.props:
            args["targets"] = targets
        return kit.call(kit.wait, args)


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
