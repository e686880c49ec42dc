"""Context-growth plot of a trace: prompt tokens vs call index, one line per agent.

Orchestrators (agents without a parent) are drawn thick and dark; sub-agents thin, coloured
by role with one legend entry per role, so a run with hundreds of sub-agents stays readable.
When there are sub-agents, a second panel shows them alone on their own (smaller) scale.
Rendered with matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentload.outfile import atomic_output
from agentload.trace.trace import Trace

__all__ = ["plot_context_growth", "save_figure"]

_ROLE_COLOURS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


_Series = tuple[str, bool, list[int], list[float]]
"""One agent's line: its role, whether it is a root (an orchestrator), call seqs, prompt kTokens."""


def plot_context_growth(trace: Trace, out: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write the PNG to ``out`` (an existing one replaced only with ``force``) and return its
    path."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    series = _series(trace)
    has_subs = any(not root for _, root, _, _ in series)
    if has_subs:
        fig, axes = plt.subplots(
            1, 2, figsize=(12, 5), dpi=150, gridspec_kw={"width_ratios": [3, 2]}
        )
        main_ax, sub_ax = axes[0], axes[1]
    else:
        fig, main_ax = plt.subplots(figsize=(9, 5), dpi=150)
        sub_ax = None
    colours: dict[str, str] = {}
    for ax, zoom in ((main_ax, False), (sub_ax, True)):
        if ax is not None:
            _draw_panel(ax, series, zoom, colours)
    title = f"Context growth per agent — {Path(trace.path).name}"
    if trace.header.model:
        title += f" ({trace.header.model})"
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return save_figure(fig, out, force=force)


def _series(trace: Trace) -> list[_Series]:
    """One line per agent with calls, in the order the agents started."""
    agent_ids = list(
        dict.fromkeys(
            [a.id for a in sorted(trace.agents.values(), key=lambda a: a.start_ns)]
            + sorted({c.agent_id for c in trace.calls.values()})
        )
    )
    series: list[_Series] = []
    for aid in agent_ids:
        calls = trace.calls_of(aid)
        if not calls:
            continue
        agent = trace.agents.get(aid)
        role = agent.role if agent else "unknown"
        is_root = role == "orchestrator" or (agent is not None and agent.parent_agent_id is None)
        xs = [c.seq for c in calls]
        ys = [trace.prompt_tokens(c) / 1000 for c in calls]
        series.append((role, is_root, xs, ys))
    return series


def _draw_panel(ax: Any, series: list[_Series], zoom: bool, colours: dict[str, str]) -> None:
    """One panel: every agent (roots thick and dark), or with ``zoom`` the sub-agents alone;
    a sub-agent's colour is its role's (``colours``, shared by the panels)."""
    from matplotlib.ticker import MaxNLocator

    labelled: set[str] = set()
    for role, is_root, xs, ys in series:
        label = role if role not in labelled else None
        if is_root and not zoom:
            labelled.add(role)
            ax.plot(
                xs,
                ys,
                color="#111111",
                linewidth=2.6,
                marker="o",
                markersize=2.5,
                label=label,
                zorder=3,
            )
        elif not is_root:
            labelled.add(role)
            colour = colours.setdefault(role, _ROLE_COLOURS[len(colours) % len(_ROLE_COLOURS)])
            ax.plot(xs, ys, color=colour, linewidth=1.0, alpha=0.6, label=label, zorder=2)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("call index within the agent")
    ax.set_ylabel("prompt tokens (thousands)")
    ax.grid(True, alpha=0.3)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    if labelled:
        ax.legend(loc="upper left", frameon=False, fontsize=9)
    ax.set_title("sub-agents (zoomed)" if zoom else "all agents", fontsize=10)


def save_figure(fig: Any, out: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write a matplotlib figure to ``out`` as every output file is written
    (``outfile.atomic_output``, option ``--plot``: replaced only with ``force``, whole or not
    at all), close it, return the path; a path that cannot be written is one ConfigError line."""
    from matplotlib import pyplot as plt

    path = Path(out)
    try:
        with atomic_output(path, option="--plot", force=force) as tmp:
            fig.savefig(tmp, format="png")
    finally:
        plt.close(fig)
    return path
