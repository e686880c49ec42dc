"""A generate run of an agent product (``generate --agent NAME``): N sessions, K at a time,
each the product in a sandbox on the scenario's (or an eval task's) workspace, its LLM traffic
recorded through one recording proxy into the run's one trace.

Before anything starts, the sandbox is chosen once for the run (``sandboxes.choice``: ``auto``
is ``docker`` when a daemon answers, else ``local``, which confines the agent in namespaces and
refuses, one line and exit 2, where the kernel does not allow them) and the product's program is
checked against it (``products.placement``): a program that cannot run there is one line and
exit 2.
The choice and its reason are said on the start line, kept in ``RunResult.sandbox`` (the
summary's ``sandbox:`` line) and in the header's ``generator.sandbox``.

The proxy (``record.RecordServer``) forwards to the endpoint (default: the built-in simulator,
which plays any agent) and writes the trace with the run's header (scenario, seed, the agent
and its version in ``generator``); every session reaches it through a listener of its own
(``session``), so the trace's sessions are the run's (``h-s{seed}-{i}``). While the sessions
run, their counters follow what the recorder writes (``products.live``); once the proxy has
closed the trace, each session's counters (calls, tokens, agents, tool calls) are read from it:
what the summary, eval.json and the live benchmark show is what the trace holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import sys
import time
from collections import Counter

from agentload.agents.tracing import SessionStats
from agentload.auth import api_key_from_env
from agentload.errors import AgentProductError, SandboxError
from agentload.generate.run import (
    RunResult,
    RunSpec,
    calibrated_header,
    open_endpoint,
)
from agentload.generate.sessions import (
    ProductSessions,
    ProgressSink,
    SessionPlace,
    run_sessions,
)
from agentload.masking import PLACEHOLDER_KEY, redact_url
from agentload.products.install import AgentInstallError, Installed, install, spec_of
from agentload.products.live import LiveCounts
from agentload.products.placement import Placement, place
from agentload.products.registry import Product
from agentload.products.session import ProductRun
from agentload.record.ledger import header_session_id
from agentload.record.server import RecordOptions, RecordServer
from agentload.sandboxes.choice import SandboxChoice, choose_sandbox
from agentload.sandboxes.confine import unavailable
from agentload.sandboxes.tempdirs import WORKSPACES, owned_tempdir
from agentload.trace.trace import Trace, load_trace

__all__ = ["counted", "installed_product", "no_key", "run_product"]


def no_key() -> str:
    """The key an agent sends when the user set none."""
    return PLACEHOLDER_KEY


async def installed_product(product: Product) -> Installed | None:
    """The product's install (installed now when it is not yet); None for ``cmd:``;
    ``AgentProductError`` (one line) when it cannot be installed."""
    if not product.installed:
        return None
    try:
        return await asyncio.to_thread(install, spec_of(product.name.value))
    except AgentInstallError as exc:
        raise AgentProductError(f"--agent {product.label}: {exc}") from None


async def product_place(
    spec: RunSpec, product: Product
) -> tuple[SandboxChoice, Installed | None, Placement]:
    """The run's sandbox, the product's install and what the sandbox needs for its program;
    one line (``ConfigError``, ``DockerUnavailableError``, ``AgentProductError``) when it
    cannot run there."""
    opts = spec.opts
    origin = "--sandbox" if opts.sandbox else "the scenario's sandbox.kind"
    choice = await asyncio.to_thread(choose_sandbox, spec.kind, opts.scenario.sandbox, origin)
    if choice.kind == "local" and (why := await asyncio.to_thread(unavailable)) is not None:
        raise SandboxError(
            f"--agent {product.label}: sandbox {choice}: cannot confine the agent here ({why}); "
            "an agent never runs unconfined: use --sandbox docker (scripts/docker-up.sh)"
        )
    installed = await installed_product(product)
    placement = place(product, installed.exe if installed is not None else None, choice)
    mounted = f"; mounted read-only: {', '.join(placement.mounts)}" if placement.mounts else ""
    print(
        f"agentload: --agent {product.label}: sandbox {choice}{mounted}",
        file=sys.stderr,
        flush=True,
    )
    return choice, installed, placement


async def run_product(spec: RunSpec, product: Product, progress: ProgressSink | None) -> RunResult:
    """The run of ``product`` (see the module docstring); the trace is closed and every
    sandbox removed in every case."""
    choice, installed, placement = await product_place(spec, product)
    spec = dataclasses.replace(spec, kind=choice.kind)
    opts = spec.opts
    plan = opts.session_plan()
    async with open_endpoint(opts, spec.seed) as (base_url, model):
        tokens, header = await calibrated_header(spec, base_url, model, len(plan))
        record = RecordOptions(upstream=base_url, out=spec.path.parent, port=0)
        live = LiveCounts()
        proxy = RecordServer(record, trace_path=spec.path, header=header, on_recorded=live)
        await asyncio.to_thread(proxy.start)
        workdir = owned_tempdir(WORKSPACES)  # a kill -9 leaves it to `agentload sandbox cleanup`
        key = api_key_from_env() or PLACEHOLDER_KEY
        run = ProductRun(
            product, installed, model, key, proxy, opts.agent_max_tokens, choice, placement
        )
        place = SessionPlace(opts, plan, spec.seed, workdir, spec.kind)
        try:
            runner = ProductSessions(place, run)
            sessions = await run_sessions(len(plan), opts.parallel, runner, progress, live.watch)
        finally:
            await asyncio.to_thread(proxy.stop)
            shutil.rmtree(workdir, ignore_errors=True)
    counted(load_trace(spec.path), sessions)
    return RunResult(
        trace_path=spec.path,
        sessions=sessions,
        wall_ns=time.perf_counter_ns() - spec.t0,
        endpoint=redact_url(base_url),
        model=model,
        tokens=tokens,
        sandbox=str(choice),
    )


def counted(trace: Trace, sessions: list[SessionStats]) -> None:
    """Each session's counters from what the trace holds of it."""
    for st in sessions:
        sid = header_session_id(st.session_id)
        agents = trace.agents_of(sid)
        st.agents = len(agents)
        st.agents_by_role = dict(Counter(a.role for a in agents))
        calls = sorted(
            (c for c in trace.calls.values() if c.session_id == sid),
            key=lambda c: c.timings.submit_ns,
        )
        st.calls = len(calls)
        st.prompt_tokens = sum(trace.prompt_tokens(c) for c in calls)
        st.completion_tokens = sum(trace.completion_tokens(c) for c in calls)
        roots = {a.id for a in agents if a.parent_agent_id is None}
        root_calls = [c for c in calls if c.agent_id in roots]
        st.orchestrator_calls = len(root_calls)
        if root_calls:
            st.orch_first_prompt = trace.prompt_tokens(root_calls[0])
            st.orch_last_prompt = trace.prompt_tokens(root_calls[-1])
        tools = [t for t in trace.tool_calls.values() if t.session_id == sid]
        st.tool_calls = len(tools)
        st.tool_intervals = [(t.start_ns, t.end_ns) for t in tools if t.child_agent_id is None]
        st.tool_ns = sum(e - s for s, e in st.tool_intervals)
