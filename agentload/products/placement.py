"""Where a product's program lives, as its sandbox sees it: checked before any session starts.

A named product runs its installed executable; ``cmd:`` runs a shell command line whose first
program is found the way the sandbox's shell would find it. ``place`` checks that this program
(and the interpreter its ``#!`` line names: ``node`` for ``#!/usr/bin/env node``) can run in the
chosen sandbox (``sandboxes.choice``) and says what the sandbox needs for it:

* **mounts**: a Docker sandbox sees only the host folders of its image (``/usr``, the Python
  prefix ...); a program elsewhere on the host is mounted read-only at its own path, the way an
  installed product's folder is: the install folder for anything under the agents' cache
  (``/var/tmp/agentload-agents/NAME@VERSION``), the ``node_modules`` folder of a Node package's
  ``.bin`` entry, the prefix of a ``bin`` folder (a venv, ``~/.local``, a Node install), else
  the program's own folder. The confined local sandbox sees the whole host read-only but for
  its private ``/tmp``, ``/var/tmp`` (``SandboxChoice.hidden``): a program there is mounted the
  same way. A folder that would expose too much (``/`` or a folder just under
  it, the home folder) is refused instead, and so is a program the sandbox's user cannot reach
  (when agentload runs as root that user is ``nobody``: every folder on the way must be open to
  others).
* **path**: a bare name found on the host's ``PATH`` but not on the sandbox's (its ``PATH`` is the
  system's, not the user's) has its folder put first on the sandbox's ``PATH``.

What cannot run there is one ``ConfigError`` line (exit 2) that names the program and the fix,
before the run contacts anything. A command line that starts with shell syntax (a variable, a
subshell, ``cd x &&``) or a path relative to the workspace is left to the shell.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agentload.errors import ConfigError
from agentload.errortext import clip
from agentload.products.install import cache_dir
from agentload.products.registry import Product
from agentload.sandboxes.choice import SandboxChoice

__all__ = ["Placement", "place"]

_WRAPPERS = {"exec", "nohup", "command", "env"}
"""Words that run the next word (``env``'s assignments and options are skipped too)."""
_SHELL = set("$`()|&;<>{}*?[]!~") | {"\\"}
_BUILTINS = frozenset(
    {
        ".",
        ":",
        "!",
        "{",
        "[",
        "alias",
        "break",
        "case",
        "cd",
        "continue",
        "do",
        "done",
        "echo",
        "eval",
        "exit",
        "export",
        "false",
        "for",
        "if",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "source",
        "test",
        "then",
        "time",
        "times",
        "trap",
        "true",
        "umask",
        "unset",
        "until",
        "wait",
        "while",
    }
)
"""Shell keywords and built-ins: a command line that starts with one is left to the shell."""
_HEAD_BYTES = 256


@dataclass
class Placement:
    """What the sandbox needs for the program: host folders to mount read-only at their own
    paths (Docker), folders to put first on ``PATH``."""

    mounts: list[str] = field(default_factory=list)
    path: list[str] = field(default_factory=list)

    def env(self, choice: SandboxChoice) -> dict[str, str]:
        """The ``PATH`` the program starts with (none to add: no change)."""
        if not self.path or choice.path is None:
            return {}
        return {"PATH": ":".join(dict.fromkeys([*self.path, *choice.path]))}


def place(product: Product, exe: Path | None, choice: SandboxChoice) -> Placement:
    """What ``choice``'s sandbox needs to run ``product`` (its installed ``exe``, or its ``cmd:``
    command line's first program); one ``ConfigError`` line when it cannot run there."""
    return _Placer(product.label, choice).run(exe, product.command)


class _Placer:
    def __init__(self, label: str, choice: SandboxChoice) -> None:
        self.label, self.choice = label, choice
        self.out = Placement()

    def refuse(self, what: str) -> ConfigError:
        """The one line: what cannot run (and the fix, where there is one)."""
        return ConfigError(f"--agent {clip(self.label, 100)!r}: {what}")

    def run(self, exe: Path | None, command: str) -> Placement:
        if exe is not None:
            self.program(exe)
            return self.out
        name = _first_program(command)
        if name is None or (not name.startswith("/") and "/" in name):
            return self.out  # shell syntax, or a path in the workspace: the shell's business
        if name.startswith("/"):
            self.program(Path(name))
        else:
            self.bare(name, f"`{name}`")
        return self.out

    def program(self, path: Path) -> None:
        """An absolute program path: it must exist on the host (as the sandbox sees the host's
        files), be executable, and its interpreter must run too."""
        if not path.exists():
            if self.choice.path is None:  # an image of the user's may hold it
                return
            raise self.refuse(f"{path} does not exist on this host")
        if not path.is_file() or not os.access(path, os.X_OK):
            raise self.refuse(f"{path} is not an executable file")
        self.see(path)
        self.interpreter(path)

    def bare(self, name: str, what: str) -> None:
        """A program named without a folder: on the sandbox's PATH, else on the host's."""
        inside = self.choice.path
        if inside is None:
            return
        found = shutil.which(name, path=os.pathsep.join([*self.out.path, *inside]))
        if found is None:
            found = shutil.which(name, path=os.environ.get("PATH", os.defpath))
            if found is None:
                where = "the Docker" if self.choice.kind == "docker" else "the local"
                raise self.refuse(
                    f"{what} is found neither on this host's PATH nor on {where} sandbox's "
                    f"({':'.join(inside)})"
                )
            self.out.path.append(str(Path(found).parent))
        self.see(Path(found))
        self.interpreter(Path(found))

    def interpreter(self, path: Path) -> None:
        """The program's ``#!`` interpreter, found as the kernel (or ``env``) would."""
        try:
            with path.open("rb") as fh:
                head = fh.read(_HEAD_BYTES)
        except OSError:
            return
        if not head.startswith(b"#!"):
            return
        words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
        if not words:
            return
        if Path(words[0]).name == "env":
            rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
            if rest:
                self.bare(rest[0], f"its interpreter `{rest[0]}` (#!{' '.join(words)})")
            return
        interp = Path(words[0])
        if not interp.exists():
            raise self.refuse(f"its interpreter {interp} (#!) does not exist on this host")
        self.see(interp)

    def where(self) -> tuple[str, str]:
        """The sandbox's name in a refusal, and the other sandbox to try."""
        if self.choice.kind == "docker":
            return "the Docker sandbox", ", or use --sandbox local"
        return "the confined local sandbox", ", or use --sandbox docker"

    def see(self, path: Path) -> None:
        """Mount what the sandbox needs to see ``path`` (and what it links to)."""
        if self.choice.sees(path):
            return
        for p in dict.fromkeys([Path(os.path.abspath(path)), Path(os.path.realpath(path))]):
            if self.choice.sees(p):
                continue
            folder = _folder_of(p)
            home = Path(os.path.expanduser("~"))
            where, other = self.where()
            if len(folder.parts) < 3 or folder == home or folder in home.parents:
                raise self.refuse(
                    f"{path} is not in {where}, and mounting {folder} would expose "
                    "too much of the host: install it in a folder of its own (e.g. /opt/NAME)"
                    f"{other}"
                )
            closed = _closed_to_others(p) if os.geteuid() == 0 else None
            if closed is not None:  # as root, the sandbox's user is nobody
                raise self.refuse(
                    f"{path}: {where}'s user (nobody) cannot reach it ({closed} is not "
                    f"open to others: chmod o+rx it){other}"
                )
            if str(folder) not in self.out.mounts:
                self.out.mounts.append(str(folder))


def _folder_of(path: Path) -> Path:
    """The host folder to mount so that ``path`` runs (see the module docstring)."""
    cache = Path(os.path.realpath(cache_dir()))
    real = Path(os.path.realpath(path.parent)) / path.name
    if cache in real.parents:
        return cache / real.relative_to(cache).parts[0]
    parts = path.parts
    if "node_modules" in parts:
        return Path(*parts[: parts.index("node_modules") + 1])
    if path.parent.name == "bin" and len(parts) > 3:
        return path.parent.parent
    return path.parent


def _closed_to_others(path: Path) -> Path | None:
    """The first of ``path``'s folders that others cannot enter, or ``path`` itself when they
    cannot read and run it; None when it is open to them."""
    for p in [*reversed(path.parents), path]:
        want = 0o005 if p == path else 0o001
        try:
            if p.stat().st_mode & want != want:
                return p
        except OSError:
            return p
    return None


def _first_program(command: str) -> str | None:
    """The program a shell command line starts with; None when shell syntax comes first."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words:
        return None
    i = 0
    while i < len(words):
        word = words[i]
        assignment = "=" in word and word.split("=", 1)[0].isidentifier()
        env_option = word.startswith("-") and i > 0 and words[i - 1] == "env"
        if not (assignment or env_option or word in _WRAPPERS):
            break
        i += 1
    if i == len(words) or words[i] in _BUILTINS or any(c in _SHELL for c in words[i]):
        return None
    return words[i]
