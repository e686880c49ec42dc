"""``agentload sandbox build|cleanup``."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

__all__ = ["register"]

sandbox_app = typer.Typer(
    help="Docker sandboxes: the offline image and leftovers.", no_args_is_help=True
)


@sandbox_app.command("build")
def build_cmd(
    tag: str = typer.Option(
        None, "--tag", help="image tag (default: agentload-sandbox:py<host python version>)"
    ),
) -> None:
    """Build the offline sandbox image from the host's Python (no registry needed)."""
    from agentload.sandboxes.docker_host import connect_docker
    from agentload.sandboxes.image import build_image, check_image_tag

    if tag is not None:
        check_image_tag(tag)
    client = connect_docker()
    tty = sys.stderr.isatty()

    def progress(msg: str) -> None:
        if tty:
            sys.stderr.write(f"\r\033[K{msg}")
        else:
            sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    info = build_image(client, tag, progress)
    if tty:
        sys.stderr.write("\n")
    typer.echo(f"{info.tag}  (host mounts, read-only: {', '.join(info.mounts)})")


@sandbox_app.command("cleanup")
def cleanup_cmd(
    include_live: bool = typer.Option(
        False, "--all", help="also remove containers of agentload processes still running"
    ),
) -> None:
    """Remove what a crashed (kill -9) agentload process left behind: its sandbox containers and
    its temp directories (workspaces, local sandbox homes)."""
    from agentload.errors import DockerUnavailableError
    from agentload.sandboxes.cleanup import cleanup
    from agentload.sandboxes.docker_host import connect_docker
    from agentload.sandboxes.tempdirs import cleanup_dirs

    dirs = cleanup_dirs()  # never a live process's, --all or not
    for path in dirs.removed:
        typer.echo(f"removed {path}")
    try:
        client = connect_docker()
    except DockerUnavailableError as exc:
        typer.echo(f"containers not checked: {exc}")
    else:
        report = cleanup(client, include_live=include_live)
        for cid in report.removed:
            typer.echo(f"removed {cid}")
        typer.echo(
            f"{len(report.removed)} container(s) removed"
            + (
                f"; {len(report.kept_live)} kept (their agentload process is running)"
                if report.kept_live
                else ""
            )
        )
    parts = [f"{len(dirs.removed)} temp dir(s) removed"]
    if dirs.kept_live:
        parts.append(f"{len(dirs.kept_live)} kept (their agentload process is running)")
    if dirs.kept_unknown:
        parts.append(f"{len(dirs.kept_unknown)} kept (owner unknown: {_names(dirs.kept_unknown)})")
    typer.echo("; ".join(parts))


def _names(paths: list[Path]) -> str:
    shown = ", ".join(str(p) for p in paths[:3])
    return shown + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def register(app: typer.Typer) -> None:
    """Add ``sandbox`` to the ``agentload`` command."""
    app.add_typer(sandbox_app, name="sandbox")
