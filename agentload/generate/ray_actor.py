"""One worker of ``generate --ray``: a Ray actor that runs sessions and relays their records.

    worker = GenerateWorker(opts, seed, kind, index, api_key)   # inside ray.remote(...)
    info = await worker.start()          # its endpoint (own simulator, or the --endpoint URL)
    await worker.open(header, ratio)     # its trace writer, with the driver's header
    stats, batches = await worker.run(i) # session i, exactly as ``generate.run`` runs it
    batches, live = await worker.drain() # records since the last call, running sessions' counters
    batches = await worker.close()       # (or ``stop()``: cancel the running sessions first)

* Sessions: ``run(i)`` runs session ``i`` with the runner of the run's agent kind
  (``sessions.BuiltinSessions`` on this worker's ``ChatClient``, trace writer and
  ``CallCapture``, or ``sessions.ProductSessions`` through its recording proxy): id
  ``s{seed}-{i}``, seed ``seed + i``, so a session's content is the one a single-machine run
  gives it.
* Endpoint: with ``--endpoint`` the URL and the model the driver checked, and the API key as an
  argument (never an environment variable of the cluster, never logged); else a simulator of
  its own (``run.open_endpoint``: the scenario's profile, the run's seed and pacing), since the
  driver's 127.0.0.1 is not this worker's on another machine.
* Records: the worker's ``TraceWriter`` writes its own file (in its temp dir, removed at
  ``close``) and hands every line to ``tee``; the lines leave in numbered batches (``Batch``),
  which the driver writes in order, so each blob still comes before its first use.
* Counters: ``drain`` returns the running sessions' ``SessionStats`` (``stats_wire``), which
  the driver copies into the ones its progress display reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from agentload.agents.llm import ChatClient
from agentload.agents.tracing import LiveCall, SessionStats
from agentload.generate.run import chat_client, open_endpoint
from agentload.generate.sessions import (
    BuiltinSessions,
    ProductSessions,
    SessionPlace,
    SessionRunner,
)
from agentload.products.live import LiveCounts
from agentload.products.registry import product
from agentload.products.session import ProductRun
from agentload.sandboxes.tempdirs import WORKSPACES, owned_tempdir
from agentload.tokenizer import ChatTokenCounter
from agentload.trace.capture import CallCapture
from agentload.trace.writer import TraceWriter

if TYPE_CHECKING:
    from agentload.generate.calibrate import TokenRatio
    from agentload.generate.options import GenerateOptions
    from agentload.record.server import RecordServer
    from agentload.trace.schema import Header

__all__ = ["Batch", "GenerateWorker", "stats_from_wire", "stats_wire"]

Batch = tuple[int, list[tuple[bytes, str | None]]]
"""``(number, [(line, blob id or None), ...])``: records in the order the worker wrote them."""


def stats_wire(stats: SessionStats) -> dict[str, Any]:
    """``stats`` as plain data (it crosses to the driver)."""
    return dataclasses.asdict(stats)


def stats_from_wire(into: SessionStats, wire: dict[str, Any], shift_ns: int = 0) -> None:
    """Copy ``wire`` (``stats_wire``) into ``into``, its times minus ``shift_ns`` (the worker's
    clock minus the driver's)."""
    for f in dataclasses.fields(SessionStats):
        value = wire[f.name]
        if f.name == "live":
            value = {
                k: LiveCall(start_ns=v["start_ns"] - shift_ns, chunks=v["chunks"])
                for k, v in value.items()
            }
        elif f.name in ("start_ns", "end_ns") and value is not None:
            value -= shift_ns
        elif f.name == "tool_intervals":
            value = [(a - shift_ns, b - shift_ns) for a, b in value]
        setattr(into, f.name, value)


class GenerateWorker:
    """The actor's class (see the module docstring); ``ray_driver`` wraps it in ``ray.remote``."""

    def __init__(
        self,
        opts: GenerateOptions,
        seed: int,
        kind: str,
        index: int,
        api_key: str | None = None,
    ) -> None:
        self.opts = opts
        self.seed = seed
        self.kind = kind
        self.index = index
        self._key = api_key
        self.plan = opts.session_plan()
        self._stack = contextlib.AsyncExitStack()
        self.workdir: Path | None = None
        self.base_url = ""
        self.model = ""
        self.client: ChatClient | None = None
        self.writer: TraceWriter | None = None
        self.runner: SessionRunner | None = None
        """The sessions' agent kind (``open``): agentload's agents or the product."""
        self._lines: list[tuple[bytes, str | None]] = []
        self._batches = 0
        self._live: dict[int, SessionStats] = {}
        self._tasks: dict[int, asyncio.Task[Any]] = {}
        self.product = product(opts.agent)
        self._counts: LiveCounts | None = None
        self._proxy: RecordServer | None = None

    async def start(self) -> dict[str, Any]:
        """Start the endpoint (see the module docstring); facts about this worker."""
        self.workdir = owned_tempdir(WORKSPACES)
        if self.opts.endpoint:
            self.base_url, self.model = self.opts.endpoint, self.opts.model or ""
        else:
            self.base_url, self.model = await self._stack.enter_async_context(
                open_endpoint(self.opts, self.seed)
            )
        docker = None
        if self.kind == "docker":
            docker = await asyncio.to_thread(_docker_answers)
        return {
            "worker": self.index,
            "node": socket.gethostname(),
            "pid": os.getpid(),
            "endpoint": self.base_url,
            "model": self.model,
            "docker": docker,
        }

    async def calibrate(self) -> TokenRatio:
        """The server/ours token ratio measured against this worker's endpoint."""
        from agentload.generate.calibrate import calibrate
        from agentload.generate.run import CALIBRATION_TIMEOUT_S

        timeout = min(self.opts.call_timeout_s, CALIBRATION_TIMEOUT_S)
        return await calibrate(
            self.base_url, self.model, self.opts.scenario, ChatTokenCounter(), timeout
        )

    async def clock(self) -> int:
        """This worker's monotonic clock (``raycluster.measure_offset``)."""
        return time.perf_counter_ns()

    async def open(self, header: Header, ratio: float) -> None:
        """The trace writer with the run's header, the capture and the client (an agent
        product: its recording proxy, which writes this worker's trace, and its install)."""
        assert self.workdir is not None
        if self.product is not None:
            await self._open_product(header)
            return
        path = self.workdir / f"worker{self.index}.agentload.jsonl"
        self.writer = TraceWriter(path, header, tee=self._tee)
        await self.writer.open()
        capture = CallCapture(self.writer, ChatTokenCounter(header.tokenizer))
        self.client = chat_client(self.opts, self.base_url, self.model, self._key)
        self.runner = BuiltinSessions(self._place(), self.client, self.writer, capture, ratio)

    def _place(self) -> SessionPlace:
        assert self.workdir is not None
        return SessionPlace(self.opts, self.plan, self.seed, self.workdir, self.kind)

    async def _open_product(self, header: Header) -> None:
        """``--agent NAME``: the product installed on this node, a recording proxy to this
        worker's endpoint writing this worker's trace (read back whole at ``close``)."""
        from agentload.generate.product_run import installed_product, no_key
        from agentload.record.server import RecordOptions, RecordServer

        assert self.workdir is not None and self.product is not None
        installed = await installed_product(self.product)
        path = self.workdir / f"worker{self.index}-agent.agentload.jsonl"
        record = RecordOptions(upstream=self.base_url, out=self.workdir, port=0)
        self._counts = LiveCounts()
        self._proxy = RecordServer(record, trace_path=path, header=header, on_recorded=self._counts)
        await asyncio.to_thread(self._proxy.start)
        run = ProductRun(
            self.product,
            installed,
            self.model,
            self._key or no_key(),
            self._proxy,
            self.opts.agent_max_tokens,
        )
        self.runner = ProductSessions(self._place(), run)

    def _tee(self, line: bytes, blob_id: str | None) -> None:
        self._lines.append((line, blob_id))

    def _take(self) -> list[Batch]:
        """The lines written since the last call, as one numbered batch (none: no lines)."""
        if not self._lines:
            return []
        lines, self._lines = self._lines, []
        self._batches += 1
        return [(self._batches, lines)]

    async def run(self, i: int) -> tuple[dict[str, Any], list[Batch]]:
        """Session ``i`` to its end: its counters and the records written since the last
        batch (this session's last ones among them)."""
        assert self.runner is not None, "open() first"
        task = asyncio.current_task()
        if task is not None:
            self._tasks[i] = task
        box: list[SessionStats] = []

        def started(stats: SessionStats) -> None:
            box.append(stats)
            self._live[i] = stats
            if self._counts is not None:
                self._counts.watch(stats)

        try:
            stats = await self.runner(i, started)
        except Exception:  # recorded (end reason error, its detail) by the session
            if not box:
                raise
            stats = box[0]
        finally:
            self._live.pop(i, None)
            self._tasks.pop(i, None)
        return stats_wire(stats), self._take()

    async def drain(self) -> tuple[list[Batch], dict[int, dict[str, Any]]]:
        """The records since the last batch and the running sessions' counters."""
        return self._take(), {i: stats_wire(st) for i, st in self._live.items()}

    async def stop(self) -> tuple[list[Batch], dict[int, dict[str, Any]]]:
        """Cancel the running sessions (each records ``interrupted``), then ``close``; the last
        batches and the cancelled sessions' counters."""
        stopped = dict(self._live)
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return await self.close(), {i: stats_wire(st) for i, st in stopped.items()}

    async def close(self) -> list[Batch]:
        """Close the writer, the client and the endpoint; remove the temp dir. The last batch."""
        try:
            if self._proxy is not None:
                path = await asyncio.to_thread(self._proxy.stop)
                self._lines += _records(path)
            if self.writer is not None:
                await self.writer.close()
            if self.client is not None:
                await self.client.aclose()
            await self._stack.aclose()
        finally:
            if self.workdir is not None:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return self._take()


def _records(path: Path) -> list[tuple[bytes, str | None]]:
    """The records of a trace the worker's recording proxy wrote, header and end left out
    (the driver writes its own), each blob with its id."""
    if not path.exists():
        return []
    out: list[tuple[bytes, str | None]] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        rec = orjson.loads(line)
        kind = rec.get("type")
        if kind in ("header", "trace_end"):
            continue
        out.append((line + b"\n", rec["id"] if kind == "blob" else None))
    return out


def _docker_answers() -> str:
    """``ok``, or why no Docker daemon answers on this worker's machine."""
    from agentload.errors import AgentloadError
    from agentload.sandboxes.docker_host import connect_docker

    try:
        connect_docker(timeout=10).close()
    except (AgentloadError, OSError) as exc:
        return str(exc)
    return "ok"
