"""``generate --ray [ADDRESS]``: the sessions of one run on the workers of a Ray cluster.

    result = await generate_on_ray(opts, progress)    # generate --ray (dispatch.generate)

The trace is the one a single-machine run of the same seeds writes (same sessions, agent
trees and content; only the header's ``generator.ray`` and the timings differ):

* Cluster: ``raycluster.connect(opts.ray)`` (``local`` starts one on this machine, ``auto``,
  ``HOST:PORT``); ``--workers`` actors (default: one per cluster CPU), never more than the
  sessions nor than ``--parallel``, each taking one CPU (``ray_actor.GenerateWorker``). With
  ``--sandbox docker`` and a cluster whose nodes declare a ``docker`` resource
  (``ray start --resources='{"docker": 1}'``), workers go only to those nodes; every worker
  says whether Docker answers where it runs, and a session on a node without it fails with the
  sandbox's reason.
* Endpoint: ``--endpoint URL`` is checked here (``GET /models``) and the token ratio measured
  here; the workers get the URL, the model and the API key as arguments. Without it each worker
  starts its own simulator (same profile, seed and pacing), and worker 0 measures the ratio.
* Sessions: ``--parallel`` at a time over the whole cluster, each given to the worker with
  the fewest running; session ``i`` is ``s{seed}-{i}`` with seed ``seed + i`` wherever it runs.
* Records: each worker relays its lines in numbered batches (with a session's result, and
  every ``POLL_S`` with its running sessions' counters); this driver writes each worker's
  batches in order into the one trace, every blob once. A worker whose clock differs from this
  one (``raycluster.measure_offset``: more than the measure's uncertainty, i.e. another
  machine) has its records' times moved onto this machine's clock; the offsets are in the
  header.
* Progress: the driver's ``SessionStats`` of each session are refreshed from its worker's, so
  ``progress`` (the live table, the plain lines) shows every worker's sessions.
* Faults: a worker that dies (its process killed, its node lost) fails the sessions it ran:
  end reason ``error``, the cause in their detail and in an ``error`` event, their session
  record closed; the other workers go on, and the sessions not started yet go to them.
  Ctrl-C / SIGTERM stop every worker's sessions (``interrupted``) and close the trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from agentload.agents.tracing import SessionStats, SessionStatus
from agentload.auth import api_key_from_env
from agentload.client.stream import PROBE_TIMEOUT_S
from agentload.errors import ConfigError
from agentload.generate.calibrate import TokenRatio, calibrate
from agentload.generate.options import GenerateOptions
from agentload.generate.ray_actor import Batch, GenerateWorker, stats_from_wire
from agentload.generate.run import (
    CALIBRATION_TIMEOUT_S,
    SIM_MODEL,
    RunResult,
    RunSpec,
    check_endpoint,
    generator_info,
    run_header,
    run_spec,
)
from agentload.generate.sessions import ProgressSink, StartHook, run_sessions
from agentload.masking import redact_url
from agentload.products.registry import product
from agentload.raycluster import ClockOffset, Cluster, connect, measure_offset, require_ray
from agentload.tokenizer import ChatTokenCounter
from agentload.trace.events import Error
from agentload.trace.schema import EventRecord, SessionRecord
from agentload.trace.trace import load_trace
from agentload.trace.writer import TraceWriter

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["generate_on_ray", "shift_line"]

POLL_S = 0.5
"""How often the driver collects records and counters from the workers."""
STOP_TIMEOUT_S = 60.0
"""How long an interrupted run waits for a worker to stop its sessions and close."""

_NS_FIELDS: dict[bytes, tuple[str, ...]] = {
    b"session": ("start_ns", "end_ns"),
    b"agent": ("start_ns", "end_ns"),
    b"tool_call": ("start_ns", "end_ns"),
    b"event": ("ns",),
}
_TIMING_FIELDS = ("submit_ns", "first_token_ns", "last_token_ns")


def shift_line(line: bytes, shift_ns: int) -> bytes:
    """A record line with its monotonic times minus ``shift_ns`` (a blob line as is)."""
    if not line.startswith(b'{"type":"'):
        return line
    kind = line[9 : line.index(b'"', 9)]
    if kind not in _NS_FIELDS and kind != b"llm_call":
        return line
    rec = orjson.loads(line)
    for name in _NS_FIELDS.get(kind, ()):
        if isinstance(rec.get(name), int):
            rec[name] -= shift_ns
    timings = rec.get("timings") if kind == b"llm_call" else None
    if isinstance(timings, dict):
        for name in _TIMING_FIELDS:
            if isinstance(timings.get(name), int):
                timings[name] -= shift_ns
    return orjson.dumps(rec) + b"\n"


@dataclass
class _Worker:
    """The driver's view of one actor."""

    index: int
    actor: Any
    info: dict[str, Any] = field(default_factory=dict)
    offset: ClockOffset | None = None
    shift_ns: int = 0
    """What its records' times lose (its clock minus ours; 0 when indistinguishable)."""
    running: set[int] = field(default_factory=set)
    dead: str | None = None
    next_batch: int = 1
    held: dict[int, list[tuple[bytes, str | None]]] = field(default_factory=dict)

    def name(self) -> str:
        return f"Ray worker {self.index} ({self.info.get('node', '?')})"


class _Relay:
    """Writes the workers' batches into the run's trace, each worker's in order."""

    def __init__(self, writer: TraceWriter) -> None:
        self.writer = writer
        self.starts: dict[str, dict[str, Any]] = {}
        """Each session's ``session`` record as written (its end rewritten if its worker dies)."""

    def accept(self, w: _Worker, batches: list[Batch]) -> None:
        for number, lines in batches:
            w.held[number] = lines
        while w.next_batch in w.held:
            for line, blob_id in w.held.pop(w.next_batch):
                out = shift_line(line, w.shift_ns) if w.shift_ns and blob_id is None else line
                if blob_id is None and out.startswith(b'{"type":"session"'):
                    rec = orjson.loads(out)
                    self.starts.setdefault(rec["id"], rec)
                self.writer.write_encoded(out, blob_id)
            w.next_batch += 1

    async def fail(self, stats: SessionStats, detail: str) -> None:
        """Close the session of ``stats`` in the trace: end reason ``error``, an ``error`` event
        with ``detail``. A session whose record had not reached us gets one of its own."""
        now, sid = time.perf_counter_ns(), stats.session_id
        start = self.starts.get(sid) or {"type": "session", "id": sid, "start_ns": stats.start_ns}
        await self.writer.write(EventRecord.of(Error(error=detail), now, session_id=sid))
        rec = SessionRecord.model_validate({**start, "end_ns": now, "end_reason": "error"})
        await self.writer.write(rec)


def _ray_error(exc: BaseException) -> str:
    """The first line of a Ray error, with its type."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else 'no detail'}"


def _actor_class(ray: ModuleType, cluster_docker: bool, kind: str) -> Any:
    opts: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, "max_task_retries": 0}
    if kind == "docker" and cluster_docker:
        opts["resources"] = {"docker": 0.001}
    return ray.remote(GenerateWorker).options(**opts)


async def _start_workers(
    ray: ModuleType, opts: GenerateOptions, seed: int, kind: str, n: int, key: str | None
) -> list[_Worker]:
    """``n`` started actors, their clocks measured; one line if one cannot start."""
    cls = _actor_class(ray, "docker" in ray.cluster_resources(), kind)
    workers = [_Worker(k, cls.remote(opts, seed, kind, k, key)) for k in range(n)]
    for w in workers:
        try:
            w.info = await w.actor.start.remote()
        except Exception as exc:
            raise ConfigError(
                f"--ray: Ray worker {w.index} did not start ({_ray_error(exc)})"
            ) from None
    for w in workers:

        def remote_clock(actor: Any = w.actor) -> int:
            return int(ray.get(actor.clock.remote()))

        w.offset = await asyncio.to_thread(measure_offset, remote_clock)
        if abs(w.offset.offset_ns) > w.offset.uncertainty_ns:  # another machine's clock
            w.shift_ns = w.offset.offset_ns
    return workers


def _ray_header(cluster: Cluster, workers: list[_Worker]) -> dict[str, Any]:
    """The header's ``generator.ray``: the cluster and each worker (node, clock offset)."""
    return {
        "address": cluster.address,
        "nodes": cluster.nodes,
        "cpus": cluster.cpus,
        "workers": len(workers),
        "worker": [
            {
                "node": w.info.get("node"),
                "pid": w.info.get("pid"),
                "clock_offset_ns": w.offset.offset_ns if w.offset else None,
                "clock_uncertainty_ns": w.offset.uncertainty_ns if w.offset else None,
                "times_moved": bool(w.shift_ns),
                **({"docker": w.info["docker"]} if w.info.get("docker") else {}),
            }
            for w in workers
        ],
    }


async def generate_on_ray(opts: GenerateOptions, progress: ProgressSink | None = None) -> RunResult:
    """Run the sessions on a Ray cluster (see the module docstring); the trace is closed in
    every case."""
    import sys

    require_ray("--ray")  # without the extra: one line, before anything else
    spec = run_spec(opts)
    s, seed, kind = opts.scenario, spec.seed, spec.kind
    plan = opts.session_plan()
    with connect(opts.ray) as cluster:  # (it keeps our SIGTERM handler: exit 143, trace closed)
        import ray

        n = min(cluster.workers(opts.workers), len(plan), opts.parallel)
        key = None
        if opts.endpoint:
            probe_s = min(PROBE_TIMEOUT_S, opts.call_timeout_s)
            model = await check_endpoint(opts.endpoint, opts.model, probe_s)
            opts = opts.model_copy(update={"model": model})
            key = api_key_from_env()
        print(f"agentload: {cluster.describe()}; {n} worker(s)", file=sys.stderr, flush=True)
        workers: list[_Worker] = []
        try:
            workers = await _start_workers(ray, opts, seed, kind, n, key)
            for w in workers:
                if w.info.get("docker") not in (None, "ok"):
                    print(
                        f"agentload: warning: {w.name()}: {w.info['docker']}; its sessions "
                        "fail (--sandbox docker)",
                        file=sys.stderr,
                        flush=True,
                    )
            base_url, model = opts.endpoint or workers[0].info["endpoint"], workers[0].info["model"]
            timeout = min(opts.call_timeout_s, CALIBRATION_TIMEOUT_S)
            if opts.endpoint:
                tokens = await calibrate(base_url, model, s, ChatTokenCounter(), timeout)
            else:
                tokens = await workers[0].actor.calibrate.remote()
            spec = dataclasses.replace(spec, opts=opts)  # the model the endpoint serves
            target = _Target(base_url, model, tokens)
            return await _run(spec, progress, workers, target, _ray_header(cluster, workers))
        finally:
            for w in workers:
                with contextlib.suppress(Exception):
                    ray.kill(w.actor)


@dataclass(frozen=True)
class _Target:
    """The endpoint the sessions call: its URL and model, and the run's token ratio."""

    base_url: str
    model: str
    tokens: TokenRatio


async def _run(
    spec: RunSpec,
    progress: ProgressSink | None,
    workers: list[_Worker],
    target: _Target,
    ray_info: dict[str, Any],
) -> RunResult:
    """The run's trace written from the workers' records: the header, every worker's trace
    opened, the sessions dispatched, every worker closed."""
    opts, tokens = spec.opts, target.tokens
    plan = opts.session_plan()
    generator = generator_info(opts, len(plan), spec.kind) | {"ray": ray_info}
    header = run_header(spec, target.base_url, target.model or SIM_MODEL, tokens, generator)
    endpoint = redact_url(target.base_url)
    result = RunResult(trace_path=spec.path, endpoint=endpoint, model=target.model, tokens=tokens)
    result.ray = ray_info
    mirrors = [SessionStats(session_id=f"s{spec.seed}-{i}", start_ns=0) for i in range(len(plan))]
    for st, (_, task, attempt) in zip(mirrors, plan, strict=True):
        st.task, st.attempt = task, attempt
    async with TraceWriter(spec.path, header) as writer:
        relay = _Relay(writer)
        await asyncio.gather(*(w.actor.open.remote(header, tokens.ratio) for w in workers))
        await _Dispatch(workers, relay, mirrors, opts.parallel, progress).run_all()
    result.sessions = mirrors
    if product(opts.agent) is not None:  # a product's counters are what the trace holds
        from agentload.generate.product_run import counted

        counted(load_trace(spec.path), mirrors)
    result.wall_ns = time.perf_counter_ns() - spec.t0
    return result


class _Dispatch:
    """The run's sessions over the workers (a ``sessions.SessionRunner``: ``run_sessions``
    gates them, ``parallel`` at a time): each given to the live worker with the fewest
    running, its records relayed and its counters mirrored here."""

    def __init__(
        self,
        workers: list[_Worker],
        relay: _Relay,
        mirrors: list[SessionStats],
        parallel: int,
        progress: ProgressSink | None,
    ) -> None:
        self.workers, self.relay, self.mirrors, self.progress = workers, relay, mirrors, progress
        self.parallel = parallel
        self.by_index = dict(enumerate(mirrors))

    async def __call__(self, i: int, started: StartHook) -> SessionStats:
        """Session ``i``: on a live worker, else failed at once."""
        st = self.mirrors[i]
        alive = [w for w in self.workers if w.dead is None]
        st.start_ns = time.perf_counter_ns()
        started(st)
        if not alive:
            st.end_ns, st.end_reason, st.status = st.start_ns, "error", SessionStatus.ENDED
            st.detail = "no Ray worker left: " + "; ".join(
                f"{w.name()}: {w.dead}" for w in self.workers
            )
        else:
            await self._run_on(min(alive, key=lambda w: (len(w.running), w.index)), i, st)
        return st

    async def _run_on(self, w: _Worker, i: int, st: SessionStats) -> None:
        """Session ``i`` on worker ``w``; a worker that dies fails it (and is marked dead)."""
        w.running.add(i)
        try:
            wire, batches = await w.actor.run.remote(i)
        except Exception as exc:  # the actor died: RayActorError and its kind
            w.dead = w.dead or _ray_error(exc)
            st.end_ns, st.end_reason = time.perf_counter_ns(), "error"
            st.detail = f"{w.name()} failed: {w.dead}"
            st.status = SessionStatus.ENDED
            st.live.clear()
            await self.relay.fail(st, st.detail)
        else:
            self.relay.accept(w, batches)
            stats_from_wire(st, wire, w.shift_ns)
        finally:
            w.running.discard(i)

    async def poll(self) -> None:
        """Every ``POLL_S``, each busy worker's new records and its running sessions' counters."""
        while True:
            await asyncio.sleep(POLL_S)
            for w in [w for w in self.workers if w.dead is None and w.running]:
                try:
                    batches, live = await w.actor.drain.remote()
                except Exception:  # a dead worker: its sessions' calls say it
                    continue
                self.relay.accept(w, batches)
                for i, wire in live.items():
                    if i in w.running and self.by_index[i].end_reason is None:
                        stats_from_wire(self.by_index[i], wire, w.shift_ns)

    async def run_all(self) -> None:
        """Every session, the poller beside them; then each live worker's last records (its
        sessions stopped first when the run was interrupted)."""
        poller = asyncio.create_task(self.poll())
        interrupted = True
        try:
            n, progress = len(self.mirrors), self.progress
            await run_sessions(n, self.parallel, self, progress)
            interrupted = False
        finally:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
            await _close_workers(self.workers, self.relay, self.by_index, interrupted)


async def _close_workers(
    workers: list[_Worker], relay: _Relay, by_index: dict[int, SessionStats], interrupted: bool
) -> None:
    """Each live worker's last records (interrupted: its sessions stopped first)."""

    async def close(w: _Worker) -> None:
        try:
            if interrupted:
                batches, stopped = await asyncio.wait_for(w.actor.stop.remote(), STOP_TIMEOUT_S)
                for i, wire in stopped.items():
                    stats_from_wire(by_index[i], wire, w.shift_ns)
            else:
                batches = await asyncio.wait_for(w.actor.close.remote(), STOP_TIMEOUT_S)
        except Exception:  # dead or stuck: what it sent is in the trace already
            return
        relay.accept(w, batches)

    await asyncio.gather(*(close(w) for w in workers if w.dead is None))
