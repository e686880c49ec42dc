"""results.json's shape is pinned: ``schemas/agentload.replay-results-M.N.schema.json`` is the
JSON Schema of what this agentload writes under its schema id, and the files of older ids stay.

* The pinned file of the current id is the model's shape (field paths, JSON types, which are
  required; descriptions may change freely): a change of shape without a new id fails here,
  saying what to bump.
* Every older file of the same major version still reads: each field the current model
  requires is in it (where its parent object is), and each field it has takes no JSON type the
  current model refuses. A real run's results.json validates against the pinned schema, and
  ``compare`` reads a 1.1 file beside a 1.2 one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
from replay_helpers import run_cli
from replay_servers import ChatServer

from agentload.measure.results import SCHEMA, SCHEMA_MAJOR

ROOT = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location(
    "results_schema", ROOT / "scripts" / "results_schema.py"
)
assert _spec is not None and _spec.loader is not None
results_schema = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results_schema)

Shape = dict[str, tuple[frozenset[str], bool]]
"""Field path → (its JSON types, required)."""


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    return node


def _branches(node: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    node = _resolve(node, defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            return [b for sub in node[key] for b in _branches(sub, defs)]
    return [node]


def shape(schema: dict[str, Any]) -> Shape:
    """Every field path of a results JSON Schema with its JSON types and whether it is
    required (``a.b``: a field of an object; ``a[]``: an item of a list; ``a{}``: a value of a
    map; a field of a union of objects, such as ``config``, is required when every variant
    requires it); titles, descriptions and defaults left out."""
    defs = schema.get("$defs", {})
    out: dict[str, tuple[set[str], bool]] = {}

    def walk(node: dict[str, Any], path: str, required: bool, depth: int) -> None:
        assert depth < 40, path
        types, req = out.setdefault(path, (set(), required))
        out[path] = (types, req or required)
        branches = _branches(node, defs)
        objects = [set(b.get("required", ())) for b in branches if "properties" in b]
        for b in branches:
            kind = b.get("type", "any")
            types.update(kind if isinstance(kind, list) else [kind])
            for name, sub in b.get("properties", {}).items():
                need = all(name in req for req in objects)  # what every variant requires
                walk(sub, f"{path}.{name}", need, depth + 1)
            if isinstance(b.get("items"), dict):
                walk(b["items"], f"{path}[]", True, depth + 1)
            if isinstance(b.get("additionalProperties"), dict):
                walk(b["additionalProperties"], path + "{}", True, depth + 1)

    walk(schema, "", True, 0)
    return {p: (frozenset(t), r) for p, (t, r) in out.items()}


def _pinned() -> dict[str, dict[str, Any]]:
    """Every pinned schema file by its id."""
    files = (ROOT / "schemas").glob("agentload.replay-results-*.schema.json")
    return {(d := orjson.loads(f.read_bytes()))["$id"]: d for f in files}


def test_the_pinned_schema_of_this_id_is_the_models() -> None:
    path = results_schema.schema_file()
    assert path.is_file(), f"{path.name} is missing: run python scripts/results_schema.py"
    pinned, model = shape(orjson.loads(path.read_bytes())), shape(results_schema.model_schema())
    changed = sorted(p for p in pinned.keys() | model.keys() if pinned.get(p) != model.get(p))
    assert not changed, (
        f"results.json's shape changed under the same id {SCHEMA} at {changed[:8]}: bump "
        "SCHEMA_MINOR in agentload/measure/results.py (fields added) or SCHEMA_MAJOR (fields "
        "removed or retyped), then run python scripts/results_schema.py"
    )


def _minor(schema_id: str) -> tuple[int, int]:
    major, _, minor = schema_id.rsplit("/", 1)[1].partition(".")
    return int(major), int(minor or 0)


@pytest.mark.parametrize(
    "old", sorted(i for i in _pinned() if _minor(i)[0] == SCHEMA_MAJOR and i != SCHEMA)
)
def test_an_older_minor_versions_files_still_read(old: str) -> None:
    before, now = shape(_pinned()[old]), shape(results_schema.model_schema())
    parent = lambda p: p[: max(p.rfind("."), p.rfind("["), p.rfind("{"), 0)]  # noqa: E731
    missing = sorted(p for p, (_, req) in now.items() if req and parent(p) in before
                     and p not in before)  # fmt: skip
    assert not missing, f"a {old} file lacks fields this version requires: {missing[:8]}"
    retyped = sorted(p for p, (t, _) in before.items() if p in now
                     and "any" not in now[p][0] and not t <= now[p][0] | {"integer"})  # fmt: skip
    assert not retyped, f"a {old} file holds types this version refuses at {retyped[:8]}"
    assert len(before) > 100  # the walk saw the document, not an empty shell


def test_a_real_results_file_is_what_the_pinned_schema_says(
    chat_server: ChatServer, fast_trace: Path, tmp_path: Path
) -> None:
    argv = ["replay", str(fast_trace), "--endpoint", chat_server.base_url, "--model", "test-model"]
    argv += ["--engine", "dynamo", "--sessions", "2", "--out", str(tmp_path / "new")]
    assert run_cli(argv) == 0
    raw = orjson.loads((tmp_path / "new" / "results.json").read_bytes())
    assert raw["schema"] == SCHEMA
    jsonschema.validate(raw, orjson.loads(results_schema.schema_file().read_bytes()))
    # compare reads a file of the previous minor version beside it
    old = tmp_path / "old"
    old.mkdir()
    raw["schema"] = "agentload.replay-results/1.1"
    for point in raw["points"]:
        for r in point["requests"]:
            for key in ("prefill_worker", "decode_worker", "server_timing"):
                r.pop(key, None)
    raw["config"].pop("modeled_server", None)
    (old / "results.json").write_bytes(orjson.dumps(raw))
    assert run_cli(["compare", str(old), str(tmp_path / "new")]) == 0
