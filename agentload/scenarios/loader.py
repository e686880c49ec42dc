"""Load scenarios: shipped presets or user YAML files, ``extends:`` chains, ``-c`` overrides.

Validation errors become one :class:`ScenarioError` line naming where the bad value came from::

    my.yaml:14: orchestrator.max_rounds: Input should be a valid integer
    -c sandbox.cpus=lots: sandbox.cpus: Input should be a valid number

The line is found by walking the YAML node tree (``yaml.compose``) along the error's field path.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agentload.errors import ScenarioError
from agentload.hashing import content_id
from agentload.infile import BoundedLoader, load_bounded, read_bytes, safe_load
from agentload.scenarios.models import Scenario

__all__ = [
    "DEFAULT_SCENARIO",
    "dump_scenario",
    "list_scenarios",
    "load_scenario",
    "preset_path",
    "scenario_hash",
]

DEFAULT_SCENARIO = "coding-session"
_PRESETS = "presets"
_MAX_INT = 2**53
"""No scenario number is larger: past this, JSON readers lose precision and limits mean nothing."""


@dataclass
class _Source:
    """One YAML document that contributed to the merged scenario."""

    label: str
    data: dict[str, Any]
    node: yaml.Node | None


def _preset_dir() -> Path:
    return Path(str(resources.files("agentload.scenarios").joinpath(_PRESETS)))


def list_scenarios() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in _preset_dir().glob("*.yaml"))


def preset_path(name: str) -> Path:
    """The file of preset ``name``; ``ScenarioError`` listing the valid names if unknown."""
    p = _preset_dir() / f"{name}.yaml"
    if not p.is_file():
        raise ScenarioError(
            f"unknown scenario {name!r}: not a preset ({', '.join(list_scenarios())}) "
            "and not a YAML file"
        )
    return p


def _resolve(name_or_path: str, relative_to: Path | None) -> Path:
    candidate = Path(name_or_path).expanduser()
    if relative_to is not None and not candidate.is_absolute():
        rel = relative_to / candidate
        if rel.is_file():
            return rel
    if candidate.is_file():
        return candidate
    if candidate.suffix in (".yaml", ".yml") or "/" in name_or_path:
        raise ScenarioError(f"scenario file not found: {name_or_path}")
    return preset_path(name_or_path)


def _label(path: Path) -> str:
    try:
        if path.parent.resolve() == _preset_dir().resolve():
            return f"agentload/scenarios/{_PRESETS}/{path.name}"
        return str(path)
    except OSError:  # pragma: no cover - unreadable cwd
        return str(path)


def _read(path: Path) -> _Source:
    label = _label(path)
    try:
        text = read_bytes(path, label=label, error=ScenarioError).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{label}: not a YAML text file (byte {exc.start} is not UTF-8)"
        ) from None
    try:
        node, data = load_bounded(text, label, ScenarioError, _loader(path.parent, label))
    except RecursionError:
        raise ScenarioError(f"{label}: invalid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{label}:{mark.line + 1}" if mark is not None else label
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(f"{where}: invalid YAML: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{label}:1: a scenario must be a YAML mapping")
    return _Source(label, data, node)


def _loader(folder: Path, label: str) -> type[BoundedLoader]:
    """A SafeLoader that also reads ``!include FILE`` (or ``!include [FILE, ...]``, joined by a
    blank line): the text of files next to the scenario (``folder``), so long prompts and tool
    manuals live in their own files. A file that cannot be read is one ScenarioError line."""

    class _Loader(BoundedLoader):
        pass

    def include(loader: yaml.SafeLoader, node: yaml.Node) -> str:
        if isinstance(node, yaml.ScalarNode):
            names = [loader.construct_scalar(node)]
        elif isinstance(node, yaml.SequenceNode):
            names = [loader.construct_object(n) for n in node.value]
        else:
            names = []
        where = f"{label}:{node.start_mark.line + 1}"
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ScenarioError(f"{where}: !include takes a file name or a list of file names")
        texts = []
        for name in names:
            target = (folder / str(name)).resolve()
            raw = read_bytes(target, label=f"{where}: !include {name}", error=ScenarioError)
            try:
                texts.append(raw.decode("utf-8").strip())
            except UnicodeDecodeError:
                raise ScenarioError(
                    f"{where}: !include {name}: cannot read: not UTF-8 text"
                ) from None
        return "\n\n".join(texts) + "\n"

    _Loader.add_constructor("!include", include)
    return _Loader


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _load_chain(name_or_path: str) -> list[_Source]:
    """The file and the files it ``extends``, most specific first."""
    chain: list[_Source] = []
    seen: set[Path] = set()
    path = _resolve(name_or_path, None)
    while True:
        real = path.resolve()
        if real in seen:
            raise ScenarioError(f"{_label(path)}: `extends` loops back to {path.name}")
        seen.add(real)
        src = _read(path)
        chain.append(src)
        parent = src.data.pop("extends", None)
        if parent is None:
            return chain
        if not isinstance(parent, str):
            line = _line_of(src.node, ("extends",))
            raise ScenarioError(f"{src.label}:{line}: extends: must be a scenario name or path")
        path = _resolve(parent, path.parent)


def _parse_override(text: str) -> tuple[list[str], Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip() or any(not p for p in key.strip().split(".")):
        raise ScenarioError(f"-c {text}: expected key.path=value")
    try:
        value = safe_load(raw, f"-c {text[:80]!r}", ScenarioError) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    except RecursionError:
        raise ScenarioError(f"-c {text}: the value is nested too deeply") from None
    return key.strip().split("."), value


def _apply_override(data: dict[str, Any], keys: list[str], value: Any, text: str) -> None:
    cur = data
    for i, k in enumerate(keys[:-1]):
        nxt = cur.setdefault(k, {})
        if not isinstance(nxt, dict):
            raise ScenarioError(f"-c {text}: {'.'.join(keys[: i + 1])} is not a mapping")
        cur = nxt
    cur[keys[-1]] = value


def _line_of(node: yaml.Node | None, loc: Sequence[str | int]) -> int:
    """1-based line of the deepest node along ``loc`` (the file's first line if none)."""
    best = node.start_mark.line + 1 if node is not None else 1
    cur = node
    for part in loc:
        nxt: yaml.Node | None = None
        if isinstance(cur, yaml.MappingNode):
            for k, v in cur.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(part):
                    best = k.start_mark.line + 1
                    nxt = v
                    break
        elif isinstance(cur, yaml.SequenceNode) and isinstance(part, int) and part < len(cur.value):
            nxt = cur.value[part]
            best = nxt.start_mark.line + 1
        if nxt is None:
            break
        cur = nxt
    return best


def _depth_in(node: yaml.Node | None, loc: Sequence[str | int]) -> int:
    cur, depth = node, 0
    for part in loc:
        nxt: yaml.Node | None = None
        if isinstance(cur, yaml.MappingNode):
            nxt = next(
                (
                    v
                    for k, v in cur.value
                    if isinstance(k, yaml.ScalarNode) and k.value == str(part)
                ),
                None,
            )
        elif isinstance(cur, yaml.SequenceNode) and isinstance(part, int) and part < len(cur.value):
            nxt = cur.value[part]
        if nxt is None:
            break
        cur, depth = nxt, depth + 1
    return depth


def _where(
    loc: tuple[str | int, ...], chain: list[_Source], overrides: list[tuple[list[str], str]]
) -> str:
    best = max(chain, key=lambda s: _depth_in(s.node, loc))  # ties: the most specific file
    in_files = _depth_in(best.node, loc)
    str_loc = [str(x) for x in loc]
    for keys, text in reversed(overrides):
        common = 0
        for a, b in zip(keys, str_loc, strict=False):
            if a != b:
                break
            common += 1
        # the override set this value, or created the path the error is in
        if common and (common == min(len(keys), len(loc)) or common > in_files):
            return f"-c {text}"
    return f"{best.label}:{_line_of(best.node, loc)}"


def _error(exc: ValidationError, chain: list[_Source], ovr: list[tuple[list[str], str]]) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    field = ".".join(str(p) for p in loc) or "scenario"
    msg = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown field (check the spelling; `agentload scenarios show` lists the fields)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{_where(loc, chain, ovr)}: {field}: {msg}{more}"


def _numbers(
    value: Any, loc: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every int and float in the merged data, with its field path."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, (*loc, str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, (*loc, i))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield loc, value


def _check_numbers(
    data: dict[str, Any], chain: list[_Source], ovr: list[tuple[list[str], str]]
) -> None:
    """``ScenarioError`` for a number no field can mean: infinite, NaN, or beyond 2**53."""
    for loc, v in _numbers(data):
        field = ".".join(str(p) for p in loc)
        if isinstance(v, float) and not math.isfinite(v):
            raise ScenarioError(f"{_where(loc, chain, ovr)}: {field}: must be a finite number")
        if abs(v) > _MAX_INT:
            shown = f"{v:.3g}" if isinstance(v, float) else f"a {len(str(abs(v)))}-digit number"
            raise ScenarioError(
                f"{_where(loc, chain, ovr)}: {field}: {shown} is too large (at most 2**53)"
            )


def load_scenario(name_or_path: str = DEFAULT_SCENARIO, overrides: Sequence[str] = ()) -> Scenario:
    """A preset name or a YAML path, merged over what it ``extends``, with ``-c`` overrides."""
    chain = _load_chain(name_or_path)
    merged: dict[str, Any] = {}
    for src in reversed(chain):
        merged = _merge(merged, src.data)
    parsed: list[tuple[list[str], str]] = []
    for text in overrides:
        keys, value = _parse_override(text)
        _apply_override(merged, keys, value, text)
        parsed.append((keys, text))
    _check_numbers(merged, chain, parsed)
    try:
        return Scenario.model_validate(merged)
    except ValidationError as exc:
        raise ScenarioError(_error(exc, chain, parsed)) from None


def scenario_hash(scenario: Scenario) -> str:
    """Content hash of the fully resolved scenario (32 hex chars; same config, same hash)."""
    return content_id(scenario.model_dump(mode="json"))


class _Dumper(yaml.SafeDumper):
    pass


def _str_repr(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_repr)


def dump_scenario(scenario: Scenario) -> str:
    """The fully resolved scenario as YAML that loads back to the same scenario."""
    return yaml.dump(
        scenario.model_dump(mode="json"),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=100,
    )
