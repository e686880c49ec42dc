"""``agentload record``: the recording proxy in the foreground, until Ctrl-C (the normal way
to stop it: the trace is closed and the command exits 0)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentload.errors import ConfigError
from agentload.record.native import AGENT_HEADER, SESSION_HEADER

if TYPE_CHECKING:
    from agentload.record.diskguard import DiskGuard
    from agentload.record.recorder_process import RecordStats
    from agentload.record.server import RecordServer

__all__ = ["disk_line", "record", "register", "stop_line"]


UpstreamOpt = Annotated[
    str,
    typer.Option(
        help="Base URL of the server the agent really talks to, e.g. "
        "http://127.0.0.1:8000/v1 or https://api.anthropic.com (a trailing /v1 is optional)."
    ),
]
ListenOpt = Annotated[str, typer.Option(help="HOST:PORT to listen on (port 0 picks a free one).")]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Directory of the trace file.")]
SessionHeaderOpt = Annotated[
    str,
    typer.Option(
        help="Request header naming the session (an agent that can send one gets exact "
        "sessions; '' turns it off). Its agent twin is --agent-header."
    ),
]
AgentHeaderOpt = Annotated[
    str, typer.Option(help="Request header naming the agent within its session.")
]
MaxSessionsOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Stop once this many sessions were recorded and have been quiet for 2 s.",
    ),
]
IdleTimeoutOpt = Annotated[
    float | None,
    typer.Option(min=0.1, metavar="SECONDS", help="Stop after this long with no request."),
]
TokenizerOpt = Annotated[
    str, typer.Option(help="Tokenizer of our own token counts (o200k_base, cl100k_base).")
]


def record(
    upstream: UpstreamOpt,
    listen: ListenOpt = "127.0.0.1:8100",
    out: OutOpt = Path("traces"),
    session_header: SessionHeaderOpt = SESSION_HEADER,
    agent_header: AgentHeaderOpt = AGENT_HEADER,
    max_sessions: MaxSessionsOpt = None,
    idle_timeout: IdleTimeoutOpt = None,
    tokenizer: TokenizerOpt = "o200k_base",
) -> None:
    """Record any agent's LLM traffic: a reverse proxy to --upstream that writes every Chat
    Completions, Responses and Messages call into an agentload trace (docs/record.md)."""
    from agentload.record.server import RecordOptions, RecordServer, parse_listen
    from agentload.tokenizer import ChatTokenCounter

    host, port = parse_listen(listen)
    _check_headers({"--session-header": session_header, "--agent-header": agent_header})
    try:
        ChatTokenCounter(tokenizer)
    except Exception as exc:
        raise ConfigError(f"--tokenizer {tokenizer!r}: {exc}") from None
    opts = RecordOptions(
        upstream=upstream,
        out=out,
        host=host,
        port=port,
        session_header=session_header or None,
        agent_header=agent_header or None,
        max_sessions=max_sessions,
        idle_timeout_s=idle_timeout,
        tokenizer=tokenizer,
    )
    rs = RecordServer(opts, warn=lambda line: typer.echo(line, err=True))
    rs.bind()
    interrupted = _serve_until_stopped(rs, upstream)
    why = "interrupted" if interrupted else (rs.stop_reason or "stopped")
    typer.echo(stop_line(rs.stats, str(rs.trace_path), why), err=True)
    line = disk_line(rs.guard, rs.stats)
    if line is not None:
        typer.echo(line, err=True)


def _serve_until_stopped(rs: RecordServer, upstream: str) -> bool:
    """Run the bound proxy in the foreground until it stops; whether Ctrl-C (or SIGTERM) did."""
    from agentload.masking import redact_url

    interrupted = False

    def started() -> None:
        typer.echo(
            f"agentload record on {rs.url} -> {redact_url(upstream)}  trace: {rs.trace_path}\n"
            f"  point agents at OPENAI_BASE_URL={rs.url}/v1, ANTHROPIC_BASE_URL={rs.url} or "
            f"GOOGLE_GEMINI_BASE_URL={rs.url}  (Ctrl-C stops)",
            err=True,
        )

    async def main() -> None:
        nonlocal interrupted
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            nonlocal interrupted
            interrupted = True
            rs.request_stop()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        await rs.serve(started)

    asyncio.run(main())
    return interrupted


def stop_line(st: RecordStats, path: str, why: str) -> str:
    """``recorded N calls in S sessions (F failed)``, then what was not recorded, if anything:
    ``; U requests not recorded (first: REASON)``, ``; E embeddings requests (no LLM calls)`` and
    ``; W WebSocket connections relayed``."""
    line = f"recorded {st.calls} calls in {st.sessions} sessions ({st.errors} failed)"
    if st.unread:
        line += f"; {st.unread} requests not recorded (first: {st.unread_first})"
    if st.embeddings:
        line += f"; {st.embeddings} embeddings requests (no LLM calls)"
    if st.websockets:
        line += f"; {st.websockets} WebSocket connections relayed"
    return f"{line} -> {path}  [{why}]"


def disk_line(guard: DiskGuard, st: RecordStats) -> str | None:
    """What a full disk did, if it did anything: the calls refused (507) and the disk, the
    trace lines written late, or never."""
    from agentload.record.diskguard import disk_of

    parts = []
    if guard.refused:
        parts.append(
            f"{guard.refused} calls refused with 507: the disk of {disk_of(guard.folder)} "
            f"was {guard.first}"
        )
    if st.delayed:
        parts.append(f"{st.delayed} trace lines written late, once the disk took them")
    if st.lost:
        parts.append(
            f"{st.lost} trace lines NOT written ({st.disk_error}): the trace ends at "
            "its last whole frame"
        )
    elif parts:
        parts.append("every call answered is in the trace")
    return "agentload record: " + "; ".join(parts) if parts else None


def _check_headers(options: dict[str, str]) -> None:
    """A header name the recorder looks for must be one a request can carry (``''``: off)."""
    from agentload.options.values import header_name_problem

    for option, name in options.items():
        problem = header_name_problem(name, reserved=frozenset()) if name else None
        if problem is not None:
            raise ConfigError(f"{option} {name!r}: {problem}")


def register(app: typer.Typer) -> None:
    """Add ``record`` to the ``agentload`` command."""
    app.command("record")(record)
