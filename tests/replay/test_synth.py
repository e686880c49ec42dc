"""Replay of content-free traces: synthesized prompts against the real simulator, digests,
tokenizer choice and the errors of a bad one."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from replay_helpers import run_cli
from replay_traces import agentic_trace

from agentload.options.replay import ReplayConfig
from agentload.replay.plan import build_plans
from agentload.replay.run import run_replay
from agentload.trace import TraceWriter, load_trace, make_header
from agentload.trace.schema import (
    AgentRecord,
    LLMCallRecord,
    PrefixInfo,
    RequestParams,
    SessionRecord,
    SourceInfo,
    Timings,
    Usage,
)
from agentload.trace.synth import Synthesizer

MS = 1_000_000
BLOCK = 64


@dataclass(frozen=True)
class Call:
    id: str
    session: str
    agent: str
    seq: int
    ids: list[str]
    tokens: int
    at_ms: int
    base: str | None = None
    base_blocks: int = 0
    out: int = 4


# s0: three calls that extend each other (c0's last block partial, c1 with a tail beyond its
# ids, c2 ending in a partial block); s1: one call sharing c0's first two blocks (global ids).
CALLS = [
    Call("c0", "s0", "a0", 0, ["1", "2", "3"], 200, 0),
    Call("d0", "s1", "b0", 0, ["1", "2", "9"], 300, 200),
    Call("c1", "s0", "a0", 1, ["4", "5"], 400, 300, base="c0", base_blocks=3),
    Call("c2", "s0", "a0", 2, ["6", "7"], 470, 600, base="c1", base_blocks=5),
]


async def _write(path: Path, calls: list[Call], call_ms: int, block: int) -> None:
    header = make_header(
        tokenizer="o200k_base",
        block_size=block,
        redacted=True,
        source=SourceInfo(
            format="mooncake", files=["m.jsonl"], block_size=block, hash_id_scope="global"
        ),
    )
    t0 = header.clock.mono_ns + 5_000 * MS
    async with TraceWriter(path, header) as w:
        for sid, aid in sorted({(c.session, c.agent) for c in calls}):
            start = t0 + min(c.at_ms for c in calls if c.session == sid) * MS
            await w.write(SessionRecord(id=sid, start_ns=start))
            await w.write(AgentRecord(id=aid, session_id=sid, role="agent", start_ns=start))
        for c in calls:
            submit = t0 + c.at_ms * MS
            await w.write(
                LLMCallRecord(
                    id=c.id,
                    session_id=c.session,
                    agent_id=c.agent,
                    seq=c.seq,
                    request=RequestParams(model="src", max_tokens=c.out),
                    messages=[],
                    usage=Usage(
                        prompt_tokens=c.tokens,
                        prompt_tokens_ours=c.tokens,
                        completion_tokens=c.out,
                        completion_tokens_ours=c.out,
                    ),
                    timings=Timings(submit_ns=submit, last_token_ns=submit + call_ms * MS),
                    prefix=PrefixInfo(base=c.base, base_blocks=c.base_blocks, blocks=c.ids),
                )
            )


def content_free_trace(
    path: Path, calls: list[Call] = CALLS, call_ms: int = 50, block: int = BLOCK
) -> Path:
    """A content-free trace of ``calls`` (each ``call_ms`` long) at ``block`` tokens a block."""
    asyncio.run(_write(path, calls, call_ms, block))
    return path


@pytest.fixture
def own_simulator() -> Iterator[Any]:
    """A simulator of this test alone: its prefix cache holds only this test's prompts."""
    from agentload.endpoint import SimulatorServer

    with SimulatorServer(profile="instant", model="agentload-sim", seed=0) as srv:
        yield srv


def _floor(n: int) -> int:
    return n // 16 * 16


def test_synthesized_prompts_have_the_recorded_lengths_and_sharing(
    own_simulator: Any, tmp_path: Path
) -> None:
    trace = content_free_trace(tmp_path / "cf.agentload.jsonl")
    cfg = ReplayConfig(
        traces=[str(trace)],
        endpoint=own_simulator.base_url,
        model=own_simulator.model,
        salt_at="off",
        schedule="recorded",
        time_scale=0.5,
    )
    res = asyncio.run(run_replay(cfg))
    assert res.config.schedule == "recorded" and res.points[0].schedule == "recorded"
    reqs = {r.call: r for r in res.points[0].requests}
    assert len(reqs) == 4 and all(r.ok for r in reqs.values())
    # the simulator counts with o200k: every prompt has exactly the recorded input length
    for c in CALLS:
        r = reqs[c.id]
        assert r.prompt_tokens == r.prompt_tokens_ours == r.recorded_prompt_tokens == c.tokens
        assert r.completion_tokens == c.out
    assert res.prompt_token_ratio == 1.0
    # what the target had cached is the recorded sharing, to the token (16-token blocks):
    # c1 holds all of c0's words (c0's last block was partial), c2 c1's five blocks; d0 (the
    # other session) c0's first two blocks
    head = Synthesizer().head
    assert reqs["c0"].cached_tokens == 0
    assert reqs["c1"].cached_tokens == _floor(head + 200 - Synthesizer().framing)
    assert reqs["c2"].cached_tokens == _floor(head + 5 * BLOCK)
    assert reqs["d0"].cached_tokens == _floor(head + 2 * BLOCK)
    # unsalted, the ceiling is the whole prompt (a replica could have sent it); its part the
    # session's own earlier calls can have cached is exactly what the server cached
    for cid in ("c0", "c1", "c2"):
        r = reqs[cid]
        assert r.within_ceiling_tokens == r.cached_tokens <= r.ceiling_tokens
        assert r.ceiling_tokens == _floor(r.prompt_tokens_ours)
    assert reqs["d0"].within_ceiling_tokens == 0  # first call of its session
    # d0's hits came from the other session (global block ids): cross-session hits
    hits = res.points[0].aggregates.kv_hits
    assert hits is not None and hits.n == 4
    assert hits.within_session_tokens == sum(reqs[c].cached_tokens for c in ("c1", "c2"))
    assert hits.cross_session_tokens == reqs["d0"].cached_tokens > 0


def test_same_id_same_text_and_digests_follow_the_seed(tmp_path: Path) -> None:
    trace = load_trace(content_free_trace(tmp_path / "cf.agentload.jsonl"))

    def bodies(seed: int, tokenizer: str = "o200k_base") -> dict[str, Any]:
        plans = build_plans([trace], synth=Synthesizer(tokenizer, seed))
        return {c.id: c for p in plans for c in p.calls.values()}

    a, b, other = bodies(0), bodies(0), bodies(1)
    assert {k: c.digest for k, c in a.items()} == {k: c.digest for k, c in b.items()}
    assert all(a[k].digest != other[k].digest for k in a)
    text = {k: c.body()["messages"][1]["content"].split() for k, c in a.items()}
    # blocks 1, 2 are the same 128 words in c0, c1, c2 and d0; block 3 differs from 9
    assert text["c0"][:128] == text["d0"][:128] == text["c1"][:128] == text["c2"][:128]
    assert text["c0"][128:133] != text["d0"][128:133]
    assert text["c1"][: len(text["c0"])] == text["c0"]  # c1 extends c0
    assert a["c0"].body() == {"messages": a["c0"].body()["messages"], "max_tokens": 4}
    assert "tools" not in a["c1"].body() and a["c1"].traffic == {"max_tokens": 4}


def _train_tokenizer(path: Path) -> str:
    """tests/recorder/test_synth.py's trainer of a real HF tokenizer.json."""
    where = Path(__file__).parents[1] / "recorder" / "test_synth.py"
    spec = importlib.util.spec_from_file_location("recorder_test_synth", where)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out: str = mod.train_tokenizer(path, "metaspace")
    return out


def test_the_hf_tokenizer_and_bad_specs_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = content_free_trace(tmp_path / "cf.agentload.jsonl")
    spec = _train_tokenizer(tmp_path / "tok.json")
    synth = Synthesizer(spec, 0)
    plans = build_plans([load_trace(trace)], synth=synth)
    for c in (c for p in plans for c in p.calls.values()):
        assert synth.counter.count_prompt(c.body()["messages"]) == c.prompt_tokens_ours
        assert c.prompt_tokens_ours == c.prompt_tokens

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = ["replay", str(trace), "--model", "m", "--endpoint", "http://127.0.0.1:9/v1"]
        code = run_cli([*argv, *args])
        return subprocess.CompletedProcess(argv, code, "", capsys.readouterr().err)

    bad = tmp_path / "broken.json"
    bad.write_text('{"version": "1.0", "model": 7}')
    for args, says in (
        (["--tokenizer", "gpt9"], "--tokenizer 'gpt9': choose o200k_base, cl100k_base or hf:"),
        (["--tokenizer", f"hf:{bad}"], f"tokenizer hf:{bad}: cannot load it"),
        (["--tokenizer", f"hf:{tmp_path}/none.json"], f"tokenizer hf:{tmp_path}/none.json"),
    ):
        out = cli(*args)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and "Traceback" not in out.stderr


def test_a_tokenizer_for_traces_with_text_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = agentic_trace(tmp_path / "t.agentload.jsonl")
    argv = ["replay", str(trace), "--model", "m", "--endpoint", "http://127.0.0.1:9/v1"]
    assert run_cli([*argv, "--tokenizer", "cl100k_base"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(
        "--tokenizer cl100k_base: no trace is content-free (header.redacted); "
        "the tokenizer only synthesizes the prompts of such traces"
    )


def test_two_replays_with_one_seed_send_identical_traffic(
    own_simulator: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = content_free_trace(tmp_path / "cf.agentload.jsonl")
    manifests = []
    for seed in (5, 5, 6):
        cfg = ReplayConfig(
            traces=[str(trace)],
            endpoint=own_simulator.base_url,
            model=own_simulator.model,
            seed=seed,
            start_at="zero",
        )
        doc = asyncio.run(run_replay(cfg)).model_dump(mode="json", by_alias=True)
        manifests.append(doc["digest_manifest"])
        assert doc["config"]["schedule"] == "closed" and doc["config"]["tokenizer"] is None
        # salted (the default): every request got its prompt, the salt line's tokens added
        reqs = doc["points"][0]["requests"]
        assert len(reqs) == 4
        assert all(r["prompt_tokens"] == r["prompt_tokens_ours"] for r in reqs)
        assert all(r["prompt_tokens"] > r["recorded_prompt_tokens"] for r in reqs)
        assert all(r["cached_tokens"] <= r["ceiling_tokens"] for r in reqs)
    assert manifests[0] == manifests[1] and len(manifests[0]) == 4
    # salted: one note per run that the cross-session sharing of global ids is kept apart
    notes = capsys.readouterr().err.strip().splitlines()
    assert (
        notes
        == [
            f"agentload: note: {trace}: its block ids are shared across sessions (mooncake); "
            "the salt keeps each session's prefix cache apart, --salt-at off replays that sharing"
        ]
        * 3
    )
    assert all(manifests[0][k] != manifests[2][k] for k in manifests[0])
