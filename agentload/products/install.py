"""Installing the agent products once, offline after that (stdlib only: ``scripts/agents.sh``
runs it with the system Python before agentload's venv exists).

The pins, packages and executables are the products' own entries (``registry.Package``:
the registry is stdlib only too). Each pinned ``name@version`` is installed into a folder of
its own under the cache
(``$AGENTLOAD_AGENTS_DIR``, default ``/var/tmp/agentload-agents``): npm packages with
``npm install --prefix``, PyPI packages into a venv of their own (mini-swe-agent and aider
bring LiteLLM, which agentload does not need). It counts as installed only after its executable
ran here and reported the pinned version; a marker file is written last, and a failed install
leaves nothing behind. One install at a time (``flock`` on ``install.lock``), each bounded by
``$AGENTLOAD_AGENTS_TIMEOUT_S`` (default 600 s).

    python -m agentload.products.install [NAME@VERSION ...]   # default: every pinned one
    python -m agentload.products.install --path NAME@VERSION  # its executable, or exit 1
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from agentload.products.registry import PRODUCTS

__all__ = ["PINS", "AgentInstallError", "Installed", "cache_dir", "find", "install", "spec_of"]

_PACKAGES = {p.name.value: p.package for p in PRODUCTS.values() if p.package is not None}
PINS: dict[str, tuple[str, ...]] = {name: pkg.pins for name, pkg in _PACKAGES.items()}
"""Each product's pinned versions (``registry.Package.pins``); the first is the one
``generate --agent`` runs."""
_MARKER = ".agentload-ok"


class AgentInstallError(Exception):
    """An agent that is not installed and could not be (one line)."""


@dataclass(frozen=True)
class Installed:
    """An installed agent: its folder (what a sandbox mounts) and its executable."""

    spec: str
    folder: Path
    exe: Path


def cache_dir() -> Path:
    return Path(os.environ.get("AGENTLOAD_AGENTS_DIR") or "/var/tmp/agentload-agents")


def spec_of(name: str) -> str:
    """``name@version`` of the version ``generate --agent name`` runs."""
    return f"{name}@{PINS[name][0]}"


def _split(spec: str) -> tuple[str, str]:
    name, _, version = spec.partition("@")
    if version not in PINS.get(name, ()):
        pinned = ", ".join(f"{n}@{v}" for n, vs in PINS.items() for v in vs)
        raise AgentInstallError(f"{spec} is not pinned here (pinned: {pinned})")
    return name, version


def _installed(spec: str) -> Installed:
    name, _ = _split(spec)
    folder = cache_dir() / spec
    return Installed(spec, folder, folder / _PACKAGES[name].exe)


def find(spec: str) -> Installed | None:
    """The installed agent, or None when it is not (yet) installed."""
    got = _installed(spec)
    return got if (got.folder / _MARKER).is_file() and got.exe.exists() else None


def _runs(got: Installed, version: str, timeout_s: float) -> bool:
    """Whether the executable runs here and reports the pinned version."""
    if got.spec.startswith("mini-swe-agent@"):
        probe = [
            str(got.exe.parent / "python"),
            "-c",
            "import minisweagent; print(minisweagent.__version__)",
        ]
    else:
        probe = [str(got.exe), "--version"]
    try:
        out = subprocess.run(probe, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and version in out.stdout


def _last_error(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    hit = next((ln for ln in lines if "err" in ln.lower()), lines[-1] if lines else "")
    return hit.strip()[:240]


def install(spec: str, progress: bool = True) -> Installed:
    """Install ``spec`` unless it is installed; ``AgentInstallError`` (one line) when it fails."""
    name, version = _split(spec)
    got = find(spec)
    if got is not None:
        return got
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        got = find(spec)  # another process may have installed it meanwhile
        if got is not None:
            return got
        return _install_locked(name, version, spec, root, progress)


def _install_steps(name: str, version: str, spec: str, folder: Path) -> list[list[str]]:
    """The commands that install ``name`` ``version`` into ``folder``: a venv and pip for a
    PyPI product, npm for the others (npm missing: one line)."""
    pkg = _PACKAGES[name]
    if pkg.source == "pypi":
        py = os.environ.get("PYTHON") or "python3"
        pip = [str(folder / "venv/bin/python"), "-m", "pip", "install", "-q"]
        return [[py, "-m", "venv", str(folder / "venv")], [*pip, f"{pkg.name}=={version}"]]
    if shutil.which("npm") is None:
        raise AgentInstallError(f"installing {spec} needs npm (apt-get install nodejs npm)")
    npm = ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"]
    return [[*npm, "--prefix", str(folder), f"{pkg.name}@{version}"]]


def _install_locked(name: str, version: str, spec: str, root: Path, progress: bool) -> Installed:
    got = _installed(spec)
    timeout = float(os.environ.get("AGENTLOAD_AGENTS_TIMEOUT_S") or 600)
    shutil.rmtree(got.folder, ignore_errors=True)
    got.folder.mkdir(parents=True)
    log = root / f"{spec}.log"
    if progress:
        print(f"agentload: installing {spec} into {got.folder} (once)", file=sys.stderr, flush=True)
    steps = _install_steps(name, version, spec, got.folder)
    try:
        with open(log, "w") as out:
            for argv in steps:
                subprocess.run(
                    argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    check=True,
                    stdin=subprocess.DEVNULL,
                )
    except subprocess.TimeoutExpired:
        shutil.rmtree(got.folder, ignore_errors=True)
        raise AgentInstallError(f"installing {spec} took over {timeout:g} s (log: {log})") from None
    except (OSError, subprocess.CalledProcessError) as exc:
        shutil.rmtree(got.folder, ignore_errors=True)
        why = _last_error(log) or str(exc)
        raise AgentInstallError(f"installing {spec} failed: {why} (log: {log})") from None
    if not _runs(got, version, 60):
        shutil.rmtree(got.folder, ignore_errors=True)
        raise AgentInstallError(
            f"{spec} installed but its executable does not run here or reports another version"
        )
    (got.folder / _MARKER).touch()
    return got


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["--path"] and len(argv) == 2:
            found = find(argv[1]) if _split(argv[1]) else None
            if found is None:
                raise AgentInstallError(
                    f"{argv[1]} is not installed in {cache_dir() / argv[1]} "
                    "(run: scripts/agents.sh install)"
                )
            print(found.exe)
            return 0
        if argv[:1] == ["--list"]:
            print("\n".join(f"{n}@{v}" for n, vs in PINS.items() for v in vs))
            return 0
        specs = argv or [f"{n}@{v}" for n, vs in PINS.items() for v in vs]
        for spec in specs:
            got = install(spec)
            print(f"{spec} {got.exe}", flush=True)
    except AgentInstallError as exc:
        print(f"agents: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
