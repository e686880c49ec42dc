"""Options declared once: a config model's field carries its command-line option.

A field becomes an option by a ``Flag`` in its annotation; its name, help, range and choices
are then written once, in the field, and every command that takes the model gets the same
option::

    gpus: Annotated[int | None, Flag("GPUs behind the endpoint.")] = Field(None, ge=1)

* ``parameters(Model)`` — the keyword-only parameters a typer command declares for the
  model's flagged fields, in field order: ``--gpus`` (or the flag's ``name``), its ``short``
  name, help, metavar, the type the command line gives (``reads``: the text form of a field
  checked by the model, e.g. ``--slo ttft=2s``), ``show_default`` from the field's default.
  Every option but a switch defaults to None on the command line, so a command knows what was
  given and the model's default applies to what was not.
* ``given(kw)`` — the options given (None dropped), the raw input of ``validated``.
* ``validated(Model, raw)`` — the model, or one ``ConfigError`` line that names the option as
  the user wrote it and the value: ``--sweep '1,x': write the concurrency levels as ...``.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import typer
from pydantic import BaseModel, GetJsonSchemaHandler, ValidationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from agentload.errors import ConfigError

__all__ = ["Flag", "Switch", "flag_of", "given", "option_name", "parameters", "validated"]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Flag:
    """How a config field is given on the command line."""

    help: str
    """The option's help, the field's one text: ``--help`` shows it, and results.json's JSON
    Schema describes the field with it."""
    name: str | None = None
    """The option, when not ``--`` + the field's name with dashes (``--duration``)."""
    short: str | None = None
    """A short name (``-n``)."""
    metavar: str | None = None
    """How ``--help`` shows the value."""
    reads: Any = None
    """The type the command line gives, when not the field's own (a text the model parses)."""
    invert: bool = False
    """A switch that sets the field to False (``--no-extras``)."""
    argument: bool = False
    """A positional argument (``TRACES``) instead of an option."""
    show_default: bool = True
    """Show the field's default in ``--help``."""
    default: Any = None
    """The command line's default where the model has none (a preset's name); None: the
    model's default applies to an option not given."""
    aliases: tuple[str, ...] = ()
    """More names of the same option (``--sweep`` and ``--parallel`` for ``--concurrency``)."""
    switch: Switch | None = None
    """A switch that gives the field one value (``--no-salt``: ``--salt-at off``)."""

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The field's description in a JSON Schema (results.json's) is its help: one text."""
        out = handler(schema)
        out.setdefault("description", self.help)
        return out


@dataclass(frozen=True)
class Switch:
    """A switch that stands for one value of a field's option."""

    name: str
    """The switch (``--no-salt``); its parameter is the name without dashes (``no_salt``)."""
    value: Any
    """The field's value it gives."""
    help: str

    @property
    def parameter(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


def flag_of(field: FieldInfo) -> Flag | None:
    """The field's ``Flag`` (None: not an option)."""
    return next((m for m in field.metadata if isinstance(m, Flag)), None)


def option_name(model: type[BaseModel], name: str) -> str:
    """How the command line spells field ``name`` of ``model`` (``--duration``, ``TRACES``; an
    option with more names, all its long ones: ``--concurrency/--sweep/--parallel``)."""
    field = model.model_fields.get(name)
    flag = flag_of(field) if field is not None else None
    if flag is not None and flag.argument:
        return name.upper()
    more = [a for a in flag.aliases if a.startswith("--")] if flag is not None else []
    return "/".join([option_name_for(name, flag), *more])


def _cli_type(field: FieldInfo, flag: Flag) -> Any:
    """The type typer parses: the flag's ``reads``, else the field's, a ``Literal`` as text."""
    if flag.reads is not None:
        return flag.reads
    ann = field.annotation
    args = typing.get_args(ann)
    if typing.get_origin(ann) is Literal:
        return str
    if _is_union(ann) and any(typing.get_origin(a) is Literal for a in args):
        return str | None
    return ann


def _cli_default(field: FieldInfo, flag: Flag) -> Any:
    """The option's default on the command line: the flag's, else the field's when it is one
    plain value ``--help`` can show (a number, a word, a path), else None (not given: the
    model's default applies)."""
    if flag.default is not None:
        return flag.default
    value = field.default
    plain = isinstance(value, int | float | str | Path) and not isinstance(value, bool)
    shown = flag.show_default and flag.switch is None  # a switch must see it not given
    return value if plain and shown else None


def _parameter(name: str, field: FieldInfo, flag: Flag) -> inspect.Parameter:
    kind = inspect.Parameter.KEYWORD_ONLY
    if flag.argument:
        default = ... if field.is_required() else None
        arg = typer.Argument(default, help=flag.help, show_default=False)
        positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Parameter(name, positional, default=arg, annotation=_cli_type(field, flag))
    names = [option_name_for(name, flag), *flag.aliases] + ([flag.short] if flag.short else [])
    if flag.invert or field.annotation is bool:
        opt = typer.Option(False, *names, help=flag.help)
        return inspect.Parameter(name, kind, default=opt, annotation=bool)
    default = ... if field.is_required() and flag.default is None else _cli_default(field, flag)
    opt = typer.Option(default, *names, help=flag.help, metavar=flag.metavar)
    annotation = _cli_type(field, flag)
    if not _optional(annotation):
        annotation = annotation | None
    return inspect.Parameter(name, kind, default=opt, annotation=annotation)


def option_name_for(name: str, flag: Flag | None) -> str:
    """The option of a field called ``name`` with ``flag``: its ``name``, else ``--`` + the
    field's name with dashes."""
    return (flag.name if flag is not None else None) or "--" + name.replace("_", "-")


def _is_union(annotation: Any) -> bool:
    """``X | Y`` or ``Optional[X]`` (a ``Literal`` in a union is a ``typing.Union``)."""
    return isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union


def _optional(annotation: Any) -> bool:
    return _is_union(annotation) and type(None) in typing.get_args(annotation)


def parameters(
    model: type[BaseModel], *, skip: tuple[str, ...] = (), own_first: bool = False
) -> list[inspect.Parameter]:
    """The command parameters of ``model``'s flagged fields, in field order (see the module
    docstring); ``skip``: fields a command leaves out; ``own_first``: the model's own fields
    before those of the groups it extends."""
    names = list(model.model_fields)
    if own_first:
        inherited = {n for base in model.__mro__[1:] for n in getattr(base, "model_fields", {})}
        names.sort(key=lambda n: n in inherited)
    arguments = [n for n in names if (f := flag_of(model.model_fields[n])) and f.argument]
    names = arguments + [n for n in names if n not in arguments]  # a signature's order
    out = []
    for name in names:
        field = model.model_fields[name]
        flag = flag_of(field)
        if flag is not None and name not in skip:
            out.append(_parameter(name, field, flag))
            if flag.switch is not None:
                out.append(_switch_parameter(flag.switch))
    return out


def _switch_parameter(switch: Switch) -> inspect.Parameter:
    opt = typer.Option(False, switch.name, help=switch.help)
    kind = inspect.Parameter.KEYWORD_ONLY
    return inspect.Parameter(switch.parameter, kind, default=opt, annotation=bool)


def given(kw: Mapping[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """The options of ``model`` given in ``kw``: without None values and switches left off, an
    inverted switch (``--no-extras``) as the field's False, a field's ``Switch`` as its value
    (one ``ConfigError`` line when the field's option says otherwise)."""
    out: dict[str, Any] = {}
    for name, value in kw.items():
        field = model.model_fields.get(name)
        if field is None or value is None or value is False:
            continue
        flag = flag_of(field)
        out[name] = False if flag is not None and flag.invert else value
    for name, field in model.model_fields.items():
        flag = flag_of(field)
        switch = flag.switch if flag is not None else None
        if switch is None or not kw.get(switch.parameter):
            continue
        if name in out and out[name] != switch.value:
            option = option_name_for(name, flag)
            raise ConfigError(
                f"{switch.name} is {option} {switch.value}; it contradicts {option} {out[name]}"
            )
        out[name] = switch.value
    return out


def validated(model: type[M], raw: Mapping[str, Any], names: Mapping[str, str] | None = None) -> M:
    """``model`` from ``raw`` (field → value); a failed check is one ``ConfigError`` naming the
    option (``names`` overrides how a field or input key is named: ``levels`` → ``--sweep``)
    and the value as given; a check across options raises its own message."""
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc, msg = err["loc"], err["msg"]
        if not loc:  # a check across options: its message names them
            raise ConfigError(msg) from None
        field = str(loc[0])
        option = (names or {}).get(field) or option_name(model, field)
        value = raw.get(field)
        if isinstance(value, list) and len(loc) > 1 and isinstance(loc[1], int):
            value = value[loc[1]]  # one repeated value (or the one --concurrency)
        shown = repr(value) if isinstance(value, str) else str(value)
        raise ConfigError(f"{option} {shown}: {msg}") from None
