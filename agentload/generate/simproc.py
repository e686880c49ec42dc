"""The built-in simulator in a child process, so its CPU work does not share the generator's GIL.

    with SimulatorProcess(profile="instant", model="agentload-sim", seed=0) as sim:
        sim.base_url, sim.model

The child (started with ``spawn``) runs ``SimulatorServer`` on a free 127.0.0.1 port and sends
its address back; it ignores SIGINT (the parent stops it) and exits when the parent says so or
when the parent's end of the pipe closes (the parent died), so it never outlives the run.

``scenario_pacing(scenario)`` is what ``generate`` configures its built-in simulator with: the
simulated model's own pacing (``PolicyConfig`` fields: when the orchestrator wraps up, how often
it delegates, how many turns each sub-agent kind takes at most), set server-side from the
scenario's limits, since no prompt carries them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
from collections.abc import Mapping
from multiprocessing.connection import Connection
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agentload.contract import DELEGATE
from agentload.errors import AgentloadError, ConfigError

if TYPE_CHECKING:
    from agentload.scenarios.models import Scenario

__all__ = ["SimulatorProcess", "scenario_pacing"]

_START_TIMEOUT_S = 60.0


def scenario_pacing(scenario: Scenario) -> dict[str, Any]:
    """The built-in simulator's ``PolicyConfig`` overrides for ``scenario`` (see above)."""
    from agentload.endpoint.policy.types import PolicyConfig

    weights = PolicyConfig().orchestrator_weights
    weights[DELEGATE] = scenario.orchestrator.delegate_weight
    out: dict[str, Any] = {
        "context_target": scenario.context_target,
        "max_rounds": scenario.orchestrator.max_rounds,
        "orchestrator_weights": weights,
        "subagent_max_turns": {k: v.max_turns for k, v in scenario.subagents.items()},
    }
    orch = scenario.orchestrator
    if orch.whole_file_prob is not None:
        out["whole_file_prob"] = orch.whole_file_prob
    if orch.read_window is not None:
        out["read_window"] = orch.read_window
    pacing = scenario.pacing
    if pacing is not None:
        fields = {
            "turn_calls": "turn_calls",
            "subagent_calls": "subagent_calls",
            "answer_tokens": "final_answer_tokens",
        }
        for name, knob in fields.items():
            dist = getattr(pacing, name)
            if dist is not None:
                out[knob] = dist.model_dump(include={"median", "p90", "min", "max"})
    return out


def _child(
    conn: Connection, profile: str, model: str, seed: int, pacing: Mapping[str, Any] | None
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        from agentload.endpoint import SimulatorServer

        srv = SimulatorServer(profile=profile, model=model, seed=seed, policy_overrides=pacing)
        srv.start()
    except AgentloadError as exc:
        conn.send(("error", str(exc)))
        return
    conn.send(("ok", srv.base_url, srv.model))
    with contextlib.suppress(EOFError, OSError):
        conn.recv()
    srv.stop()


class SimulatorProcess:
    """The simulated endpoint served by a child process (see the module docstring)."""

    def __init__(
        self,
        profile: str = "instant",
        model: str = "agentload-sim",
        seed: int = 0,
        pacing: Mapping[str, Any] | None = None,
    ):
        self.profile = profile
        self.model = model
        self.seed = seed
        self.pacing = dict(pacing) if pacing else None
        self.base_url = ""
        self._proc: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None

    def start(self) -> None:
        """Start the child; returns once it accepts requests (``ConfigError`` if it cannot)."""
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_child,
            args=(child, self.profile, self.model, self.seed, self.pacing),
            name="agentload-simulator",
            daemon=True,
        )
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        if not parent.poll(_START_TIMEOUT_S):
            self.stop()
            raise ConfigError("the built-in simulator did not start within 60 s")
        try:
            msg = parent.recv()
        except EOFError:
            self.stop()
            raise ConfigError("the built-in simulator exited while starting") from None
        if msg[0] != "ok":
            self.stop()
            raise ConfigError(str(msg[1]))
        self.base_url, self.model = str(msg[1]), str(msg[2])

    def stop(self) -> None:
        """Stop the child (idempotent)."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.send("stop")
            conn.close()
        if proc is not None:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join(5)

    def __enter__(self) -> SimulatorProcess:
        self.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
