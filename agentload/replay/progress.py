"""Live progress of a replay: a rich panel on a terminal, plain periodic lines otherwise.

Shows sessions active, done (every planned call sent) and cut (stopped before their last call
by ``--duration`` or Ctrl-C), requests/s and output tokens/s over the last interval, the p50
TTFT of the latest requests, and errors.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agentload.quantiles import percentile
from agentload.replay.shapes import PointView

__all__ = ["Progress", "status_line"]


def status_line(
    runner: PointView, index: int, total: int, dt_s: float, prev: tuple[int, int]
) -> tuple[str, tuple[int, int]]:
    """One line of status and the (requests, tokens) counters to diff against next time."""
    st = runner.stats
    req_s = (st.requests - prev[0]) / dt_s if dt_s > 0 else 0.0
    tok_s = (st.output_tokens - prev[1]) / dt_s if dt_s > 0 else 0.0
    ttfts = st.ttfts
    p50 = f"{percentile(ttfts, 50) / 1e6:.1f} ms" if ttfts else "-"
    rate = runner.shape.load.arrival_rate
    level = rate if rate else runner.shape.concurrency
    head = f"{f'point {index + 1}/{total}' if total else f'probe {index + 1}'} (load {level})"
    text = (
        f"{runner.note or head}: sessions {st.active_sessions} active, "
        f"{st.done_sessions} done{f', {st.cut_sessions} cut' if st.cut_sessions else ''} | "
        f"{req_s:.1f} req/s | {tok_s:.0f} tok/s | "
        f"p50 TTFT {p50} | errors {st.errors}"
    )
    return text, (st.requests, st.output_tokens)


class Progress:
    """Call it as the ``progress`` hook of ``run_replay``."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self.interval = interval_s if interval_s is not None else (0.5 if self.live else 10.0)
        self.clock = clock

    async def __call__(self, runner: PointView, index: int, total: int) -> None:
        prev = (0, 0)
        last = self.clock()
        if not self.live:
            try:
                while True:
                    await asyncio.sleep(self.interval)
                    now = self.clock()
                    text, prev = status_line(runner, index, total, now - last, prev)
                    last = now
                    self.console.print(text, highlight=False, soft_wrap=True, markup=False)
            finally:
                text, _ = status_line(runner, index, total, self.clock() - last, prev)
                self.console.print(text, highlight=False, soft_wrap=True, markup=False)
        with Live(console=self.console, refresh_per_second=4, transient=False) as live:
            while True:
                await asyncio.sleep(self.interval)
                now = self.clock()
                text, prev = status_line(runner, index, total, now - last, prev)
                last = now
                table = Table.grid(padding=(0, 1))
                table.add_row("[bold]agentload replay[/]", Text(text))
                live.update(table)
