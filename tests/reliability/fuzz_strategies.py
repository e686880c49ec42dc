"""Hypothesis strategies shared by the CLI fuzz suites (``test_cli_fuzz.py`` in-process,
``test_fuzz_subprocess.py`` in a subprocess): hostile option values, YAML of any shape,
scenario/profile file bytes, and a port nobody listens on."""

from __future__ import annotations

import socket

import yaml
from hypothesis import strategies as st

__all__ = ["FILE", "NUMBER", "SPECIAL", "TEXT", "VALUE", "YAML_VALUE", "argv_value", "closed_port"]


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
