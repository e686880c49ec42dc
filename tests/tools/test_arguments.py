"""A tool call's arguments as the model sent them: valid ones kept as sent, malformed ones named
and repaired (or replaced by ``{}``) so the history sent onward is always valid JSON."""

from __future__ import annotations

import json

import pytest

from agentload.tools.arguments import read_arguments


def test_a_json_object_is_kept_byte_for_byte() -> None:
    raw = '{"path":  "a.py",\n "start_line": 3}'
    args = read_arguments(raw)
    assert args.value == {"path": "a.py", "start_line": 3}
    assert args.sent == raw and args.problem is None


@pytest.mark.parametrize("raw", ["", "  \n"])
def test_no_arguments_are_an_empty_object(raw: str) -> None:
    args = read_arguments(raw)
    assert (args.value, args.sent, args.problem) == ({}, "{}", None)


@pytest.mark.parametrize(
    ("raw", "repaired"),
    [
        # cut at max_tokens: the open string, array, object closed; a cut-off member dropped
        (
            '{"kind": "code_search", "task": "find the bu',
            {"kind": "code_search", "task": "find the bu"},
        ),
        ('{"path": "a.py", "start_li', {"path": "a.py"}),
        ('{"path": "a.py", "start_line": 1, "end_li', {"path": "a.py", "start_line": 1}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": 1,', {"a": 1}),
        ('{"a":', {"a": None}),
        ('{"a": "x\\', {"a": "x"}),
        # small models' habits: a code fence, text after the object
        ('```json\n{"a": 2}\n```', {"a": 2}),
        ('{"a": 1} and then some words', {"a": 1}),
    ],
)
def test_malformed_arguments_are_named_and_repaired(raw: str, repaired: dict[str, object]) -> None:
    args = read_arguments(raw)
    assert args.value is None
    assert args.problem is not None and "not valid JSON" in args.problem
    assert json.loads(args.sent) == repaired


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('"just a string"', "must be a JSON object, not a string"),
        ("[1, 2]", "must be a JSON object, not an array"),
        ("null", "must be a JSON object, not null"),
        ("42", "must be a JSON object, not a number"),
        ("not json at all", "not valid JSON"),
        ("}{", "not valid JSON"),
        ("[" * 100_000, "not"),
    ],
)
def test_what_cannot_be_repaired_is_sent_onward_as_an_empty_object(raw: str, problem: str) -> None:
    args = read_arguments(raw)
    assert args.value is None and problem in str(args.problem)
    assert args.sent == "{}"
