"""Hypothesis strategies shared by the fuzz suites (``test_cli_fuzz.py`` in-process,
``test_fuzz_subprocess.py`` in a subprocess, ``tests/interop/test_import_fuzz.py``): hostile
option values, YAML of any shape, scenario/profile file bytes, a port nobody listens on, and
damaged JSON documents and JSON lines (``damaged_doc``, ``damaged_lines``)."""

from __future__ import annotations

import json
import re
import socket
from typing import Any

import yaml
from hypothesis import strategies as st

__all__ = [
    "FILE",
    "HOSTILE",
    "NUMBER",
    "SPECIAL",
    "TEXT",
    "VALUE",
    "YAML_VALUE",
    "argv_value",
    "closed_port",
    "damaged_doc",
    "damaged_json",
    "damaged_lines",
]


def closed_port() -> int:
    """A 127.0.0.1 port that was free a moment ago (bound, then closed): a connect is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SPECIAL = st.sampled_from(
    [
        "",
        " ",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "-1",
        "0",
        "-0",
        "1e999",
        "-1e999",
        "99999999999999999999",
        "0x10",
        "1_000",
        "١٢",
        "1,2",
        ",",
        "1,,2",
        "abc",
        "\x00",
        "a\x00b",
        "\u202e1",
        "ß" * 300,
    ]
)
NUMBER = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40
)
VALUE = st.one_of(SPECIAL, NUMBER, TEXT)
"""An option value: special strings, numbers of any size, short text."""


def argv_value(value: str) -> str:
    return value.replace("\x00", "")  # argv cannot carry NUL; exec would refuse


YAML_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=6,
)
"""A YAML-able value of any shape."""

FILE = st.one_of(
    st.binary(max_size=400),
    YAML_VALUE.map(lambda v: yaml.safe_dump(v).encode()),
    st.sampled_from(
        [b"\xff\xfe\x00\x01", b"extends: quick\nseed: [1", b"a: !!python/object:os.system x"]
    ),
)
"""The bytes of a scenario or profile file: random, YAML of the wrong shape, or broken YAML."""


# -- damage ------------------------------------------------------------------------------------
def _nested(depth: int) -> str:
    """A marker ``_dumps`` writes as ``depth`` nested objects (json.dumps itself would recurse)."""
    return f"\x00NEST{depth}\x00"


def _dumps(value: Any) -> bytes:
    text = json.dumps(value, ensure_ascii=False)
    text = re.sub(
        r'"\\u0000NEST(\d+)\\u0000"',
        lambda m: '{"a":' * int(m[1]) + "1" + "}" * int(m[1]),
        text,
    )
    return text.encode("utf-8", "surrogatepass")


HOSTILE = st.one_of(
    st.sampled_from(
        [
            1e300,
            -1e300,
            10**30,
            -(10**30),
            2**63,
            2**64,
            -1,
            0,
            -0.0,
            1e-300,
            None,
            True,
            "",
            [],
            {},
            "\x00",
            "\ud800",
            "\u202e",
            "NaN",
            float("nan"),
            float("inf"),
            "x" * 70_000,
            list(range(5000)),
            [[[[[]]]]],
            {"": None},
            "1e300",
            "-1",
        ]
    ),
    st.integers(min_value=2, max_value=3000).map(_nested),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
)
"""A JSON value that does not belong: huge/negative numbers, nulls, wrong types, nesting."""


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (dict keys, list indexes), the root included."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def damaged_json(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    """``data`` (one JSON document) with one value replaced, one key dropped or added."""
    doc = json.loads(data)
    path = draw(st.sampled_from(_paths(doc)))
    op = draw(st.sampled_from(["replace", "drop", "add"]))
    value = draw(HOSTILE)
    if not path:
        return _dumps(value), f"the document replaced by {value!r:.80}"
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if op == "drop":
        parent.pop(path[-1])
    elif op == "add" and isinstance(parent, dict):
        parent[draw(st.sampled_from(["extra", "", "type", "id", "schema"]))] = value
    else:
        parent[path[-1]] = value
    return _dumps(doc), f"{op} {list(path)!r} = {value!r:.80}"


_BYTE_OPS = [
    "truncate", "flip", "insert", "nul", "drop_line", "dup_line", "swap_lines", "blank_lines",
    "crlf", "long_line", *["value"] * 8,
]  # fmt: skip


@st.composite
def damaged_lines(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    """JSON lines ``data`` after 0-3 damages, and a description of them."""
    notes = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        lines = data.splitlines(keepends=True) or [b""]
        op = draw(st.sampled_from(_BYTE_OPS))
        n = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        m = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        at = len(b"".join(lines[:n])) + draw(st.integers(0, max(len(lines[n]) - 1, 0)))
        if op == "truncate":
            data = data[:at]
        elif op == "flip":
            bit = draw(st.integers(min_value=1, max_value=255))
            data = data[:at] + bytes([data[at] ^ bit]) + data[at + 1 :] if data else data
        elif op == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
        elif op == "nul":
            data = data[:at] + b"\x00" * draw(st.integers(1, 1000)) + data[at:]
        elif op == "drop_line":
            data = b"".join(lines[:n] + lines[n + 1 :])
        elif op == "dup_line":
            data = b"".join(lines[: n + 1] + lines[n:])
        elif op == "swap_lines":
            lines[n], lines[m] = lines[m], lines[n]
            data = b"".join(lines)
        elif op == "blank_lines":
            data = b"".join(lines[:n]) + b"\n \n\t\n" + b"".join(lines[n:])
        elif op == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif op == "long_line":
            size = draw(st.sampled_from([70_000, 1 << 20, 6 << 20]))
            line = draw(st.sampled_from([b"x" * size, b'{"type":"blob","content":"' + b"a" * size]))
            data = b"".join(lines[:n]) + line + b"\n" + b"".join(lines[n:])
        else:
            try:
                lines[n], what = draw(damaged_json(lines[n].rstrip(b"\r\n")))
            except (ValueError, RecursionError):
                what = "not JSON"
            lines[n] = lines[n].rstrip(b"\n") + b"\n"
            data = b"".join(lines)
            op = f"line {n + 1}: {what}"
        notes.append(f"{op} at byte {at}" if op in ("truncate", "flip", "insert", "nul") else op)
    return data, "; ".join(notes)


def damaged_doc(data: bytes) -> st.SearchStrategy[tuple[bytes, str]]:
    """A JSON document: valid, one value damaged, truncated, or random bytes."""
    return st.one_of(
        st.just((data, "valid")),
        damaged_json(data),
        damaged_json(data),
        st.integers(0, len(data) - 1).map(lambda n: (data[:n], f"truncated at {n}")),
        st.binary(max_size=300).map(lambda b: (b, f"random bytes {b!r:.60}")),
    )
