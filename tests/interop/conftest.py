"""Fixtures of the export tests: a real generated trace, a real ``agentload serve`` and AIPerf.

``aiperf`` finds the AIPerf venv that ``scripts/aiperf.sh install`` made (CI starts the install
in the background and names its exit-code file in AGENTLOAD_AIPERF_READY_FILE; the fixture
waits for it, bounded by AGENTLOAD_AIPERF_WAIT_S) and skips without it, or fails instead under
AGENTLOAD_REQUIRE_AIPERF=1, like the ``engine`` fixture of tests/conftest.py. AIPerf needs a
HuggingFace tokenizer and there is no network: the fixture trains a small byte-level BPE on this
repository's own text and lays it out as a HuggingFace cache entry (``agentload/bpe``), because
AIPerf 0.13.0's decode workers force offline mode, in which it resolves tokenizers only from the
cache (a plain directory path fails there).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from serve_process import serve_process

from agentload.generate.options import GenerateOptions
from agentload.generate.run import generate
from agentload.scenarios import load_scenario

sys.path.insert(0, str(Path(__file__).parent))  # cli_helpers, otel_helpers
sys.path.insert(0, str(Path(__file__).parents[1]))  # ready_file
from ready_file import skip_or_fail, wait_for_ready_file

REPO = Path(__file__).resolve().parents[2]
TOKENIZER = "agentload/bpe"
_SNAPSHOT = "0" * 40


@pytest.fixture(scope="session")
def generated_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``generate -s quick`` run (two sessions, each an orchestrator with parallel
    sub-agents, several of one kind: it delegates in most rounds; local sandbox, ~20K-token
    context target so it takes ~10 s), once per run."""
    out = tmp_path_factory.mktemp("generated")
    opts = GenerateOptions(
        scenario=load_scenario(
            "quick", ["context_target=20000", "orchestrator.delegate_weight=0.6"]
        ),
        out=out,
        sessions=2,
        levels=[2],
        sandbox="local",
    )
    return asyncio.run(generate(opts)).trace_path


@dataclass(frozen=True)
class Serve:
    """A running ``agentload serve``: its base URL (``.../v1``) and model."""

    url: str
    model: str

    @property
    def root(self) -> str:
        return self.url.removesuffix("/v1")


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``agentload serve --port 0`` in a subprocess (its own GIL), stopped at teardown."""
    with serve_process() as url:
        yield Serve(url=url, model="agentload-sim")


@dataclass(frozen=True)
class AIPerf:
    """The AIPerf venv's python and an offline tokenizer for it."""

    python: Path
    hf_home: Path
    tokenizer: str = TOKENIZER

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            HF_HOME=str(self.hf_home),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            HF_HUB_DISABLE_TELEMETRY="1",
            NO_COLOR="1",
        )
        return env

    def profile(self, args: list[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
        """``aiperf profile ARGS --tokenizer agentload/bpe``, output captured."""
        return subprocess.run(
            [str(self.python), "-m", "aiperf", "profile", *args, "--tokenizer", self.tokenizer],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(),
            check=False,
            cwd=self.hf_home,
        )


def _wait_for_install() -> str | None:
    """When CI installs AIPerf in the background (AGENTLOAD_AIPERF_READY_FILE names the file
    its exit code will be written to), wait for it, bounded by AGENTLOAD_AIPERF_WAIT_S (default
    900 s). ``None`` when it finished well, else why not."""
    return wait_for_ready_file(
        "AGENTLOAD_AIPERF_READY_FILE", "AGENTLOAD_AIPERF_WAIT_S", 900,
        "the AIPerf install", "scripts/aiperf.sh install", "install.err",
    )  # fmt: skip


def _find_python() -> tuple[Path | None, str]:
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "aiperf.sh"), "path"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode == 0:
        return Path(proc.stdout.strip()), ""
    return None, (proc.stderr.strip().splitlines() or ["scripts/aiperf.sh path failed"])[-1]


def _train_tokenizer(hf_home: Path) -> None:
    """A byte-level BPE (2048 tokens) trained on this repository's docs and sources, laid out as
    the HuggingFace cache entry ``agentload/bpe`` (revision ``main``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    repo = hf_home / "hub" / "models--agentload--bpe"
    snap = repo / "snapshots" / _SNAPSHOT
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(_SNAPSHOT)
    files = sorted(str(p) for p in (REPO / "docs").glob("*.md"))
    files += sorted(str(p) for p in (REPO / "agentload").rglob("*.py"))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # type: ignore[assignment]
    tok.decoder = decoders.ByteLevel()  # type: ignore[assignment]
    trainer = trainers.BpeTrainer(  # type: ignore[call-arg]
        vocab_size=2048,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(files, trainer)
    tok.save(str(snap / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|endoftext|>",
        "model_max_length": 1 << 20,
    }
    (snap / "tokenizer_config.json").write_text(json.dumps(config))


@pytest.fixture(scope="session")
def aiperf(tmp_path_factory: pytest.TempPathFactory) -> AIPerf:
    """AIPerf (``scripts/aiperf.sh``) with an offline tokenizer; skips without it, fails
    instead under AGENTLOAD_REQUIRE_AIPERF=1."""
    why = _wait_for_install()
    python: Path | None = None
    if why is None:
        python, why = _find_python()
    if python is None:
        skip_or_fail(why, "AGENTLOAD_REQUIRE_AIPERF")
    hf_home = tmp_path_factory.mktemp("aiperf-hf")
    _train_tokenizer(hf_home)
    return AIPerf(python=python, hf_home=hf_home)


MS = 1_000_000


class TraceBuilder:
    """Hand-built traces written as real files (plain JSON lines through the recorder's own
    ``encode_record``), for the cases a generated trace does not show: content-free block ids
    at another block size, nested sub-agents, errors."""

    def __init__(self, block_size: int = 16, imported: bool = False) -> None:
        from agentload.trace import make_header
        from agentload.trace.schema import SourceInfo

        self.header = make_header(model="m", tokenizer="o200k_base", block_size=block_size)
        if imported:
            self.header.redacted = True
            self.header.source = SourceInfo(
                format="weka", files=["x.json"], block_size=block_size, hash_id_scope="local"
            )
        self.t0 = self.header.clock.mono_ns
        self.records: list[Any] = []

    def session(self, sid: str) -> None:
        from agentload.trace.schema import SessionRecord

        self.records.append(SessionRecord(id=sid, start_ns=self.t0))

    def agent(
        self, aid: str, sid: str, start_ms: float, end_ms: float | None, parent: str | None = None
    ) -> None:
        from agentload.trace.schema import AgentRecord

        end = None if end_ms is None else self.t0 + int(end_ms * MS)
        role = "orchestrator" if parent is None else "code_search"
        self.records.append(
            AgentRecord(
                id=aid,
                session_id=sid,
                parent_agent_id=parent,
                role=role,
                start_ns=self.t0 + int(start_ms * MS),
                end_ns=end,
            )
        )

    def call(
        self,
        cid: str,
        aid: str,
        sid: str,
        seq: int,
        submit_ms: float,
        blocks: list[str],
        prompt: int,
        out: int | None = 10,
        *,
        api_ms: float | None = 5.0,
        error: str | None = None,
        stream: bool = True,
    ) -> None:
        from agentload.trace.schema import (
            LLMCallRecord,
            PrefixInfo,
            RequestParams,
            Timings,
            Usage,
        )

        submit = self.t0 + int(submit_ms * MS)
        last = None if api_ms is None else submit + int(api_ms * MS)
        self.records.append(
            LLMCallRecord(
                id=cid,
                session_id=sid,
                agent_id=aid,
                seq=seq,
                request=RequestParams(model="m", stream=stream),
                messages=[],
                usage=Usage(
                    prompt_tokens=prompt,
                    prompt_tokens_ours=prompt,
                    completion_tokens=out,
                    completion_tokens_ours=out,
                ),
                timings=Timings(
                    submit_ns=submit,
                    first_token_ns=None if last is None else submit + MS,
                    last_token_ns=last,
                ),
                prefix=PrefixInfo(blocks=blocks),
                error=error,
            )
        )

    def write(self, path: Path) -> Path:
        from agentload.trace.events import EventKind
        from agentload.trace.schema import EventRecord
        from agentload.trace.writer import encode_record

        end = EventRecord(kind=EventKind.TRACE_END, ns=self.t0)
        with path.open("wb") as fh:
            for rec in [self.header, *self.records, end]:
                fh.write(encode_record(rec))
        return path


@pytest.fixture
def build() -> type[TraceBuilder]:
    """The ``TraceBuilder`` class (tests build their own traces with it)."""
    return TraceBuilder
