"""A generate run: N sessions, K at a time, one trace file, the endpoint (default: simulator).

    result = await generate(GenerateOptions(scenario=..., sessions=8, levels=[8]), progress)

* Endpoint: ``--endpoint URL`` (checked with ``GET /models`` first: unreachable → one-line
  error), else the built-in simulator with the scenario's profile, in a child process (its
  CPU work then does not compete with the agents' for one interpreter lock).
* Sessions: session ``i`` has id ``s{seed}-{i}`` and seed ``seed + i``; each gets its own
  workspace copy and sandbox.
* Trace: one file per run holding every session, ``OUT/{scenario}-seed{seed}-{UTC time}
  .agentload.jsonl.zst``; its header carries the resolved scenario, its hash and the seed.
  ``--out`` naming a ``*.agentload.jsonl[.zst]`` file is that file (it must not exist yet);
  anything else is a directory, created if missing. Both are checked (a file can be created
  there) before the endpoint is contacted, so a bad ``--out`` is one line at once.
* Time limits: every call attempt gets ``call_timeout_s`` (the ``/models`` probe
  ``min(call_timeout_s, 10)``), ``retries`` retries.
* Token unit: before the sessions, ``generate.calibrate`` measures the server/ours token ratio
  (one small text completion, within ``min(call_timeout_s, 120)``); the header records it and
  every session sizes and limits its orchestrator in server tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentload.agents.llm import ChatClient
from agentload.agents.tracing import SessionStats
from agentload.auth import api_key_from_env
from agentload.client.stream import PROBE_TIMEOUT_S, StreamClient
from agentload.errors import ConfigError
from agentload.errortext import clip
from agentload.generate.calibrate import TokenRatio, calibrate
from agentload.generate.options import GenerateOptions, check_options
from agentload.generate.sessions import BuiltinSessions, ProgressSink, SessionPlace, run_sessions
from agentload.masking import redact_url
from agentload.options.engines import get_engine
from agentload.outfile import output_dir, write_errors
from agentload.sandboxes import sandbox_ready
from agentload.sandboxes.tempdirs import WORKSPACES, owned_tempdir
from agentload.tokenizer import ChatTokenCounter
from agentload.trace import make_header
from agentload.trace.capture import CallCapture
from agentload.trace.paths import TRACE_SUFFIXES
from agentload.trace.schema import Header, WaitsInfo
from agentload.trace.writer import TraceWriter

if TYPE_CHECKING:
    pass

__all__ = [
    "ProgressSink",
    "RunResult",
    "RunSpec",
    "calibrated_header",
    "chat_client",
    "check_endpoint",
    "generate",
    "generator_info",
    "modeled_waits",
    "open_endpoint",
    "run_header",
    "run_spec",
]

SIM_MODEL = "agentload-sim"
CALIBRATION_TIMEOUT_S = 120.0
"""The longest the token calibration may take (less when ``--call-timeout`` is less)."""


@dataclass
class RunResult:
    """The run's trace file and every session's counters."""

    trace_path: Path
    sessions: list[SessionStats] = field(default_factory=list)
    wall_ns: int = 0
    endpoint: str = ""
    model: str = ""
    tokens: TokenRatio | None = None
    """The run's server/ours token ratio (``generate.calibrate``)."""
    ray: dict[str, Any] | None = None
    """``--ray``: the cluster and its workers (the trace header's ``generator.ray``)."""
    sandbox: str = ""
    """An agent product's run: the sandbox it ran in and why (``docker: --sandbox docker``)."""


async def check_endpoint(
    base_url: str, model: str | None, timeout_s: float = PROBE_TIMEOUT_S
) -> str:
    """The model to use, by ``GET {base_url}/models`` within ``timeout_s``
    (``agentload.client.probe.model_to_use``: replay's probe); one-line errors when it cannot
    work."""
    http = StreamClient(base_url, api_key=api_key_from_env(), timeout_s=timeout_s)
    try:
        return await http.model_to_use(model)
    finally:
        await http.aclose()


async def endpoint_simulator(
    base_url: str, model: str | None, timeout_s: float = PROBE_TIMEOUT_S
) -> str | None:
    """The profile of agentload's own simulator when ``base_url`` is one (``agentload serve``:
    its timings are a profile's, not hardware's), else None (``probe.simulator_profile``)."""
    http = StreamClient(base_url, api_key=api_key_from_env(), timeout_s=timeout_s)
    try:
        return await http.simulator_profile(model)
    finally:
        await http.aclose()


@contextlib.asynccontextmanager
async def open_endpoint(opts: GenerateOptions, seed: int) -> AsyncIterator[tuple[str, str]]:
    if opts.endpoint:
        probe_s = min(PROBE_TIMEOUT_S, opts.call_timeout_s)
        model = await check_endpoint(opts.endpoint, opts.model, probe_s)
        yield opts.endpoint, model
        return
    srv: Any
    from agentload.generate.simproc import scenario_pacing

    profile, model = opts.scenario.endpoint.profile, opts.model or SIM_MODEL
    pacing = scenario_pacing(opts.scenario)  # the model's own habits, set server-side
    if opts.oracle:
        pacing["oracle"] = True
    if opts.simulator == "process":
        from agentload.generate.simproc import SimulatorProcess

        srv = SimulatorProcess(profile=profile, model=model, seed=seed, pacing=pacing)
    else:
        from agentload.endpoint import SimulatorServer

        srv = SimulatorServer(profile=profile, model=model, seed=seed, policy_overrides=pacing)
    await asyncio.to_thread(srv.start)
    try:
        yield srv.base_url, srv.model
    finally:
        await asyncio.to_thread(srv.stop)


def trace_path(out: Path, scenario: str, seed: int) -> Path:
    """A new trace file name under ``out`` (never overwrites an existing file)."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    base = out / f"{scenario}-seed{seed}-{stamp}"
    path = base.with_name(base.name + TRACE_SUFFIXES[0])
    n = 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}{TRACE_SUFFIXES[0]}")
    return path


def prepare_trace_path(out: Path, scenario: str, seed: int) -> Path:
    """The trace file ``--out`` stands for, its directory created and tried for writing;
    ``ConfigError`` naming ``--out`` when it cannot work (see the module docstring)."""
    named = out.name.endswith(TRACE_SUFFIXES)
    folder = out.parent if named else out
    with write_errors(out, option="--out"):
        if folder.exists() and not folder.is_dir():
            raise ConfigError(
                f"--out {clip(str(out), 200)}: {clip(str(folder), 200)} is a file; --out names "
                f"a directory or a new *{TRACE_SUFFIXES[0]} file"
            )
        if named and out.exists():
            raise ConfigError(
                f"--out {clip(str(out), 200)}: the file exists; agentload never overwrites a trace"
            )
    output_dir(folder, option="--out")
    return out if named else trace_path(out, scenario, seed)


@dataclass(frozen=True)
class RunSpec:
    """One run as asked for: its options, trace file, seed, sandbox kind and start time."""

    opts: GenerateOptions
    path: Path
    seed: int
    kind: str
    t0: int
    """``time.perf_counter_ns()`` when the run began (its ``wall_ns`` counts from there)."""


async def generate(opts: GenerateOptions, progress: ProgressSink | None = None) -> RunResult:
    """Run the sessions (see the module docstring); the trace is closed in every case."""
    if opts.ray is not None:
        raise ConfigError(
            "--ray runs through generate.ray_driver.generate_on_ray, not run.generate"
        )
    spec = run_spec(opts)
    # A missing Docker daemon or image is one line before the endpoint is probed and any
    # session starts, not an error printed after "s0-0: started".
    await asyncio.to_thread(sandbox_ready, spec.kind, opts.scenario.sandbox)
    return await _run(spec, progress)


def run_spec(opts: GenerateOptions) -> RunSpec:
    """The run ``opts`` asks for, its options checked and its trace file's path ready."""
    s = opts.scenario
    check_options(opts)
    seed = s.seed if opts.seed is None else opts.seed
    kind = opts.sandbox or s.sandbox.kind
    t0 = time.perf_counter_ns()
    path = prepare_trace_path(Path(opts.out), s.name, seed)
    return RunSpec(opts, path, seed, kind, t0)


def run_header(
    spec: RunSpec, base_url: str, model: str, tokens: TokenRatio, generator: dict[str, Any]
) -> Header:
    """The run's trace header: the endpoint, the resolved scenario and its hash, the seed, how
    the run was asked for (``generator``) and the token calibration."""
    from agentload.scenarios import scenario_hash

    s = spec.opts.scenario
    return make_header(
        endpoint=base_url,
        model=model,
        scenario=s.name,
        scenario_hash=scenario_hash(s),
        scenario_config=s.model_dump(mode="json"),
        seed=spec.seed,
        generator=generator,
        token_calibration=tokens.record(),
        waits=modeled_waits(spec.opts, spec.seed),
    )


def modeled_waits(opts: GenerateOptions, seed: int) -> WaitsInfo | None:
    """The run's modeled waits (the trace header's ``waits``): the scenario's, when agentload's
    own agents run (they draw them; an agent product keeps its own pace); None otherwise."""
    from agentload.products.registry import product

    waits = opts.scenario.waits
    if waits is None or product(opts.agent) is not None:
        return None
    return WaitsInfo(model=waits, seed=seed, slept=opts.pace == "real")


async def calibrated_header(
    spec: RunSpec, base_url: str, model: str, sessions: int
) -> tuple[TokenRatio, Header]:
    """The run's token ratio, measured against the endpoint, and its trace header."""
    timeout = min(spec.opts.call_timeout_s, CALIBRATION_TIMEOUT_S)
    tokens = await calibrate(base_url, model, spec.opts.scenario, ChatTokenCounter(), timeout)
    generator = generator_info(spec.opts, sessions, spec.kind)
    return tokens, run_header(spec, base_url, model, tokens, generator)


def chat_client(
    opts: GenerateOptions, base_url: str, model: str, api_key: str | None = None
) -> ChatClient:
    """The client agentload's agents call the endpoint with: the run's retries, backoff, call
    timeout and engine preset (``api_key``: given, else the environment's)."""
    return ChatClient(
        base_url,
        model=model,
        api_key=api_key,
        retries=opts.retries,
        backoff_s=opts.retry_backoff_s,
        call_timeout_s=opts.call_timeout_s,
        engine=get_engine(opts.engine) if opts.engine else None,
    )


async def _run(spec: RunSpec, progress: ProgressSink | None) -> RunResult:
    """The run on this machine: the endpoint opened, the ratio measured, the sessions run into
    one trace; the client and the workspaces' folder are closed in every case."""
    opts = spec.opts
    plan = opts.session_plan()
    async with open_endpoint(opts, spec.seed) as (base_url, model):
        tokens, header = await calibrated_header(spec, base_url, model, len(plan))
        result = RunResult(
            trace_path=spec.path, endpoint=redact_url(base_url), model=model, tokens=tokens
        )
        client = chat_client(opts, base_url, model)
        workdir = owned_tempdir(WORKSPACES)  # a kill -9 leaves it to `agentload sandbox cleanup`
        try:
            async with TraceWriter(spec.path, header) as writer:
                place = SessionPlace(opts, plan, spec.seed, workdir, spec.kind)
                capture = CallCapture(writer, ChatTokenCounter(writer.header.tokenizer))
                runner = BuiltinSessions(place, client, writer, capture, tokens.ratio)
                result.sessions = await run_sessions(len(plan), opts.parallel, runner, progress)
        finally:
            await client.aclose()
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    result.wall_ns = time.perf_counter_ns() - spec.t0
    return result


def generator_info(opts: GenerateOptions, sessions: int, kind: str) -> dict[str, Any]:
    """The trace header's ``generator``: how the run was asked for."""
    out: dict[str, Any] = {"sessions": sessions, "parallel": opts.parallel, "sandbox": kind}
    from agentload.products.install import spec_of
    from agentload.products.registry import product

    chosen = product(opts.agent)
    if chosen is not None:
        out["agent"] = chosen.label
        if chosen.installed:
            out["agent_version"] = spec_of(chosen.name.value)
    tasks = opts.task_names()
    if tasks is not None:
        out |= {"tasks": list(tasks), "attempts": opts.attempts, "oracle": opts.oracle}
    return out


def summary_rows(result: RunResult) -> list[dict[str, Any]]:
    """One JSON-ready row per session, for the summary table and ``--json``."""
    rows = []
    for st in result.sessions:
        rows.append(
            {
                "session": st.session_id,
                "task": st.task,
                "end_reason": st.end_reason,
                "agents": st.agents,
                "agents_by_role": dict(st.agents_by_role),
                "calls": st.calls,
                "prompt_tokens": st.prompt_tokens,
                "completion_tokens": st.completion_tokens,
                "orchestrator_prompt_first": st.orch_first_prompt,
                "orchestrator_prompt_last": st.orch_last_prompt,
                "tool_calls": st.tool_calls,
                "tool_time_share": st.tool_time_share,
                "wall_s": st.wall_ns / 1e9,
                "eval_passed": st.eval_passed,
            }
        )
    return rows
