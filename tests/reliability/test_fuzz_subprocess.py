"""Every command and every file reader, in a subprocess, on inputs hypothesis damages.

Each case runs ``python -m agentload ARGV`` in its own process under a 2 GiB address-space cap
(``RLIMIT_AS``) and a 60 s wall cap, with API keys in its environment, and asserts what
docs/reliability.md promises whatever the input:

* the exit code is 0, 1 or 2; exit 2 is one ``agentload: error: ...`` line on stderr (after at
  most the documented ``agentload: warning:`` lines, e.g. about a URL's user:password);
* no traceback and no MemoryError anywhere, and no run past the wall cap;
* no planted secret (environment keys, a URL's userinfo and query values, the credentials in a
  trace header's ``endpoint``) in stdout, stderr or any file the command wrote (``.zst``
  inflated before the search);
* no input file changed, also when ``-o`` names the input.

Inputs: damaged versions of small valid files (a trace, each ``trace import`` format,
results.json, eval.json, a scenario, a simulator profile): truncated, bytes flipped, values
replaced by huge numbers, nulls, wrong types, deep nesting or long strings, keys dropped, lines
duplicated, very long lines, random bytes; and special paths (``/dev/zero``, ``/dev/full``,
``/proc``, a FIFO, a directory, a 5,000-character path, the input itself as output). Anything
that would send load points at a closed 127.0.0.1 port, anything that would listen is given a
port this module holds, so every case ends at once. Examples are fixed (``derandomize``) and
not shrunk: a failure names the exact argv and input.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
import zstandard
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))
from faultserver import FaultPlan, FaultServer
from fuzz_strategies import (
    FILE,
    VALUE,
    YAML_VALUE,
    argv_value,
    closed_port,
    damaged_doc,
    damaged_lines,
)
from replay_traces import Shape, agentic_trace

MEM_CAP = 2 * 1024**3
TIME_CAP_S = 60.0
EXIT_CODES = {0, 1, 2}
PARALLEL = 2
"""Cases of one example run at once (the machine may have two cores)."""


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        phases=(Phase.explicit, Phase.generate),
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# -- secrets -----------------------------------------------------------------------------------
ENV_SECRETS = {"AGENTLOAD_API_KEY": "zq_4e1f0c9a7b3d52e8a6f1", "OPENAI_API_KEY": "zq_b7d2e95c01a4f"}
URL_TOKEN = "zqtok8c3e1a9f5d7b2046"
URL_PASSWORD = "zqpw5a0d9e3c7f1b8e24"
QUERY_TOKEN = "zqq2f6b8d4a1e9c30751"
FILE_PASSWORD = "zqfp91c4e7a2d5b8f036"
FILE_TOKEN = "zqft3b6e9d2a5c8f1047"
SECRETS = (*ENV_SECRETS.values(), URL_TOKEN, URL_PASSWORD, QUERY_TOKEN, FILE_PASSWORD, FILE_TOKEN)
FILE_ENDPOINT = f"http://agent:{FILE_PASSWORD}@10.0.0.1:8000/v1?token={FILE_TOKEN}&api-version=1"
"""A header/config ``endpoint`` with credentials, planted inside input files."""

DEAD_PORT = closed_port()


def url(form: str, port: int = DEAD_PORT) -> str:
    host = f"127.0.0.1:{port}"
    return {
        "plain": f"http://{host}/v1",
        "token": f"http://{URL_TOKEN}@{host}/v1",
        "password": f"http://u:{URL_PASSWORD}@{host}/v1",
        "query": f"http://{host}/v1?token={QUERY_TOKEN}&api-version=1",
        "all": f"http://u:{URL_PASSWORD}@{host}/v1?api_key={QUERY_TOKEN}&api-version=1",
    }[form]


URL_FORMS = ["plain", "token", "password", "query", "all"]
DEAD_URL = st.sampled_from(URL_FORMS).map(url)
"""An endpoint on a port nobody listens on, with a secret in its userinfo or query."""


# -- running -----------------------------------------------------------------------------------
def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM_CAP, MEM_CAP))


@dataclass
class Case:
    argv: list[str]
    inputs: list[Path] = field(default_factory=list)
    """Files (or directories) the command reads: none may change."""
    note: str = ""
    """What the input is, for the failure message."""


@dataclass
class Outcome:
    case: Case
    code: int
    out: str
    err: str
    wall_s: float
    timed_out: bool

    def shown(self) -> str:
        return (
            f"argv={self.case.argv!r}\ninput: {self.case.note}\nexit {self.code} after "
            f"{self.wall_s:.1f}s\nstdout={self.out[-3000:]!r}\nstderr={self.err[-3000:]!r}"
        )


@dataclass
class Box:
    """One example's directories: ``work`` is the commands' cwd and where outputs go (searched
    for secrets), ``inputs`` holds the inputs (hashed), ``logs`` the captured output."""

    root: Path
    work: Path
    inputs: Path
    logs: Path
    env: dict[str, str]

    def input(self, name: str, data: bytes) -> Path:
        path = self.inputs / name
        path.write_bytes(data)
        return path


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "KEY" not in k and "TOKEN" not in k}
    env.update(ENV_SECRETS)
    env.update(TMPDIR=str(tmp), NO_COLOR="1", COLUMNS="120", PYTHONDONTWRITEBYTECODE="1")
    return env


@pytest.fixture
def boxes(tmp_path: Path) -> Callable[[], Box]:
    """``boxes()``: a fresh Box per hypothesis example (tmp_path is shared by all of them)."""

    def make() -> Box:
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        parts = [root / name for name in ("work", "inputs", "logs", "work/.tmp")]
        for part in parts:
            part.mkdir()
        return Box(root, parts[0], parts[1], parts[2], _env(parts[3]))

    return make


def _digest(path: Path) -> str | None:
    """The content of a regular file or a directory tree; None for anything else."""
    h = hashlib.sha256()
    try:
        if path.is_symlink() or path.is_file():
            h.update(path.read_bytes())
        elif path.is_dir():
            for sub in sorted(path.rglob("*")):
                h.update(str(sub.relative_to(path)).encode())
                if sub.is_file() and not sub.is_symlink():
                    h.update(sub.read_bytes())
        else:
            return None
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return h.hexdigest()


def _start(case: Case, box: Box, index: int) -> tuple[subprocess.Popen[bytes], float]:
    with (
        (box.logs / f"{index}.out").open("wb") as out,
        (box.logs / f"{index}.err").open("wb") as err,
    ):
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentload", *case.argv],
            cwd=box.work,
            env=box.env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            preexec_fn=_limit_memory,
            start_new_session=True,
        )
    return proc, time.monotonic()


def run_cases(box: Box, cases: Sequence[Case]) -> list[Outcome]:
    """Run ``cases`` (at most PARALLEL at once) and check every promise of the module
    docstring; returns the outcomes for further checks."""
    inputs = {p for case in cases for p in case.inputs}
    before = {p: _digest(p) for p in inputs}
    pending = list(enumerate(cases))
    running: dict[int, tuple[subprocess.Popen[bytes], float]] = {}
    done: dict[int, tuple[int, float, bool]] = {}
    while pending or running:
        while pending and len(running) < PARALLEL:
            index, case = pending.pop(0)
            running[index] = _start(case, box, index)
        time.sleep(0.02)
        for index, (proc, t0) in list(running.items()):
            code = proc.poll()
            wall = time.monotonic() - t0
            if code is None and wall <= TIME_CAP_S:
                continue
            if code is None:  # past the wall cap: the whole group goes
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
            done[index] = (code, wall, wall > TIME_CAP_S)
            del running[index]
    outcomes = []
    for index, case in enumerate(cases):
        code, wall, timed_out = done[index]
        out = (box.logs / f"{index}.out").read_text("utf-8", "replace")
        err = (box.logs / f"{index}.err").read_text("utf-8", "replace")
        outcomes.append(Outcome(case, code, out, err, wall, timed_out))
    for outcome in outcomes:
        check(outcome)
    for path in inputs:
        after = _digest(path)
        assert after == before[path], f"input {path} changed ({before[path]} -> {after})"
    written = _written_text(box.work, inputs)
    for name, data in written.items():
        for secret in SECRETS:
            assert secret.encode() not in data, (
                f"{secret} written to {name}:\n{data[-2000:]!r}\n"
                + "\n".join(o.shown() for o in outcomes)
            )
    return outcomes


def check(outcome: Outcome) -> None:
    """The promises about one process's exit and output."""
    shown = outcome.shown()
    assert not outcome.timed_out, f"ran past {TIME_CAP_S:.0f}s\n{shown}"
    both = outcome.out + outcome.err
    assert "Traceback" not in both, shown
    assert "MemoryError" not in both, shown
    assert outcome.code in EXIT_CODES, shown
    for secret in SECRETS:
        assert secret not in both, f"{secret} shown\n{shown}"
    if outcome.code == 2:
        lines = [line for line in outcome.err.splitlines() if line.strip()]
        errors = [line for line in lines if not line.startswith("agentload: warning: ")]
        assert len(errors) == 1, shown
        assert errors[0] == lines[-1] and errors[0].startswith("agentload: error: "), shown


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _written_text(work: Path, inputs: set[Path]) -> dict[str, bytes]:
    """Every regular file under ``work`` that is not an input, ``.zst`` inflated (bounded)."""
    skip = {key for key in map(_stat, inputs) if key is not None}
    found: dict[str, bytes] = {}
    for folder, dirs, files in os.walk(work):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file() or _stat(path) in skip:
                continue
            data = path.read_bytes()[: 64 << 20]
            if name.endswith(".zst"):
                try:
                    reader = zstandard.ZstdDecompressor().stream_reader(
                        data, read_across_frames=True
                    )
                    data += reader.read(64 << 20)
                except zstandard.ZstdError:
                    pass
            found[str(path)] = data
        dirs[:] = [d for d in dirs if not (Path(folder) / d).is_symlink()]
    return found


# -- valid inputs ------------------------------------------------------------------------------
S_NS = 1_000_000_000


def _tracelab_rows() -> list[dict[str, Any]]:
    def ts(seconds: int) -> str:
        return f"2025-10-01T12:00:{seconds:02d}Z"

    def row(index: int, n_in: int, prefix: int, events: list[tuple[str, int]]) -> dict[str, Any]:
        return {
            "session_id": "claude:s1",
            "round_index": index,
            "input_tokens_total": n_in,
            "prefix_tokens": prefix,
            "newly_append_tokens": n_in - prefix,
            "output_tokens": 20,
            "reasoning_output_tokens": None,
            "model": "claude-sonnet",
            "timing_events": [{"event_type": k, "timestamp": ts(t)} for k, t in events],
            "tools": [{"tool_name": "Bash", "tool_wall_latency_ms": 500}],
            "first_input_event_type": events[0][0],
            "provider": "claude",
        }

    return [
        row(0, 1000, 0, [("user_message", 0), ("text", 3), ("tool_call", 4)]),
        row(1, 1500, 1000, [("tool_result", 6), ("text", 8)]),
    ]


def _eval_doc() -> dict[str, Any]:
    from agentload.evals.results import Attempt, build_eval

    attempt = Attempt(
        session="s0", task="t", attempt=0, passed=True, end_reason="done", wall_s=1.0,
        prompt_tokens=10, completion_tokens=5, calls=2, tool_calls=1, tool_s=0.5, suite=None,
    )  # fmt: skip
    doc = build_eval(
        [attempt], {"t": ("pkg", "bug")}, mode="model", k=1, wall_s=2.0, endpoint=FILE_ENDPOINT,
        model="m", scenario="quick", seed=0, parallel=1, trace="t.agentload.jsonl.zst",
    )  # fmt: skip
    data: dict[str, Any] = doc.model_dump(by_alias=True, mode="json")
    return data


@dataclass
class Corpus:
    """Small valid inputs (secrets planted where a file holds an endpoint) and the outcomes of
    the commands that made some of them."""

    trace: bytes
    """A two-session trace whose header ``endpoint`` carries FILE_ENDPOINT's credentials."""
    weka: bytes
    mooncake: bytes
    tracelab: bytes
    results: bytes
    eval: bytes
    scenario: bytes
    profile: bytes
    made_by: list[Outcome]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("corpus")
    shape = Shape(tool_gap_s=0.02, child_gap_s=0.02, post_gap_s=0.01, system_words=20)
    clean = agentic_trace(root / "clean.agentload.jsonl", sessions=2, shape=shape)
    lines = clean.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["endpoint"] = FILE_ENDPOINT
    trace = json.dumps(header).encode() + b"\n" + b"".join(lines[1:])
    box = Box(root, root / "work", root / "in", root / "logs", _env(root))
    for part in (box.work, box.inputs, box.logs):
        part.mkdir()
    srv = FaultServer(FaultPlan(chat=["ok"])).start()
    try:
        replay = ["replay", str(clean), "--endpoint", url("all", srv.port)]
        replay += ["--model", "fault-model", "--out", "res", "--start-at", "zero"]
        replay += ["--gap-scale", "0", "--sessions", "2", "--timeout", "10"]
        made_by = run_cases(
            box,
            [
                Case(replay, [clean], "the clean trace, a live endpoint"),
                Case(["trace", "export", "weka", str(clean), "-o", "weka"], [clean], "clean"),
                Case(["trace", "export", "mooncake", str(clean), "-o", "mc.jsonl"], [clean]),
            ],
        )
    finally:
        srv.stop()
    for outcome in made_by:
        assert outcome.code == 0, outcome.shown()
    results = json.loads((box.work / "res" / "results.json").read_bytes())
    results["config"]["endpoint"] = FILE_ENDPOINT
    profile = Path(__file__).parents[2] / "agentload/endpoint/timing/profiles/instant.yaml"
    return Corpus(
        trace=trace,
        weka=sorted((box.work / "weka").iterdir())[0].read_bytes(),
        mooncake=(box.work / "mc.jsonl").read_bytes(),
        tracelab=b"".join(json.dumps(r).encode() + b"\n" for r in _tracelab_rows()),
        results=json.dumps(results).encode(),
        eval=json.dumps(_eval_doc()).encode(),
        scenario=b"extends: quick\nname: fuzz\nseed: 3\nsessions: 1\n",
        profile=profile.read_bytes(),
        made_by=made_by,
    )


@pytest.fixture(scope="module")
def inputs(corpus: Corpus) -> Callable[[], Corpus]:
    """``corpus`` behind a call: hypothesis tests take this (given the Corpus itself as an
    argument, hypothesis 6.170 reports a failure as FlakyStrategyDefinition)."""
    return lambda: corpus


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    """A port this module listens on (never accepts): ``serve`` there cannot start."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


@st.composite
def trace_file(draw: st.DrawFn, trace: bytes) -> tuple[str, bytes, str]:
    """(file name, bytes, description): the trace damaged, as .jsonl or .jsonl.zst."""
    data, note = draw(
        st.one_of(
            *[damaged_lines(trace)] * 5,
            st.binary(max_size=500).map(lambda b: (b, f"random bytes {b!r:.60}")),
        )
    )
    form = draw(st.sampled_from(["jsonl", "zst", "zst", "zst-damaged", "zst-as-jsonl"]))
    if form == "zst":
        return "t.agentload.jsonl.zst", _zst(data), note + ", compressed"
    if form == "zst-damaged":
        packed = bytearray(_zst(data))
        at = draw(st.integers(0, max(len(packed) - 1, 0)))
        cut = draw(st.booleans())
        if packed:
            packed[at] ^= 0x5A
        body = bytes(packed[:at] if cut else packed)
        return "t.agentload.jsonl.zst", body, f"{note}, compressed, then byte {at} damaged"
    if form == "zst-as-jsonl":
        return "t.agentload.jsonl", _zst(data), note + ", compressed but named .jsonl"
    return "t.agentload.jsonl", data, note


# -- the trace readers -------------------------------------------------------------------------
def _trace_cases(path: Path, valid: Path) -> list[list[str]]:
    """Every command that reads a trace, on ``path``."""
    p = str(path)
    return [
        ["trace", "validate", p],
        ["trace", "stats", p, "--json"],
        ["trace", "stats", p, "--plot", "plot.png"],
        ["trace", "stats", p, "--compare", str(valid), "--labels", "a,b"],
        ["trace", "inspect", p, "--call", "0"],
        ["trace", "inspect", p, "--agent", "s1-orch"],
        ["trace", "export", "mooncake", p, "-o", "mc.jsonl"],
        ["trace", "export", "otel", p, "-o", "otel.json", "--content"],
        ["trace", "export", "weka", p, "-o", "weka"],
        ["trace", "redact", p, "-o", "r.agentload.jsonl.zst", "--hash-tool-names"],
        ["replay", p, "--endpoint", url("all"), "--model", "m", "--out", "res"],
        ["replay", p, "--endpoint", url("query"), "--model", "m", "--start-at", "zero"],
    ]


@_settings(14)
@given(data=st.data())
def test_damaged_traces(
    data: st.DataObject, inputs: Callable[[], Corpus], boxes: Callable[[], Box]
) -> None:
    corpus = inputs()
    box = boxes()
    name, body, note = data.draw(trace_file(corpus.trace), label="trace")
    path = box.input(name, body)
    valid = box.input("valid.agentload.jsonl", corpus.trace)
    every = _trace_cases(path, valid)
    picks = data.draw(
        st.lists(st.integers(0, len(every) - 1), min_size=2, max_size=3, unique=True),
        label="commands",
    )
    run_cases(box, [Case(every[i], [path, valid], f"{name}: {note}") for i in picks])
    shutil.rmtree(box.root)


def test_valid_inputs_and_the_commands_that_made_them(
    corpus: Corpus, boxes: Callable[[], Box]
) -> None:
    """The undamaged trace through every reader (exit 0 everywhere but the dead endpoint), and
    a replay against a live endpoint (the fixture's) with every secret planted."""
    assert [o.code for o in corpus.made_by] == [0, 0, 0]
    box = boxes()
    path = box.input("t.agentload.jsonl.zst", _zst(corpus.trace))
    valid = box.input("valid.agentload.jsonl", corpus.trace)
    outcomes = run_cases(box, [Case(argv, [path, valid]) for argv in _trace_cases(path, valid)])
    codes = [o.code for o in outcomes]
    assert codes == [0] * 10 + [2, 2], "\n".join(o.shown() for o in outcomes)


# -- trace import ------------------------------------------------------------------------------
@_settings(12)
@given(data=st.data())
def test_import_formats(
    data: st.DataObject, inputs: Callable[[], Corpus], boxes: Callable[[], Box]
) -> None:
    corpus = inputs()
    box = boxes()
    fmt = data.draw(st.sampled_from(["weka", "tracelab", "mooncake"]), label="format")
    source = data.draw(
        st.sampled_from([fmt, fmt, fmt, "weka", "tracelab", "mooncake", "trace"]), label="source"
    )
    valid = {
        "weka": corpus.weka,
        "tracelab": corpus.tracelab,
        "mooncake": corpus.mooncake,
        "trace": corpus.trace,
    }[source]
    strategy = damaged_doc(valid) if source == "weka" else damaged_lines(valid)
    body, note = data.draw(strategy, label="damage")
    name = "conv.json" if source == "weka" else "src.jsonl"
    path = box.input(name, body)
    inputs = [path]
    if fmt == "weka" and data.draw(st.booleans(), label="as a directory"):
        folder = box.inputs / "convs"
        folder.mkdir()
        path = Path(shutil.move(path, folder / name)).parent
        inputs = [path]
    out = data.draw(st.sampled_from(["fresh", "fresh", "input", "existing"]), label="output")
    argv = ["trace", "import", fmt, str(path), "-o"]
    if out == "input":
        argv.append(str(inputs[0]))
    elif out == "existing":
        argv.append(str(box.input("old.agentload.jsonl.zst", b"old")))
        inputs.append(box.inputs / "old.agentload.jsonl.zst")
    else:
        argv.append("imported.agentload.jsonl.zst")
    if data.draw(st.booleans(), label="--force"):
        argv.append("--force")
    outcomes = run_cases(box, [Case(argv, inputs, f"{source} as {fmt}: {note}")])
    if out == "input":
        assert outcomes[0].code == 2, outcomes[0].shown()
    shutil.rmtree(box.root)


# -- results.json, eval.json: compare and report -------------------------------------------------
@_settings(10)
@given(data=st.data())
def test_results_files(
    data: st.DataObject, inputs: Callable[[], Corpus], boxes: Callable[[], Box]
) -> None:
    corpus = inputs()
    box = boxes()
    kind = data.draw(st.sampled_from(["results", "eval"]), label="kind")
    valid = corpus.results if kind == "results" else corpus.eval
    body, note = data.draw(damaged_doc(valid), label="damage")
    folder = box.inputs / "run"
    folder.mkdir()
    damaged = folder / f"{kind}.json"
    damaged.write_bytes(body)
    good = box.input(f"{kind}.json", valid)
    a = data.draw(st.sampled_from([damaged, folder]), label="file or folder")
    cases = [
        Case(["compare", str(a), str(good)], [damaged, good], f"{kind}.json: {note}"),
        Case(["compare", str(good), str(a)], [damaged, good], f"{kind}.json: {note}"),
    ]
    if kind == "results":
        report = ["report", str(a), "--out", "report"]
        cases[1] = Case(report, [damaged], f"results.json: {note}")
    run_cases(box, cases)
    shutil.rmtree(box.root)


# -- scenarios and profiles --------------------------------------------------------------------
_KEYS = ["seed", "sessions", "wall_budget_s", "context_target", "orchestrator.max_rounds",
         "sandbox", "subagents", "extends", "name", "endpoint", "workspace", "tool_timeouts_s"]  # fmt: skip


@st.composite
def yaml_file(draw: st.DrawFn, valid: bytes) -> tuple[bytes, str]:
    """A scenario or profile: random/ill-shaped (fuzz_strategies.FILE), or the valid one with
    one key set to a hostile value (YAML of any shape, or a huge number)."""
    if draw(st.booleans()):
        data = draw(FILE)
        return data, f"{data!r:.100}"
    doc = yaml.safe_load(valid)
    key = draw(st.sampled_from([*_KEYS, *doc]))
    value = draw(st.one_of(YAML_VALUE, st.sampled_from([10**30, -1, 1e300, None, "x" * 10_000])))
    doc[key] = value
    return yaml.safe_dump(doc).encode(), f"{key}: {value!r:.80}"


@_settings(10)
@given(data=st.data())
def test_scenario_and_profile_files(
    data: st.DataObject, inputs: Callable[[], Corpus], boxes: Callable[[], Box], busy_port: int
) -> None:
    corpus = inputs()
    box = boxes()
    scenario_body, scenario_note = data.draw(yaml_file(corpus.scenario), label="scenario")
    profile_body, profile_note = data.draw(yaml_file(corpus.profile), label="profile")
    scenario = box.input("s.yaml", scenario_body)
    profile = box.input("p.yaml", profile_body)
    command = data.draw(st.sampled_from(["generate", "eval"]), label="command")
    load = [command, "-s", str(scenario), "--endpoint", data.draw(DEAD_URL), "-o", "traces"]
    serve = ["serve", "--profile", str(profile), "--host", "127.0.0.1", "--port", str(busy_port)]
    run_cases(
        box,
        [
            Case(["scenarios", "show", str(scenario)], [scenario], f"scenario {scenario_note}"),
            Case(load, [scenario], f"scenario {scenario_note}"),
            Case(serve, [profile], f"profile {profile_note}"),
        ],
    )
    shutil.rmtree(box.root)


# -- special paths -----------------------------------------------------------------------------
SPECIAL_INPUTS = ["/dev/zero", "/dev/full", "/dev/null", "/proc/x", "/proc/self/environ",
                  "fifo", "dir", "empty dir", "long", "missing", "symlink", "valid", "", "-"]  # fmt: skip
SPECIAL_OUTPUTS = ["/dev/full", "/dev/null", "/proc/x", "fifo", "dir", "long", "input",
                   "./input", "symlink to input", "hardlink to input", "existing", "fresh"]  # fmt: skip
COMMANDS = {  # argv with IN and OUT in place; the kind of valid input it reads
    "trace validate": (["trace", "validate", "IN"], "trace"),
    "trace stats": (["trace", "stats", "IN", "--plot", "OUT"], "trace"),
    "trace stats --compare": (["trace", "stats", "VALID", "--compare", "IN"], "trace"),
    "trace inspect": (["trace", "inspect", "IN"], "trace"),
    "trace export mooncake": (["trace", "export", "mooncake", "IN", "-o", "OUT"], "trace"),
    "trace export otel": (["trace", "export", "otel", "IN", "-o", "OUT"], "trace"),
    "trace export weka": (["trace", "export", "weka", "IN", "-o", "OUT"], "trace"),
    "trace redact": (["trace", "redact", "IN", "-o", "OUT"], "trace"),
    "trace import mooncake": (["trace", "import", "mooncake", "IN", "-o", "OUT"], "mooncake"),
    "trace import tracelab": (["trace", "import", "tracelab", "IN", "-o", "OUT"], "tracelab"),
    "trace import weka": (["trace", "import", "weka", "IN", "-o", "OUT"], "weka"),
    "replay": (["replay", "IN", "--endpoint", url("all"), "--model", "m", "--out", "OUT"], "trace"),
    "compare": (["compare", "IN", "VALID"], "results"),
    "report": (["report", "IN", "--out", "OUT"], "results"),
    "scenarios show": (["scenarios", "show", "IN"], "scenario"),
    "generate": (["generate", "-s", "IN", "--endpoint", url("token"), "-o", "OUT"], "scenario"),
    "serve": (["serve", "--profile", "IN", "--port", "BUSY"], "profile"),
    "record": (
        [
            "record",
            "--upstream",
            url("all"),
            "--listen",
            "127.0.0.1:0",
            "--idle-timeout",
            "0.1",
            "-o",
            "OUT",
        ],
        "none",
    ),
}


def _special(kind: str, box: Box, valid: Path) -> Path:
    """The path ``kind`` of SPECIAL_INPUTS/SPECIAL_OUTPUTS (``valid``: the command's valid
    input), made where it must exist."""
    made = {
        "dir": box.inputs / "a-dir",
        "empty dir": box.inputs / "empty",
        "fifo": box.inputs / "fifo",
        "long": box.work / ("x" * 5000),
        "missing": box.inputs / "missing.agentload.jsonl",
        "symlink": box.inputs / f"link-{valid.name}",
        "input": valid,
        "./input": Path(os.path.relpath(valid, box.work)),
        "symlink to input": box.work / f"to-{valid.name}",
        "hardlink to input": box.work / f"hard-{valid.name}",
        "existing": box.work / "existing.out",
        "fresh": box.work / "new.out",
    }
    path = made.get(kind, Path(kind))
    if kind in ("long", "missing") or kind.startswith("/") or kind in ("", "-"):
        return path
    if path.exists() or path.is_symlink():
        return path
    if kind in ("dir", "empty dir"):
        path.mkdir()
        if kind == "dir":
            (path / valid.name).write_bytes(valid.read_bytes())
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("symlink", "symlink to input"):
        path.symlink_to(valid)
    elif kind == "hardlink to input":
        os.link(valid, path)
    elif kind == "existing":
        path.write_bytes(b"old")
    return path


_SAFE_OUTPUTS = ("trace import", "trace export mooncake", "trace export otel", "trace redact")
"""The commands whose output is never an input and never replaced without --force
(docs/reliability.md, "Output files")."""


@_settings(16)
@given(data=st.data())
def test_special_paths(
    data: st.DataObject, inputs: Callable[[], Corpus], boxes: Callable[[], Box], busy_port: int
) -> None:
    corpus = inputs()
    box = boxes()
    command = data.draw(st.sampled_from(sorted(COMMANDS)), label="command")
    template, kind = COMMANDS[command]
    samples = {"trace": ("t.agentload.jsonl.zst", _zst(corpus.trace)),
               "mooncake": ("mc.jsonl", corpus.mooncake), "tracelab": ("tl.jsonl", corpus.tracelab),
               "weka": ("conv.json", corpus.weka), "results": ("results.json", corpus.results),
               "scenario": ("s.yaml", corpus.scenario), "profile": ("p.yaml", corpus.profile),
               "none": ("none.txt", b"")}  # fmt: skip
    valid = box.input(*samples[kind])
    inputs = [valid]
    in_kind = "valid"
    if "IN" in template:
        in_kind = data.draw(st.sampled_from(SPECIAL_INPUTS), label="input")
    out_kind = "-"
    if "OUT" in template:
        out_kind = data.draw(st.sampled_from(SPECIAL_OUTPUTS), label="output")
        if in_kind not in ("valid", "symlink") and data.draw(st.booleans(), label="plain out"):
            out_kind = "fresh"  # one special path at a time, often
    path_in = valid if in_kind == "valid" else _special(in_kind, box, valid)
    path_out = _special(out_kind, box, valid)
    if in_kind in ("dir", "empty dir"):
        inputs.append(path_in)
    force = any(command.startswith(c) for c in _SAFE_OUTPUTS) and data.draw(st.booleans())
    if out_kind == "existing" and not force and any(command.startswith(c) for c in _SAFE_OUTPUTS):
        inputs.append(path_out)
    fill = {"IN": str(path_in), "OUT": str(path_out), "VALID": str(valid), "BUSY": str(busy_port)}
    argv = [fill.get(arg, arg) for arg in template] + ["--force"] * force
    note = f"{command}: input {in_kind!r}, output {out_kind!r}"
    run_cases(box, [Case(argv, inputs, note)])
    shutil.rmtree(box.root)


# -- options of the commands test_cli_fuzz.py does not draw --------------------------------------
OPTIONS: dict[str, tuple[list[str], list[str]]] = {
    "record": (
        ["record", "--upstream", "URL", "--idle-timeout", "0.1", "-o", "traces"],
        ["--listen", "--session-header", "--agent-header", "--max-sessions", "--tokenizer"],
    ),
    "serve": (
        ["serve", "--host", "127.0.0.1", "--port", "BUSY"],
        ["--model", "--seed", "--profile", "--ssl-certfile", "--ssl-keyfile"],
    ),
    "stats": (["trace", "stats", "TRACE"], ["--labels", "--tolerance", "--compare", "--plot"]),
    "inspect": (["trace", "inspect", "TRACE"], ["--agent", "--call"]),
    "redact": (["trace", "redact", "TRACE", "-o", "r.agentload.jsonl.zst"], ["--salt-env"]),
    "export otel": (["trace", "export", "otel", "TRACE"], ["--otlp-endpoint", "-o"]),
    "report": (["report", "RESULTS"], ["--out"]),
    "compare": (["compare", "RESULTS"], []),
    "scenarios tasks": (["scenarios", "tasks"], ["--jobs", "--json"]),
    "sandbox build": (["sandbox", "build"], ["--tag"]),
    "import": (["trace", "import"], []),
    "export": (["trace", "export"], []),
}


@functools.cache
def _docker_answers() -> bool:
    """Whether a Docker daemon answers here: then ``sandbox build`` would build an image and
    ``sandbox cleanup`` could remove other runs' containers, so neither runs."""
    from agentload.sandboxes.docker_host import connect_docker

    try:
        connect_docker(timeout=2).close()
    except Exception:
        return False
    return True


@_settings(12)
@given(data=st.data())
def test_options(
    data: st.DataObject, inputs: Callable[[], Corpus], boxes: Callable[[], Box], busy_port: int
) -> None:
    corpus = inputs()
    box = boxes()
    commands = [c for c in sorted(OPTIONS) if c != "sandbox build" or not _docker_answers()]
    command = data.draw(st.sampled_from(commands), label="command")
    template, names = OPTIONS[command]
    trace = box.input("t.agentload.jsonl", corpus.trace)
    results = box.input("results.json", corpus.results)
    fill = {"URL": data.draw(DEAD_URL), "BUSY": str(busy_port), "TRACE": str(trace)}
    argv = [fill.get(arg, str(results) if arg == "RESULTS" else arg) for arg in template]
    opts = data.draw(
        st.lists(st.tuples(st.sampled_from(names or ["-"]), VALUE), max_size=3), label="options"
    )
    for name, value in opts:
        argv += [argv_value(value)] if name == "-" else [name, argv_value(value)]
    run_cases(box, [Case(argv, [trace, results], f"{command} options")])
    shutil.rmtree(box.root)


# -- every command once: help, listings, secrets in every URL option -----------------------------
def test_every_command_answers(boxes: Callable[[], Box], busy_port: int) -> None:
    box = boxes()
    argvs: list[list[str]] = [
        [], ["--version"], ["--help"], ["nope"], ["trace"], ["trace", "nope"], ["scenarios", "list"],
        ["scenarios", "tasks", "--json"], ["scenarios", "tasks", "--check", "nope"],
        ["sandbox"], ["trace", "import", "nope", "x", "-o", "y"],
        ["generate", "--endpoint", url("all"), "-s", "quick", "-o", "traces"],
        ["eval", "--endpoint", url("token"), "-s", "quick", "-o", "evals"],
        ["serve", "--port", str(busy_port), "--require-api-key"],
        ["record", "--upstream", url("all"), "--listen", "127.0.0.1:0", "--idle-timeout", "0.1"],
        ["record", "--upstream", url("password"), "--listen", f"127.0.0.1:{busy_port}"],
    ]  # fmt: skip
    if not _docker_answers():
        argvs += [["sandbox", "build", "--tag", "agentload-fuzz:never"], ["sandbox", "cleanup"]]
    outcomes = run_cases(box, [Case(argv) for argv in argvs])
    for outcome in outcomes:
        if outcome.case.argv[:1] in (["generate"], ["eval"], ["serve"]):
            assert outcome.code == 2, outcome.shown()
    shutil.rmtree(box.root)


@_settings(8)
@given(endpoint=DEAD_URL, where=st.sampled_from(["generate", "eval", "replay", "otlp", "record"]))
def test_secrets_in_urls(
    endpoint: str, where: str, inputs: Callable[[], Corpus], boxes: Callable[[], Box]
) -> None:
    corpus = inputs()
    box = boxes()
    trace = box.input("t.agentload.jsonl", corpus.trace)
    argv = {
        "generate": ["generate", "--endpoint", endpoint, "-o", "traces", "-n", "2"],
        "eval": ["eval", "--endpoint", endpoint, "-o", "evals", "-s", "quick"],
        "replay": ["replay", str(trace), "--endpoint", endpoint, "--model", "m",
                   "--scrape-metrics", endpoint, "--out", "res"],
        "otlp": ["trace", "export", "otel", str(trace), "--otlp-endpoint", endpoint],
        "record": ["record", "--upstream", endpoint, "--listen", "127.0.0.1:0",
                   "--idle-timeout", "0.1", "-o", "traces"],
    }[where]  # fmt: skip
    run_cases(box, [Case(argv, [trace], "the trace's header endpoint has credentials")])
    shutil.rmtree(box.root)
