"""One realism comparison: load both sides, observe every statistic, judge, build the document."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentload.realism.judge import RealismDocument, Side, Verdict, judge
from agentload.realism.sides import by_design, load_side, waits_of
from agentload.realism.statistics import Observations, observe
from agentload.trace.timeline import GapMode
from agentload.trace.trace import Trace

__all__ = ["Comparison", "compare_paths", "observe_all"]


@dataclass
class Comparison:
    """The document and the observations it was judged from (the figure draws these)."""

    doc: RealismDocument
    ours: Observations
    corpus: Observations


def observe_all(traces: Sequence[Trace], mode: GapMode) -> Observations:
    """Every trace observed and pooled (sessions of different files kept apart)."""
    out = Observations()
    for i, t in enumerate(traces):
        out.extend(observe(t, mode), prefix=f"{i}:")
    return out


def _label(paths: Sequence[str], traces: Sequence[Trace]) -> str:
    names = {t.header.scenario for t in traces if t.header.scenario}
    if len(names) == 1:
        return names.pop() or "ours"
    if len(paths) == 1:
        return Path(paths[0]).name.split(".")[0] or "traces"
    return f"{len(paths)} paths"


def _source(traces: Sequence[Trace]) -> str | None:
    for t in traces:
        src = t.header.source
        if src is not None:
            more = f" (+{src.files_total - len(src.files)})" if src.files_total else ""
            return f"{src.format} import of {len(src.files)}{more} files"
    return None


def compare_paths(
    ours: Sequence[str],
    corpus: Sequence[str],
    *,
    mode: GapMode = GapMode.MODELED,
    labels: tuple[str, str] | None = None,
) -> Comparison:
    """``ours`` against ``corpus`` (paths of traces, or of anything agentload imports)."""
    with load_side(ours) as a, load_side(corpus) as b:
        obs_a, obs_b = observe_all(a, mode), observe_all(b, mode)
        rows = judge(obs_a, obs_b, by_design=by_design(a))
        waits = waits_of(a) if mode is GapMode.MODELED else []
        la = labels[0] if labels else _label(ours, a)
        lb = labels[1] if labels else _label(corpus, b)
        doc = RealismDocument(
            gaps=mode.value,
            ours=Side(
                label=la,
                files=[str(p) for p in ours],
                sessions=obs_a.sessions,
                modeled_waits="\n".join(waits) or None,
            ),
            corpus=Side(
                label=lb,
                files=[str(p) for p in corpus],
                sessions=obs_b.sessions,
                source=_source(b),
                modeled_waits="\n".join(waits_of(b)) or None,
            ),
            rows=rows,
            in_band=sum(1 for r in rows if r.verdict is Verdict.IN),
            judged=sum(1 for r in rows if r.verdict is not Verdict.NO_DATA),
        )
    return Comparison(doc, obs_a, obs_b)
