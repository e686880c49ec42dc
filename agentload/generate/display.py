"""Progress of a generate run: a rich live table on a terminal, plain lines otherwise.

Per session: status, the orchestrator's current context (server-reported prompt tokens of its
last call), LLM calls, agents, tool time, and the calls in flight with the reply chunks they
have streamed so far and how long they have run (so a long or runaway reply is visible while it
runs); overall: tokens and tokens/s. Both displays read the sessions' live ``SessionStats``;
time comes from an injectable ns clock.

    progress = make_progress(console, context_target=400_000)
    async with progress:
        result = await generate(opts, progress)
    console.print(summary_table(result))
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agentload.agents.tracing import SessionStats

__all__ = ["LiveProgress", "PlainProgress", "make_progress", "streaming", "summary_table"]

Clock = Callable[[], int]


def _k(n: int | None) -> str:
    """``950``, ``12.3K``, ``4.56M``."""
    if n is None:
        return "-"
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    return f"{n / 1000:.1f}K" if n >= 1000 else str(n)


def streaming(stats: SessionStats, now_ns: int) -> str:
    """The session's calls in flight: ``1 call: 1,234 chunks, 200s`` (``""``: none)."""
    live = list(stats.live.values())
    if not live:
        return ""
    chunks = sum(c.chunks for c in live)
    oldest = max(0, now_ns - min(c.start_ns for c in live)) / 1e9
    calls = "1 call" if len(live) == 1 else f"{len(live)} calls"
    return f"{calls}: {chunks:,} chunks, {oldest:.0f}s"


class _Base:
    def __init__(self, console: Console, context_target: int, clock: Clock) -> None:
        self.console = console
        self.context_target = context_target
        self.clock = clock
        self.sessions: list[SessionStats] = []
        self.t0 = clock()

    def session_started(self, stats: SessionStats) -> None:
        self.sessions.append(stats)

    def session_ended(self, stats: SessionStats) -> None:
        pass

    def totals(self) -> tuple[int, int, float]:
        """(prompt+completion tokens, completion tokens, elapsed seconds)."""
        tokens = sum(s.prompt_tokens + s.completion_tokens for s in self.sessions)
        out = sum(s.completion_tokens for s in self.sessions)
        return tokens, out, max(1e-9, (self.clock() - self.t0) / 1e9)

    def overall_line(self) -> str:
        tokens, out, secs = self.totals()
        done = sum(1 for s in self.sessions if s.end_reason is not None)
        return (
            f"sessions {done}/{len(self.sessions)} done · {_k(tokens)} tokens "
            f"({tokens / secs:,.0f} tok/s, output {out / secs:,.0f} tok/s) · {secs:.1f}s"
        )

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class LiveProgress(_Base):
    """A rich live table, refreshed a few times a second."""

    def __init__(
        self, console: Console, context_target: int, clock: Clock = time.perf_counter_ns
    ) -> None:
        super().__init__(console, context_target, clock)
        self._live = Live(console=console, get_renderable=self.render, refresh_per_second=4)

    def render(self) -> Group:
        t = Table(box=None, pad_edge=False, header_style="bold")
        cols = (
            "session",
            "status",
            "orchestrator context",
            "calls",
            "agents",
            "tool s",
            "streaming",
        )
        for col in cols:
            t.add_column(col, justify="left" if col in ("session", "status") else "right")
        now = self.clock()
        for s in self.sessions:
            ctx = s.orch_last_prompt
            pct = f" ({100 * ctx / self.context_target:.0f}%)" if ctx else ""
            t.add_row(
                s.session_id,
                s.end_reason or s.status,
                f"{_k(ctx)}{pct}",
                str(s.calls),
                str(s.agents),
                f"{s.tool_ns / 1e9:.1f}",
                streaming(s, now) if s.end_reason is None else "",
            )
        return Group(t, Text(self.overall_line(), style="dim"))

    async def __aenter__(self) -> LiveProgress:
        self._live.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._live.stop()


class PlainProgress(_Base):
    """Plain lines (CI, pipes): one per session start and end, and a status line every
    ``interval_s`` seconds."""

    def __init__(
        self,
        console: Console,
        context_target: int,
        clock: Clock = time.perf_counter_ns,
        interval_s: float = 10.0,
    ) -> None:
        super().__init__(console, context_target, clock)
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def _print(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def session_started(self, stats: SessionStats) -> None:
        super().session_started(stats)
        self._print(f"{stats.session_id}: started")

    def session_ended(self, stats: SessionStats) -> None:
        self._print(
            f"{stats.session_id}: ended ({stats.end_reason}) after {stats.wall_ns / 1e9:.1f}s: "
            f"{stats.calls} calls, {stats.agents} agents, orchestrator context "
            f"{_k(stats.orch_first_prompt)} -> {_k(stats.orch_last_prompt)}"
        )

    def status_lines(self) -> list[str]:
        now = self.clock()
        lines = []
        for s in self.sessions:
            if s.end_reason is not None:
                continue
            line = (
                f"{s.session_id}: {s.status} · context {_k(s.orch_last_prompt)} · {s.calls} "
                f"calls · tools {s.tool_ns / 1e9:.1f}s"
            )
            live = streaming(s, now)
            lines.append(f"{line} · streaming {live}" if live else line)
        return [*lines, self.overall_line()]

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            for line in self.status_lines():
                self._print(line)

    async def __aenter__(self) -> PlainProgress:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def make_progress(console: Console, context_target: int) -> LiveProgress | PlainProgress:
    """Live table on a terminal, plain lines otherwise."""
    if console.is_terminal and not console.is_dumb_terminal:
        return LiveProgress(console, context_target)
    return PlainProgress(console, context_target)


def summary_table(rows: list[dict[str, Any]], *, evaluate: bool = False) -> Table:
    """The end-of-run table: one row per session (``run.summary_rows``) and a total row."""
    t = Table(
        title="generate summary",
        caption="tokens: prompt/output · orch ctx: the orchestrator's prompt tokens, first → "
        "last call · tools: share of the wall time when a tool ran",
        header_style="bold underline",
        box=None,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    cols = ["id", "end", "agents", "calls", "tokens", "orch ctx", "tools", "wall s"]
    if evaluate:
        cols.append("eval")
    for c in cols:  # a narrow terminal folds cells rather than cutting them
        t.add_column(c, justify="left" if c in ("id", "end") else "right", overflow="fold")
    for r in rows:
        share = r["tool_time_share"]
        cells = [
            r["session"],
            str(r["end_reason"]),
            str(r["agents"]),
            str(r["calls"]),
            f"{_k(r['prompt_tokens'])}/{_k(r['completion_tokens'])}",
            f"{_k(r['orchestrator_prompt_first'])}→{_k(r['orchestrator_prompt_last'])}",
            "-" if share is None else f"{100 * share:.0f}%",
            f"{r['wall_s']:.1f}",
        ]
        if evaluate:
            cells.append({True: "pass", False: "FAIL", None: "-"}[r["eval_passed"]])
        t.add_row(*cells)
    if len(rows) > 1:
        prompt = sum(r["prompt_tokens"] for r in rows)
        output = sum(r["completion_tokens"] for r in rows)
        total = [
            "total",
            "",
            str(sum(r["agents"] for r in rows)),
            str(sum(r["calls"] for r in rows)),
            f"{_k(prompt)}/{_k(output)}",
            "",
            "",
            f"{max(r['wall_s'] for r in rows):.1f}",
        ]
        if evaluate:
            passed = sum(1 for r in rows if r["eval_passed"])
            total.append(f"{passed}/{len(rows)}")
        t.add_row(*total)
    return t
