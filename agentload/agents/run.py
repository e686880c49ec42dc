"""A generate run: N sessions, K at a time, one trace file, the endpoint (default: simulator).

    result = await generate(GenerateOptions(scenario=..., sessions=8, parallel=8), progress)

* Endpoint: ``--endpoint URL`` (checked with ``GET /models`` first: unreachable → one-line
  error), else the built-in simulator with the scenario's profile, in a child process (its
  CPU work then does not compete with the agents' for one interpreter lock).
* Sessions: session ``i`` has id ``s{seed}-{i}`` and seed ``seed + i``; each gets its own
  workspace copy and sandbox.
* Trace: one file per run holding every session, ``OUT/{scenario}-seed{seed}-{UTC time}
  .agentload.jsonl.zst``; its header carries the resolved scenario, its hash and the seed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from agentload.agents.llm import ChatClient
from agentload.agents.session import SessionSetup, run_session
from agentload.agents.tracing import SessionStats
from agentload.auth import api_key_from_env, refused_key_message
from agentload.errors import (
    ConfigError,
    EndpointError,
    EndpointUnreachableError,
    ModelNotFoundError,
)
from agentload.recorder import make_header
from agentload.recorder.capture import CallCapture
from agentload.recorder.writer import TraceWriter
from agentload.sandboxes.tempdirs import WORKSPACES, owned_tempdir
from agentload.tokenizer import ChatTokenCounter

if TYPE_CHECKING:
    from agentload.scenarios.models import Scenario

__all__ = ["GenerateOptions", "ProgressSink", "RunResult", "check_endpoint", "generate"]

SIM_MODEL = "agentload-sim"


class ProgressSink(Protocol):
    """Receives sessions as they start; reads their live ``SessionStats``."""

    def session_started(self, stats: SessionStats) -> None: ...

    def session_ended(self, stats: SessionStats) -> None: ...


@dataclass
class GenerateOptions:
    """What ``agentload generate`` was asked to do."""

    scenario: Scenario
    endpoint: str | None = None
    model: str | None = None
    sessions: int = 1
    parallel: int = 1
    seed: int | None = None
    out: Path = Path("traces")
    sandbox: str | None = None
    evaluate: bool = False
    keep_workspaces: bool = False
    retries: int = 3
    retry_backoff_s: float = 0.5
    simulator: str = "process"
    """Where the built-in simulator runs: ``process`` (a child process, its own GIL) or
    ``thread`` (in this process)."""


@dataclass
class RunResult:
    """The run's trace file and every session's counters."""

    trace_path: Path
    sessions: list[SessionStats] = field(default_factory=list)
    wall_ns: int = 0
    endpoint: str = ""
    model: str = ""


async def check_endpoint(base_url: str, model: str | None) -> str:
    """``GET {base_url}/models``: the model to use; one-line errors when it cannot work."""
    key = api_key_from_env()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = base_url.rstrip("/") + "/models"
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            resp = await http.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise EndpointUnreachableError(
            f"{base_url}: endpoint does not answer ({type(exc).__name__}: {exc})"
        ) from None
    if resp.status_code in (401, 403):
        raise EndpointError(refused_key_message(url, resp.status_code, resp.content))
    ids: list[str] = []
    if resp.status_code == 200:
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            ids = [str(m["id"]) for m in resp.json().get("data", [])]
    if model is not None:
        if ids and model not in ids:
            raise ModelNotFoundError(
                f"{base_url}: model {model!r} is not served; available: {', '.join(ids)}"
            )
        return model
    if not ids:
        raise ConfigError(f"{base_url}: cannot list the served models; pass --model NAME")
    return ids[0]


@contextlib.asynccontextmanager
async def _endpoint(opts: GenerateOptions, seed: int) -> AsyncIterator[tuple[str, str]]:
    if opts.endpoint:
        model = await check_endpoint(opts.endpoint, opts.model)
        yield opts.endpoint, model
        return
    srv: Any
    profile, model = opts.scenario.endpoint.profile, opts.model or SIM_MODEL
    if opts.simulator == "process":
        from agentload.agents.simproc import SimulatorProcess

        srv = SimulatorProcess(profile=profile, model=model, seed=seed)
    else:
        from agentload.endpoint import SimulatorServer

        srv = SimulatorServer(profile=profile, model=model, seed=seed)
    await asyncio.to_thread(srv.start)
    try:
        yield srv.base_url, srv.model
    finally:
        await asyncio.to_thread(srv.stop)


def trace_path(out: Path, scenario: str, seed: int) -> Path:
    """A new trace file name under ``out`` (never overwrites an existing file)."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    base = out / f"{scenario}-seed{seed}-{stamp}"
    path = base.with_name(base.name + ".agentload.jsonl.zst")
    n = 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}.agentload.jsonl.zst")
    return path


async def generate(opts: GenerateOptions, progress: ProgressSink | None = None) -> RunResult:
    """Run the sessions (see the module docstring); the trace is closed in every case."""
    from agentload.scenarios import scenario_hash

    s = opts.scenario
    if opts.sessions < 1 or opts.parallel < 1:
        raise ConfigError("--sessions and --parallel must be at least 1")
    seed = s.seed if opts.seed is None else opts.seed
    kind = opts.sandbox or s.sandbox.kind
    t0 = time.perf_counter_ns()
    path = trace_path(Path(opts.out), s.name, seed)
    async with _endpoint(opts, seed) as (base_url, model):
        header = make_header(
            endpoint=base_url,
            model=model,
            scenario=s.name,
            scenario_hash=scenario_hash(s),
            scenario_config=s.model_dump(mode="json"),
            seed=seed,
            generator={"sessions": opts.sessions, "parallel": opts.parallel, "sandbox": kind},
        )
        result = RunResult(trace_path=path, endpoint=base_url, model=model)
        client = ChatClient(
            base_url, model=model, retries=opts.retries, backoff_s=opts.retry_backoff_s
        )
        workdir = owned_tempdir(WORKSPACES)  # a kill -9 leaves it to `agentload sandbox cleanup`
        try:
            async with TraceWriter(path, header) as writer:
                capture = CallCapture(writer, ChatTokenCounter(header.tokenizer))
                gate = asyncio.Semaphore(opts.parallel)

                async def one(i: int) -> SessionStats:
                    plan = SessionSetup(
                        index=i,
                        session_id=f"s{seed}-{i}",
                        seed=seed + i,
                        workdir=workdir,
                        sandbox_kind=kind,
                        evaluate=opts.evaluate,
                        keep_workspace=opts.keep_workspaces,
                    )
                    async with gate:
                        stats = await run_session(
                            plan,
                            s,
                            client=client,
                            writer=writer,
                            capture=capture,
                            on_start=progress.session_started if progress else None,
                        )
                    if progress is not None:
                        progress.session_ended(stats)
                    return stats

                tasks = [asyncio.create_task(one(i)) for i in range(opts.sessions)]
                try:
                    result.sessions = list(await asyncio.gather(*tasks))
                finally:
                    for t in tasks:
                        t.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await client.aclose()
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    result.wall_ns = time.perf_counter_ns() - t0
    return result


def summary_rows(result: RunResult) -> list[dict[str, Any]]:
    """One JSON-ready row per session, for the summary table and ``--json``."""
    rows = []
    for st in result.sessions:
        rows.append(
            {
                "session": st.session_id,
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
