#!/usr/bin/env python3
"""Write the JSON Schema of results.json for the schema id this agentload writes.

    python scripts/results_schema.py          # writes schemas/agentload.replay-results-M.N.schema.json

The file is the shape of what ``agentload replay`` (and the live benchmark) write: pydantic's
serialization schema of ``ResultsDocument``, by alias, keys sorted. ``tests/replay/
test_results_schema.py`` checks that it is the model's (a change of shape without a new schema
id fails there) and that every older file of the same major version still reads.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentload.measure.results import SCHEMA, ResultsDocument  # noqa: E402

OUT = ROOT / "schemas"


def schema_file(schema_id: str = SCHEMA) -> Path:
    """``schemas/agentload.replay-results-M.N.schema.json`` for ``agentload.replay-results/M.N``."""
    return OUT / (schema_id.replace("/", "-") + ".schema.json")


def model_schema() -> dict[str, object]:
    """The JSON Schema of results.json as this agentload writes it."""
    schema = ResultsDocument.model_json_schema(mode="serialization", by_alias=True)
    return {"$id": SCHEMA, **schema}


def main() -> None:
    path = schema_file()
    OUT.mkdir(exist_ok=True)
    path.write_text(json.dumps(model_schema(), indent=1, sort_keys=True) + "\n")
    print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
