"""The protocols in agentload.protocols are implemented where they are used."""

from __future__ import annotations

from pathlib import Path

from agentload import contract
from agentload.protocols import Tool, TraceSink
from agentload.trace import TraceWriter, make_header


def test_every_tool_of_the_registry_is_a_tool() -> None:
    for name, spec in contract.TOOLS.items():
        assert isinstance(spec, Tool)
        assert spec.schema()["function"]["name"] == name
        assert spec.schema() is contract.TOOL_SCHEMAS[name]


async def test_the_trace_writer_is_a_trace_sink(tmp_path: Path) -> None:
    h = make_header(
        endpoint="http://127.0.0.1:1/v1", model="m", scenario="s", scenario_hash="0" * 32,
        seed=0, tokenizer="o200k_base",
    )  # fmt: skip
    async with TraceWriter(tmp_path / "t.agentload.jsonl", h) as w:
        assert isinstance(w, TraceSink)
