"""One session of an agent product: the workspace in a sandbox, the agent inside it, its way
out, its end and the success check.

* **Workspace and sandbox**: ``agents.session.SessionPlace``, as for the built-in agents: the
  scenario's workspace (an eval task's faulted one) copied for the session, a sandbox over it.
  The installed product's folder is mounted read-only at the same path, and when agentload runs
  as root the workspace is handed to ``nobody`` so that the agent (a non-root user in Docker)
  can edit it.
* **The way out** (``route``): in Docker the container has no network; the agent's base URL is
  ``http://127.0.0.1:8100`` inside, where ``forward.py`` (started with the agent) pipes every
  connection to a Unix socket of the run's recording proxy, mounted into the container: nothing
  else is reachable. The local sandbox is confined (``sandboxes.confine``): the agent gets a TCP
  listener of the proxy on the host's loopback, bridged into the sandbox's own network namespace
  at the same ``127.0.0.1:PORT``, and nothing else. Either listener stands for the session, so
  the trace's sessions are exact.
* **The program**: what ``placement`` found it needs (its folder mounted read-only in Docker,
  a folder first on ``PATH``), checked before the run started.
* **The end**: the agent's process exit (``registry``); the session's wall budget bounds it, and
  the sandbox's disk quota (past it the agent is killed and the session ends ``disk_quota``).
  Then the success check (``--eval``) in the same sandbox, and the outcome sent to the trace:
  its session record carries the end reason, the exit code, the sandbox, and for a failure the
  last lines the agent printed (``output_tail``, secrets masked) or why it could not start
  (``error``), whether it made any call or none.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentload.agents.session import SessionPlace, SessionSetup, Verdict, success_check
from agentload.agents.tracing import SessionStats, SessionStatus
from agentload.masking import mask_text
from agentload.products.install import Installed
from agentload.products.placement import Placement
from agentload.products.registry import LaunchContext, Product
from agentload.record.sink import SessionOutcome
from agentload.sandboxes import forward
from agentload.sandboxes.choice import SandboxChoice
from agentload.trace.schema import EndReason

if TYPE_CHECKING:
    from agentload.record.server import RecordServer
    from agentload.scenarios.models import Scenario

__all__ = ["INSIDE_PORT", "ProductRun", "run_product_session"]

INSIDE_PORT = 8100
"""The port the agent's base URL names inside a Docker sandbox (``forward.py`` listens there)."""
_FORWARD = Path(forward.__file__)
_ROUTE_DIR = "/opt/agentload"
_NOBODY = 65534
_TAIL_LINES = 3
_RECORD_TAIL_LINES = 40
_RECORD_TAIL_CHARS = 4000


@dataclass(frozen=True)
class ProductRun:
    """What every session of a product run shares: the product and where it is installed, the
    model, the key the agent sends and the recording proxy."""

    product: Product
    installed: Installed | None
    model: str
    key: str
    proxy: RecordServer
    max_tokens: int | None = None
    sandbox: SandboxChoice | None = None
    """The sandbox chosen for the run (None: each session's ``auto`` decides, on Ray)."""
    placement: Placement | None = None
    """What the sandbox needs for the product's program (``products.placement``)."""


def _hand_over(root: Path) -> None:
    """Give the workspace to ``nobody`` when agentload runs as root (the Docker sandbox's user
    is the workspace's owner; as root's it would be ``nobody`` and could not write)."""
    if os.geteuid() != 0:
        return
    for dirpath, dirnames, filenames in os.walk(root):
        os.chown(dirpath, _NOBODY, _NOBODY)
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), _NOBODY, _NOBODY, follow_symlinks=False)


def _unix_listener(folder: Path) -> socket.socket:
    """A listening Unix socket ``folder/proxy.sock`` that the sandbox's user may connect to."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    path = folder / "proxy.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    path.chmod(0o666)
    sock.listen(64)
    sock.setblocking(False)
    return sock


def _tcp_listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.setblocking(False)
    return sock


def _lines(output: bytes) -> list[str]:
    return [ln.strip() for ln in output.decode("utf-8", "replace").splitlines() if ln.strip()]


def _tail(output: bytes) -> str:
    return " | ".join(_lines(output)[-_TAIL_LINES:])[:600]


def _record_tail(output: bytes) -> str:
    """The last lines a failed agent printed, as its session record keeps them (masked)."""
    text = "\n".join(_lines(output)[-_RECORD_TAIL_LINES:])
    return mask_text(text[-_RECORD_TAIL_CHARS:])


class _Route:
    """The session's way to the proxy: a Unix socket for Docker, a TCP port for local."""

    def __init__(self, folder: Path, docker: bool, stats: SessionStats | None = None) -> None:
        self.folder, self.docker, self.stats = folder, docker, stats
        self.sock = _unix_listener(folder) if docker else _tcp_listener()
        self.close_listener: Callable[[], None] | None = None

    @property
    def root_url(self) -> str:
        port = INSIDE_PORT if self.docker else self.sock.getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def ports(self) -> tuple[int, ...]:
        """What a confined local sandbox bridges in: the TCP listener's port (none for Docker's
        route: ``auto`` falling back on local gets its port in ``_agent``)."""
        return () if self.docker else (self.sock.getsockname()[1],)

    def mounts(self) -> dict[str, str]:
        return {str(self.folder): _ROUTE_DIR + "/route", str(_FORWARD): _ROUTE_DIR + "/forward.py"}

    def wrap(self, argv: list[str]) -> list[str]:
        if not self.docker:
            return argv
        sock = _ROUTE_DIR + "/route/proxy.sock"
        return ["python3", _ROUTE_DIR + "/forward.py", str(INSIDE_PORT), sock, "--", *argv]

    async def open(self, proxy: RecordServer, session: str) -> None:
        """Hand the listener to the proxy; each call through it counts in the live counters."""
        self.close_listener = await proxy.listen(self.sock, session, self._count)

    def _count(self) -> None:  # the proxy's thread; the display reads the number
        if self.stats is not None:
            self.stats.calls += 1

    def close(self) -> None:
        """Stop listening (the proxy's server closes a socket it was handed; else here)."""
        if self.close_listener is not None:
            self.close_listener()
            self.close_listener = None
        else:
            with contextlib.suppress(OSError):
                self.sock.close()


async def run_product_session(
    setup: SessionSetup,
    scenario: Scenario,
    run: ProductRun,
    on_start: Callable[[SessionStats], None] | None = None,
) -> SessionStats:
    """Run one session of ``run.product`` to its end (see the module docstring)."""
    stats = SessionStats(session_id=setup.session_id, start_ns=time.perf_counter_ns())
    stats.task, stats.attempt = setup.task, setup.attempt
    if on_start is not None:
        on_start(stats)
    return await _Session(setup, scenario, run, stats).run()


class _Session:
    """One product session as it goes: its route, its end reason, its check and its facts."""

    def __init__(
        self, setup: SessionSetup, scenario: Scenario, run: ProductRun, stats: SessionStats
    ) -> None:
        self.setup, self.scenario, self.run_, self.stats = setup, scenario, run, stats
        docker = setup.sandbox_kind != "local"
        self.route = _Route(setup.workdir / f"{setup.session_id}.route", docker, stats)
        self.reason = EndReason.ERROR
        self.verdict: Verdict | None = None
        self.meta: dict[str, Any] = {}
        self.sandbox_kind = run.sandbox.kind if run.sandbox is not None else None

    async def run(self) -> SessionStats:
        setup, run, stats = self.setup, self.run_, self.stats
        mounts = self.route.mounts()
        if run.installed is not None:
            mounts[str(run.installed.folder)] = str(run.installed.folder)
        for folder in run.placement.mounts if run.placement is not None else ():
            mounts[folder] = folder
        try:
            await self.route.open(run.proxy, setup.session_id)
            place = SessionPlace(
                setup,
                self.scenario,
                stats,
                mounts=mounts,
                before_sandbox=_hand_over,
                egress=self.route.ports(),
            )
            async with place:
                await self._agent(place.sandbox)
                if setup.evaluate and self.reason is not EndReason.DISK_QUOTA:
                    stats.status = SessionStatus.EVAL
                    self.verdict = await success_check(place.sandbox, self.scenario, setup.task)
                    stats.eval_detail = self.verdict.detail
                stats.status = SessionStatus.CLOSING
        except asyncio.CancelledError:
            self.reason = EndReason.INTERRUPTED
            raise
        except Exception as exc:
            stats.detail = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._end()
        return stats

    async def _agent(self, sandbox: Any) -> None:
        """The product in ``sandbox`` until it exits or the wall budget ends it."""
        run, stats, scenario = self.run_, self.stats, self.scenario
        if self.route.docker and sandbox.kind != "docker":  # auto fell back on local
            self.route.close()
            self.route = _Route(self.route.folder, docker=False, stats=stats)
            await self.route.open(run.proxy, self.setup.session_id)
            sandbox.egress = self.route.ports()
        self.sandbox_kind = sandbox.kind
        exe = str(run.installed.exe) if run.installed is not None else ""
        root_url = self.route.root_url
        tests = f'TMPDIR="${{TMPDIR:-/tmp}}" {shlex.join(scenario.test_command)}'
        ctx = LaunchContext(
            exe,
            scenario.task,
            run.model,
            root_url,
            run.key,
            str(sandbox.home),
            run.max_tokens,
            tests,
        )
        launch = run.product.launch(ctx)
        env = dict(launch.env)
        if run.placement is not None and run.sandbox is not None:
            env |= run.placement.env(run.sandbox)
        stats.status = SessionStatus.RUNNING
        argv = self.route.wrap(launch.argv)
        res = await asyncio.to_thread(sandbox.exec, argv, timeout_s=scenario.wall_budget_s, env=env)
        self.meta = {
            "agent": run.product.label,
            "exit_code": res.exit_code,
            "sandbox_id": str(sandbox.id),
            "agent_s": (res.end_ns - res.start_ns) / 1e9,
        }
        if res.over_limit is not None:
            self.reason = EndReason.DISK_QUOTA
            stats.detail = res.over_limit
        elif res.timed_out:
            self.reason = EndReason.WALL_BUDGET
        elif res.exit_code == 0:
            self.reason = EndReason.DONE
        else:
            self.reason = EndReason.ERROR
            stats.detail = f"{run.product.label} exited {res.exit_code}: {_tail(res.output)}"
        if self.reason is not EndReason.DONE:
            self.meta["output_tail"] = _record_tail(res.output)

    def _end(self) -> None:
        """The counters closed and the outcome sent to the trace, whatever ended it."""
        self.route.close()
        stats = self.stats
        stats.end_ns = time.perf_counter_ns()
        stats.end_reason = self.reason
        event = self.verdict.event if self.verdict else None
        stats.eval_passed = event.passed if event else None
        meta = _meta(self.setup, self.meta)
        if stats.detail and "exit_code" not in meta:  # it never ran: why
            meta["error"] = mask_text(stats.detail)
        outcome = SessionOutcome(
            self.setup.session_id,
            stats.end_ns,
            self.reason.value,
            event,
            meta,
            stats.start_ns,
            self.sandbox_kind,
        )
        self.run_.proxy.outcome(outcome)
        stats.status = SessionStatus.ENDED


def _meta(setup: SessionSetup, meta: dict[str, Any]) -> dict[str, Any]:
    out = {"index": setup.index, "seed": setup.seed, **meta}
    if setup.task is not None:
        out |= {"task": setup.task, "attempt": setup.attempt}
    return out
