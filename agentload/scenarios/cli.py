"""``agentload scenarios list|show|tasks`` (``tasks``: ``evals.cli``)."""

from __future__ import annotations

from typing import Annotated

import typer

from agentload.evals.cli import tasks_cmd
from agentload.scenarios.loader import dump_scenario, list_scenarios, load_scenario, preset_path
from agentload.scenarios.workspace import list_faults

__all__ = ["register"]

scenarios_app = typer.Typer(
    help="Scenario presets: what a generated session does.", no_args_is_help=True
)


@scenarios_app.command("list")
def list_cmd() -> None:
    """List the shipped scenario presets (and the workspace faults they can inject: one per
    eval task, `agentload scenarios tasks`)."""
    for name in list_scenarios():
        s = load_scenario(str(preset_path(name)))
        typer.echo(f"{name:<16} {s.description}")
    typer.echo("\nworkspace faults (workspace.fault):")
    for f in list_faults():
        typer.echo(f"  {f.name:<22} {f.path}: {f.description}")


@scenarios_app.command("show")
def show_cmd(
    name: str = typer.Argument("coding-session", help="preset name or path to a YAML file"),
    config: Annotated[
        list[str] | None,
        typer.Option("-c", "--config", help="override a field: -c key.path=value (repeatable)"),
    ] = None,
) -> None:
    """Print the fully resolved scenario as YAML (presets, `extends:` and -c overrides applied)."""
    typer.echo(dump_scenario(load_scenario(name, config or ())), nl=False)


scenarios_app.command("tasks")(tasks_cmd)


def register(app: typer.Typer) -> None:
    """Add ``scenarios`` to the ``agentload`` command."""
    app.add_typer(scenarios_app, name="scenarios")
