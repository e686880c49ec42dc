"""Options declared once (``agentload.options.flags``): a config model's field is its
command-line option — name, help, default, range and choices in one place — and every command
that takes the model shows and checks it the same way."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import typer
from pydantic import BaseModel, ConfigDict, Field
from typer.testing import CliRunner

from agentload.errors import ConfigError
from agentload.generate.options import GenerateOptions
from agentload.options.cluster import ClusterOptions
from agentload.options.flags import (
    Flag,
    Switch,
    flag_of,
    given,
    option_name,
    parameters,
    validated,
)
from agentload.options.measure import MeasureOptions
from agentload.options.replay import ReplayConfig


class Toy(BaseModel):
    """A model with one option of each kind the flags support."""

    model_config = ConfigDict(extra="forbid")

    files: Annotated[list[str], Flag("Input files.", argument=True, reads=list[Path])]
    level: Annotated[int, Flag("How hard.", short="-l", aliases=("--effort",))] = Field(
        default=3, ge=1, le=9
    )
    mode: Annotated[
        Literal["fast", "slow"],
        Flag("fast or slow.", switch=Switch("--slowly", "slow", "The same as --mode slow.")),
    ] = "fast"
    wait_s: Annotated[float | None, Flag("Seconds to wait.", name="--wait")] = Field(
        default=None, gt=0
    )
    color: Annotated[bool, Flag("Do not color.", name="--no-color", invert=True)] = True
    internal: int = 0


def _app() -> tuple[typer.Typer, list[Toy]]:
    seen: list[Toy] = []

    def command(**kw: Any) -> None:
        raw = given(kw, Toy)
        raw["files"] = [str(f) for f in raw["files"]]
        seen.append(validated(Toy, raw))

    setattr(command, "__signature__", inspect.Signature(parameters(Toy)))  # noqa: B010
    app = typer.Typer()
    app.command()(command)
    return app, seen


def test_a_field_is_its_option_with_help_default_and_range() -> None:
    app, seen = _app()
    runner = CliRunner()
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for text in ("--level", "-l", "How hard.", "--wait", "Seconds to wait.", "--no-color"):
        assert text in res.output
    assert "--internal" not in res.output  # a field without a Flag is no option
    res = runner.invoke(app, ["a.txt", "b.txt", "-l", "7", "--wait", "1.5", "--no-color"])
    assert res.exit_code == 0, res.output
    assert seen[-1] == Toy(files=["a.txt", "b.txt"], level=7, wait_s=1.5, color=False)
    res = runner.invoke(app, ["a.txt"])
    assert res.exit_code == 0 and seen[-1] == Toy(files=["a.txt"])  # the model's defaults


def test_an_option_with_more_names_and_a_switch_give_the_same_field() -> None:
    """An alias is the same option (``--effort`` is ``--level``); a ``Switch`` stands for one
    value of its field's option (``--slowly`` is ``--mode slow``) and refuses another; the
    JSON Schema describes each field with its one help text."""
    app, seen = _app()
    runner = CliRunner()
    for argv in (["--effort", "5"], ["--level", "5"], ["-l", "5"]):
        res = runner.invoke(app, ["a.txt", *argv])
        assert res.exit_code == 0 and seen[-1].level == 5, (argv, res.output)
    res = runner.invoke(app, ["a.txt", "--slowly"])
    assert res.exit_code == 0 and seen[-1].mode == "slow"
    res = runner.invoke(app, ["a.txt", "--slowly", "--mode", "slow"])
    assert res.exit_code == 0 and seen[-1].mode == "slow"
    with pytest.raises(ConfigError, match=r"^--slowly is --mode slow; it contradicts --mode fast$"):
        given({"slowly": True, "mode": "fast"}, Toy)
    with pytest.raises(ConfigError, match=r"^--level/--effort 0: "):
        validated(Toy, {"files": [], "level": 0})
    props = Toy.model_json_schema()["properties"]
    assert props["level"]["description"] == "How hard." and "description" not in props["internal"]


def test_a_bad_value_names_the_option_as_written() -> None:
    with pytest.raises(ConfigError, match=r"^--level/--effort 0: Input should be greater than"):
        validated(Toy, {"files": [], "level": 0})
    with pytest.raises(ConfigError, match=r"^--wait -1\.0: Input should be greater than 0"):
        validated(Toy, {"files": [], "wait_s": -1.0})
    with pytest.raises(ConfigError, match=r"^-k 0: "):
        validated(Toy, {"files": [], "level": 0}, {"level": "-k"})
    with pytest.raises(ConfigError, match=r"^--mode 'medium': "):
        validated(Toy, {"files": [], "mode": "medium"})
    assert option_name(Toy, "files") == "FILES" and option_name(Toy, "wait_s") == "--wait"


def test_the_shared_options_are_the_same_in_replay_generate_and_eval() -> None:
    """The measurement options, the cluster's and the concurrency levels (``--concurrency``,
    ``--sweep``, ``--parallel``, ``-p``) are one declaration in both models."""
    shared = set(MeasureOptions.model_fields) | set(ClusterOptions.model_fields) | {"levels"}
    assert shared <= set(ReplayConfig.model_fields) and shared <= set(GenerateOptions.model_fields)
    for name in shared:
        assert repr(ReplayConfig.model_fields[name]) == repr(GenerateOptions.model_fields[name])
        flag = flag_of(ReplayConfig.model_fields[name])
        assert flag is not None and option_name(ReplayConfig, name) == option_name(
            GenerateOptions, name
        )


@pytest.mark.parametrize(
    ("command", "model"),
    [(["replay"], ReplayConfig), (["generate"], GenerateOptions), (["eval"], GenerateOptions)],
)
def test_every_flagged_field_is_in_the_commands_help(
    command: list[str], model: type[BaseModel]
) -> None:
    from agentload.cli import app

    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    for name, field in model.model_fields.items():
        flag = flag_of(field)
        if flag is None or flag.argument or (command == ["eval"] and name == "evaluate"):
            continue
        names = [option_name(model, name).split("/")[0], *flag.aliases]
        names += [flag.switch.name] if flag.switch is not None else []
        assert all(n in res.output for n in names), name
