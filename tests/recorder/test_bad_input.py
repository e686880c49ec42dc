"""Whatever bytes the reader is given, the only error it raises is TraceFormatError."""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentload.errors import TraceFormatError
from agentload.trace import load_trace, read_trace
from agentload.trace.validate import validate_trace

from .conftest import header

_counter = itertools.count()
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HEADER = orjson.dumps(header().model_dump(mode="json", by_alias=True, exclude_none=True))
TYPES = ["header", "session", "agent", "blob", "llm_call", "tool_call", "event", "other", 3, None]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)
FIELDS = [
    "id",
    "session_id",
    "agent_id",
    "seq",
    "request",
    "messages",
    "usage",
    "timings",
    "start_ns",
    "end_ns",
    "role",
    "kind",
    "content",
    "ns",
    "name",
    "llm_call_id",
    "arguments",
    "schema",
    "prefix",
    "response",
]
records = st.builds(
    lambda t, fields: {"type": t, **fields},
    st.sampled_from(TYPES),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=8),
)


def only_trace_format_errors(path: Path) -> None:
    for fn in (lambda p: list(read_trace(p)), load_trace, validate_trace):
        with contextlib.suppress(TraceFormatError):
            fn(path)


def _file(tmp_path: Path, suffix: str, data: bytes) -> Path:
    path = tmp_path / f"f{next(_counter)}{suffix}"
    path.write_bytes(data)
    return path


@SETTINGS
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    only_trace_format_errors(_file(tmp_path, ".jsonl", data))
    only_trace_format_errors(_file(tmp_path, ".zst", b"\x28\xb5\x2f\xfd" + data))
    only_trace_format_errors(_file(tmp_path, ".zst", zstandard.compress(data)))


@SETTINGS
@given(data=st.binary(max_size=200), header_first=st.booleans())
def test_bytes_after_a_valid_header(tmp_path: Path, data: bytes, header_first: bool) -> None:
    body = (HEADER + b"\n" if header_first else b"") + data
    only_trace_format_errors(_file(tmp_path, ".jsonl", body))
    only_trace_format_errors(_file(tmp_path, ".zst", zstandard.compress(body)))


@SETTINGS
@given(lines=st.lists(st.one_of(records, json_values), max_size=6))
def test_generated_json_lines(tmp_path: Path, lines: list[Any]) -> None:
    body = HEADER + b"\n" + b"".join(orjson.dumps(x) + b"\n" for x in lines)
    only_trace_format_errors(_file(tmp_path, ".jsonl", body))


@SETTINGS
@given(text=st.text(max_size=200), cut=st.integers(min_value=0, max_value=200))
def test_generated_text_lines(tmp_path: Path, text: str, cut: int) -> None:
    body = HEADER + b"\n" + text.encode("utf-8", "surrogatepass")[:cut]
    only_trace_format_errors(_file(tmp_path, ".jsonl", body))


@SETTINGS
@given(position=st.integers(min_value=0), value=st.integers(min_value=0, max_value=255))
def test_corrupted_byte_in_a_real_trace(
    tmp_path: Path, real_trace: bytes, position: int, value: int
) -> None:
    data = bytearray(real_trace)
    data[position % len(data)] = value
    only_trace_format_errors(_file(tmp_path, ".zst", bytes(data)))


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    import asyncio

    from .conftest import write_session

    path = tmp_path_factory.mktemp("real") / "r.agentload.jsonl.zst"
    asyncio.run(write_session(path, flush_each_call=True))
    return path.read_bytes()


def test_deeply_nested_json_is_a_format_error(tmp_path: Path) -> None:
    body = HEADER + b"\n" + b'{"type":"event","kind":"x","ns":1,"details":{"a":' + b"[" * 5000
    body += b"]" * 5000 + b"}}\n"
    with pytest.raises(TraceFormatError):
        list(read_trace(_file(tmp_path, ".jsonl", body)))
