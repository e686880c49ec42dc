"""Whatever a model sends as tool arguments comes back as a tool result, never an exception.

Every tool of the Toolbox is called with fuzzed arguments (NUL bytes, lone surrogates, huge
strings, RTL and combining marks, numbers, lists, objects and null where a string is expected,
missing and extra keys, JSON text that is not an object) over a real workspace in a real local
sandbox; ``search_code`` and ``run_tests`` really execute when their arguments are valid.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentload import contract
from agentload.sandboxes import open_sandbox
from agentload.scenarios import Scenario, load_scenario
from agentload.tools import Toolbox, ToolResult
from agentload.tools.toolbox import MAX_ARG_CHARS, TOOL_NAMES

FUZZ = settings(max_examples=150, deadline=None)
ODD = ["\u202emod.py", "pkg/e\u0301\u0301", "\u200b", "\ufeff.", "\U0001f600/x", "\u0627\u0644"]


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolbox]:
    root = tmp_path_factory.mktemp("fuzz") / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("VALUE = 41\nNAME = 'x'\n")
    (root / "test_mod.py").write_text("import unittest\n")
    scenario: Scenario = load_scenario("quick", ["sandbox.memory=512m"]).model_copy(
        update={
            "test_command": ["python3", "-c", "print('all tests')"],
            "test_target_command": ["python3", "-c", "import sys; print(sys.argv[1])", "{target}"],
        }
    )
    with open_sandbox("local", root, scenario.sandbox, "fuzz") as sb:
        yield Toolbox(sb, root, scenario)


def call(box: Toolbox, name: Any, arguments: Any) -> ToolResult:
    result = asyncio.run(box.call(name, arguments))
    assert isinstance(result, ToolResult)
    result.text.encode("utf-8")  # what the recorder writes: always valid UTF-8
    assert (result.error is not None) == result.text.startswith("error: ")
    assert len(result.text) <= box.scenario.tool_output_max_chars + 100
    return result


def _not_an_int(s: str) -> bool:
    try:
        int(s)
    except ValueError:
        return True
    return False


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=8,
)
_benign_text = st.one_of(st.sampled_from(["pkg/mod.py", ".", "pkg", "VALUE", *ODD]), st.text())
_nul_text = st.tuples(st.text(max_size=10), st.text(max_size=10)).map(lambda ab: "\0".join(ab))
_surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_surrogate_text = st.tuples(st.text(max_size=10), _surrogate).map(lambda ab: ab[0] + ab[1])
_huge_text = st.integers(MAX_ARG_CHARS + 1, MAX_ARG_CHARS + 10).map(lambda n: "a" * n)
_not_a_string = st.one_of(
    st.integers(),
    st.floats(),
    st.booleans(),
    st.lists(_json, max_size=3),
    st.dictionaries(st.text(max_size=5), _json, max_size=3),
)
_not_an_integer = st.one_of(
    st.floats(), st.booleans(), st.text().filter(_not_an_int), st.lists(_json, max_size=3)
)


def _valid(spec: contract.ToolSpec, draw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for key, prop in spec.properties.items():
        if key in spec.required or draw(st.booleans()):
            if prop.get("type") == "integer":
                args[key] = draw(st.integers(-5, 600))
            else:
                args[key] = draw(_benign_text)
    return args


@st.composite
def hostile_call(draw: Any) -> tuple[str, Any]:
    """A call to one of the tools with one thing certainly wrong in its arguments."""
    name = draw(st.sampled_from(TOOL_NAMES))
    spec = contract.TOOLS[name]
    args = _valid(spec, draw)
    keys = list(spec.properties)
    fault = draw(st.sampled_from(["value", "extra", *(["missing", "null"] * bool(spec.required))]))
    if fault == "extra":
        args[draw(st.text(max_size=30).filter(lambda k: k not in keys))] = draw(_json)
    elif fault in ("missing", "null"):
        key = draw(st.sampled_from(spec.required))
        if fault == "missing":
            args.pop(key, None)
        else:
            args[key] = None
    else:
        key = draw(st.sampled_from(keys))
        if spec.properties[key].get("type") == "integer":
            args[key] = draw(_not_an_integer)
        else:
            args[key] = draw(st.one_of(_nul_text, _surrogate_text, _huge_text, _not_a_string))
    # as a mapping, or as the JSON text a model emits (a NUL or a surrogate then as \u escapes)
    return name, (json.dumps(args) if draw(st.booleans()) else args)


@FUZZ
@given(hostile_call())
def test_hostile_arguments_are_tool_errors(box: Toolbox, case: tuple[str, Any]) -> None:
    name, arguments = case
    result = call(box, name, arguments)
    assert result.error is not None, (name, arguments, result.text[:300])


_any_arguments = st.one_of(
    st.none(),
    st.text(),  # JSON text or not
    _json.map(json.dumps),
    st.lists(_json, max_size=3),
    st.dictionaries(
        st.one_of(
            st.sampled_from(["path", "pattern", "target", "old", "new", "start_line"]), st.text()
        ),
        st.one_of(_json, _benign_text, _nul_text, _surrogate_text),
        max_size=4,
    ),
)


@FUZZ
@given(
    st.one_of(st.sampled_from(TOOL_NAMES), st.text(max_size=20), st.integers(), st.none()),
    _any_arguments,
)
def test_any_call_is_a_result_never_an_exception(box: Toolbox, name: Any, arguments: Any) -> None:
    call(box, name, arguments)


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read_file", {"path": "pkg/mod.py\u0000"}),
        ("read_file", '{"path": "pkg\\u0000/mod.py", "start_line": 1}'),
        ("list_files", {"path": "pkg\u0000"}),
        ("list_files", '{"path": "\\u0000"}'),
        ("edit_file", {"path": "pkg/mod.py\u0000", "old": "VALUE", "new": "V"}),
        ("edit_file", {"path": "pkg/mod.py", "old": "VALUE\u0000", "new": "V"}),
        ("search_code", {"pattern": "VALUE", "path": "pkg\u0000"}),
        ("search_code", {"pattern": "VAL\u0000UE"}),
        ("run_tests", {"target": "test_mod\u0000"}),
    ],
)
def test_a_nul_in_an_argument_is_a_clear_tool_error(
    box: Toolbox, name: str, arguments: Any
) -> None:
    result = call(box, name, arguments)
    assert result.error is not None and "NUL character" in result.error, result.text
    assert (box.workspace_root / "pkg" / "mod.py").read_text() == "VALUE = 41\nNAME = 'x'\n"


def test_odd_but_valid_unicode_is_just_a_missing_file(box: Toolbox) -> None:
    for path in ODD:
        result = call(box, "read_file", {"path": path})
        assert result.error is not None and "no such file" in result.error, result.text
    result = call(box, "search_code", {"pattern": "\u202e|VALUE", "path": "pkg"})
    assert result.error is None and "pkg/mod.py:1: VALUE = 41" in result.text


def test_a_file_name_that_is_not_utf8_is_listed(box: Toolbox) -> None:
    odd = os.fsencode(box.workspace_root / "pkg") + b"/caf\xe9.py"
    Path(os.fsdecode(odd)).write_text("x = 1\n")
    try:
        result = call(box, "list_files", {"path": "pkg"})
        assert result.error is None and "pkg/caf\ufffd.py" in result.text
    finally:
        os.unlink(odd)
