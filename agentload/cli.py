"""The ``agentload`` command. Each area registers its own commands (``register(app)``):

* ``trace validate|stats|inspect``  — agentload.trace.cli
* ``serve``                          — agentload.endpoint.server.cli
* ``scenarios list|show|tasks``      — agentload.scenarios.cli (``tasks``: agentload.evals.cli)
* ``sandbox build|cleanup``          — agentload.sandboxes.cli
* ``generate``, ``eval``             — agentload.generate.cli
* ``replay``, ``report``, ``compare``  — agentload.replay.cli (``compare`` reads eval.json too)
* ``realism``                        — agentload.realism.cli

Any ``AgentloadError`` and any usage error (an unknown option, a value of the wrong type)
becomes one line on stderr and exit code 2; anything else is a bug and shows a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TextIO, cast

import typer

from agentload import __version__
from agentload.errors import AgentloadError, OutputStreamError
from agentload.errortext import ONE_LINE_CHARS, clip, one_line
from agentload.masking import MaskedStream, mask_text, remember_urls_in

__all__ = ["ONE_LINE_CHARS", "app", "main", "one_line"]

# typer >= 0.2x carries its own fork of click (``typer._click``) and no longer depends on click:
# its usage errors derive from ``typer.TyperException``. Older typer re-exports click's.
try:
    from typer import TyperException as _UsageError
except ImportError:  # pragma: no cover - typer built on click
    from click import ClickException as _UsageError  # type: ignore[assignment]

app = typer.Typer(
    name="agentload",
    help="Make agentic LLM traffic real, record it, and replay it against inference servers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_AREAS = (
    "agentload.trace.cli",
    "agentload.interop.cli",
    "agentload.endpoint.server.cli",
    "agentload.record.cli",
    "agentload.scenarios.cli",
    "agentload.sandboxes.cli",
    "agentload.generate.cli",
    "agentload.replay.cli",
    "agentload.realism.cli",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"agentload {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """agentload: generate, record and replay agentic LLM traffic."""


for _mod in _AREAS:
    try:
        _area = importlib.import_module(_mod)
    except ModuleNotFoundError as _exc:
        if _exc.name != _mod:
            raise
        continue
    _area.register(app)


def _usage_line(exc: Exception) -> str:
    """A usage error as one line: the command, what is wrong, where help is."""
    fmt = getattr(exc, "format_message", None)
    message = " ".join(str(fmt() if callable(fmt) else exc).split())
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", "") or "agentload"
    return f"{path}: {message} (see '{path} --help')"


_OPTIONAL_VALUE = {"--ray": "local"}
"""Options whose value may be left out (``--ray`` alone: a local Ray instance)."""


def optional_values(argv: list[str]) -> list[str]:
    """``argv`` with the value of each ``_OPTIONAL_VALUE`` option that was given bare (last,
    or followed by another option) filled in: typer has no options with optional values."""
    out: list[str] = []
    for k, arg in enumerate(argv):
        out.append(arg)
        if arg == "--":
            out += argv[k + 1 :]
            break
        nxt = argv[k + 1] if k + 1 < len(argv) else None
        if arg in _OPTIONAL_VALUE and (nxt is None or nxt.startswith("-")):
            out.append(_OPTIONAL_VALUE[arg])
    return out


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, mapping user errors to one line and exit code 2."""
    command = typer.main.get_command(app)
    args = optional_values(sys.argv[1:] if argv is None else argv)
    for arg in args:  # a URL's credentials are masked in every line and record from now on
        remember_urls_in(arg)
    with masked_output():
        _run(command.main, args)


@contextlib.contextmanager
def masked_output() -> Iterator[None]:
    """stdout and stderr masked (``agentload.masking``) while the command runs."""
    shown = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, MaskedStream(shown[0], "stdout"))
    sys.stderr = cast(TextIO, MaskedStream(shown[1], "stderr"))
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = shown


def _run(run: Callable[..., object], args: list[str]) -> None:
    try:
        rv = run(args=args, prog_name="agentload", standalone_mode=False)
    except AgentloadError as exc:
        if isinstance(exc, OutputStreamError):
            _quiet_stdout()
        with contextlib.suppress(Exception):  # stderr itself may be what failed
            print(f"agentload: error: {one_line(mask_text(str(exc)))}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:  # the reader of stdout went away (``| head``): as any tool does
        _quiet_stdout()
        sys.exit(141)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:  # a bug of ours: the traceback says where
            raise
        name = clip(str(exc.filename or ""), 120)
        print(
            f"agentload: error: {mask_text(name)}: file name too long (a name in a path has "
            "at most 255 bytes)",
            file=sys.stderr,
        )
        sys.exit(2)
    except typer.Abort:
        print("agentload: aborted", file=sys.stderr)
        sys.exit(130)
    except _UsageError as exc:  # bad options or arguments: one line, pointing at --help
        print(f"agentload: error: {one_line(mask_text(_usage_line(exc)))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("agentload: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


def _quiet_stdout() -> None:
    """stdout pointed at ``/dev/null`` once it failed, so that nothing left in its buffer
    fails again at exit (a second message, a traceback)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)


if __name__ == "__main__":
    main()
