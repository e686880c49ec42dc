"""``agentload sandbox build|cleanup``."""

from __future__ import annotations

import sys

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
    from agentload.sandboxes.image import build_image

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
    """Remove sandbox containers that a crashed agentload process left behind."""
    from agentload.sandboxes.cleanup import cleanup
    from agentload.sandboxes.docker_host import connect_docker

    report = cleanup(connect_docker(), include_live=include_live)
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


def register(app: typer.Typer) -> None:
    """Add ``sandbox`` to the ``agentload`` command."""
    app.add_typer(sandbox_app, name="sandbox")
