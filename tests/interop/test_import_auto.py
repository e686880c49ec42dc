"""``agentload trace import auto``: the format of each real sample is told from its first object,
said on stderr, and the import is the format's own; a file of no known format is one line and
exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentload.errors import ConfigError
from agentload.interop.imports import detect_format

HERE = Path(__file__).parent
SAMPLES = [
    ("samples_fullcontent/openhands_swe_rebench.jsonl", "openhands"),
    ("samples_fullcontent/mlperf_agentic_edge_coding.jsonl", "mlperf"),
    ("samples_fullcontent/harbor_atif_openhands_hello_world.json", "atif"),
    ("samples_fullcontent/harbor_atif_terminus2_linear_history.json", "atif"),
    ("samples_fullcontent/otel_openinference.json", "otel"),
    ("samples_fullcontent/otel_openllmetry_genai.json", "otel"),
    ("samples/weka_sample_trace_with_subagent.json", "weka"),
    ("samples/tracelab_round_trace.jsonl", "tracelab"),
    ("samples/mooncake_conversation_trace.jsonl", "mooncake"),
]


@pytest.mark.parametrize(("name", "fmt"), SAMPLES, ids=[f for _, f in SAMPLES])
def test_each_real_sample_is_told_apart(name: str, fmt: str) -> None:
    found, why = detect_format([HERE / name])
    assert found == fmt, why
    assert name.split("/")[-1] in why


def test_auto_says_what_it_chose_and_imports_it(tmp_path: Path) -> None:
    out = tmp_path / "t.agentload.jsonl.zst"
    src = HERE / "samples_fullcontent" / "otel_openinference.json"
    done = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "import", "auto", str(src), "-o", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("auto: otel (detected from "), done.stderr
    assert done.stdout.startswith(f"wrote {out}: ")


def test_a_file_of_no_known_format_is_one_line(tmp_path: Path) -> None:
    src = tmp_path / "x.jsonl"
    src.write_text('{"hello": "world"}\n')
    with pytest.raises(ConfigError, match="not a format trace import reads"):
        detect_format([src])
    done = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "import", "auto", str(src), "-o",
         str(tmp_path / "t.agentload.jsonl.zst")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "x.jsonl" in done.stderr


@pytest.mark.parametrize(
    ("name", "fmt", "key"),
    [
        ("samples_fullcontent/otel_openinference.json", "otel", "resourceSpans"),
        ("samples_fullcontent/harbor_atif_terminus2_linear_history.json", "atif", "steps"),
        ("samples/weka_sample_trace_with_subagent.json", "weka", "requests"),
    ],
)
def test_a_one_object_file_larger_than_the_peek_is_told_from_its_first_bytes(
    tmp_path: Path, name: str, fmt: str, key: str
) -> None:
    """A real conversation runs to megabytes (kv-cache-tester's files are 1-2 MB): each real
    sample, its own records repeated past the 1 MB peek, is still told apart."""
    doc = json.loads((HERE / name).read_text())
    records = doc[key]
    while len(json.dumps(doc)) < 1_200_000:
        doc[key] = doc[key] + records
    big = tmp_path / f"big-{Path(name).name}"
    big.write_text(json.dumps(doc, indent=1))
    assert big.stat().st_size > 1 << 20
    found, why = detect_format([big])
    assert found == fmt, why
