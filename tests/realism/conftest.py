"""The realism tests' fixtures: the shipped training corpus, unpacked once per session."""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest
import zstandard

sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))  # agent_runs

CORPUS = Path(__file__).with_name("data") / "kvct-train.tar.zst"


@pytest.fixture(scope="session")
def kvct_train(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the 71 real Weka traces of ``data/kvct-train.tar.zst`` (its README)."""
    root = tmp_path_factory.mktemp("corpus")
    with (
        CORPUS.open("rb") as raw,
        zstandard.ZstdDecompressor().stream_reader(raw) as stream,
        tarfile.open(fileobj=stream, mode="r|") as tar,
    ):
        tar.extractall(root, filter="data")
    folder = root / "kvct-train"
    assert len(list(folder.glob("trace_*.json"))) == 71
    return folder
