"""``agentload realism --against CORPUS --fit``: the modeled waits and the simulated model's
pacing fitted to a corpus, printed as a scenario's ``waits:`` and ``pacing:`` blocks (the
shipped presets' blocks were written this way).

Everything is read from the corpus as the statistics read it (``statistics.session_views``, on
its measured timeline):

* waits (``agentload.fitted.fit_gap``, per session): the gaps before a call that follows tool
  results (every agent's, as the realism statistic pools them), before a sub-agent's only,
  before a user turn;
* pacing (``fit_count``): per root agent, its calls over its user turns (so a session of the
  same length gets as many turns as the corpus's sessions), each sub-agent's calls, the output
  tokens of a root agent's answers (calls that stop without a tool call); and the share of a
  root agent's calls that break its prompt's prefix (``prefix_breaks``). ``min_calls``
  (``--min-calls``) fits the pacing to the sessions whose root agent makes that many calls or
  more: the class of session a scenario stands for (a long session's user turns are longer:
  the corpus's sessions of 100 calls or more make 26 calls a turn at the median, all of its
  sessions 11).
  The simulator draws each turn's length from that fit, so a session's turns number about its
  calls over the mean of the fit.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import yaml

from agentload.fitted import Pacing, WaitKind, WaitModel, fit_count, fit_gap
from agentload.realism.statistics import AgentView, SessionView, session_views
from agentload.trace.prefix import common_blocks
from agentload.trace.schema import LLMCallRecord, TurnKind
from agentload.trace.timeline import GapMode
from agentload.trace.trace import Trace

__all__ = ["fit_pacing", "fit_waits", "fitted_yaml"]


def _views(traces: Sequence[Trace]) -> list[SessionView]:
    return [v for t in traces for v in session_views(t, GapMode.MEASURED)]


def fit_waits(traces: Sequence[Trace], source: str) -> WaitModel:
    """The ``WaitModel`` of the corpus ``traces`` (module docstring)."""
    per: dict[WaitKind, list[list[float]]] = {k: [] for k in WaitKind}
    for view in _views(traces):
        got: dict[WaitKind, list[float]] = {k: [] for k in WaitKind}
        for a in view.agents:
            for g in a.gaps:
                if g.turn is TurnKind.TOOL:
                    got[WaitKind.TOOL].append(g.seconds)
                    if not a.root:
                        got[WaitKind.SUBAGENT_TOOL].append(g.seconds)
                elif g.turn is TurnKind.USER and a.root:
                    got[WaitKind.USER].append(g.seconds)
        for k, xs in got.items():
            per[k].append(xs)
    return WaitModel(
        source=source,
        after_tool=fit_gap(per[WaitKind.TOOL]),
        after_tool_subagent=fit_gap(per[WaitKind.SUBAGENT_TOOL]),
        before_user=fit_gap(per[WaitKind.USER]),
    )


def _calls_per_turn(a: AgentView) -> float:
    """A root agent's calls over its user turns (its first call opens the first)."""
    turns = 1 + sum(1 for g in a.gaps if g.turn is TurnKind.USER)
    return len(a.calls) / turns


BREAK_MIN_TOKENS = 4096
"""A prefix break re-sends at least this many tokens ..."""
BREAK_KEPT = 0.7
"""... and keeps less than this share of its prompt from the previous call's prefix."""


def prefix_breaks(trace: Trace, min_calls: int | None = None) -> tuple[int, int]:
    """(prefix breaks, calls) of the root agents of ``trace`` (of those with at least
    ``min_calls`` calls): a call whose prompt shares less than ``BREAK_KEPT`` of itself with its
    previous call's prompt (chained blocks) while at least ``BREAK_MIN_TOKENS`` are new: the
    system prompt, the tools or the history rewritten (a compaction, a changed tool list or
    memory)."""
    breaks = calls = 0
    bs = trace.header.block_size
    for agent in trace.agents.values():
        if agent.parent_agent_id is not None:
            continue
        mine = trace.calls_of(agent.id)
        if min_calls is not None and len(mine) < min_calls:
            continue
        calls += len(mine)
        for prev, cur in itertools.pairwise(mine):
            kept = bs * common_blocks(trace.blocks(prev), trace.blocks(cur))
            prompt = cur.usage.prompt_tokens_ours
            if prompt - kept >= BREAK_MIN_TOKENS and kept < BREAK_KEPT * prompt:
                breaks += 1
    return breaks, calls


def fit_pacing(traces: Sequence[Trace], source: str, min_calls: int | None = None) -> Pacing:
    """The ``Pacing`` of the corpus ``traces`` (module docstring); ``min_calls``: of its
    sessions whose root agent makes at least that many calls only."""
    turns: list[float] = []
    subs: list[float] = []
    answers: list[float] = []
    for view in _views(traces):
        if min_calls is not None and not any(len(a.calls) >= min_calls for a in view.roots):
            continue
        turns.extend(_calls_per_turn(a) for a in view.roots if a.calls)
        subs.extend(float(len(a.calls)) for a in view.subs if a.calls)
        for a in view.roots:
            answers.extend(
                float(n) for c, n in zip(a.calls, a.outputs, strict=True) if _is_answer(c)
            )
    breaks = [prefix_breaks(t, min_calls) for t in traces]
    n_calls = sum(c for _, c in breaks)
    where = f"; pacing of its sessions of {min_calls}+ root calls" if min_calls else ""
    return Pacing(
        source=source + where,
        turn_calls=fit_count(turns),
        subagent_calls=fit_count(subs),
        answer_tokens=fit_count(answers),
        context_refresh_per_call=round(sum(b for b, _ in breaks) / n_calls, 4) if n_calls else None,
    )


def _is_answer(call: LLMCallRecord) -> bool:
    """A call that ends its agent's turn: it stopped without calling a tool."""
    return call.response.finish_reason == "stop" and not call.response.tool_calls


def fitted_yaml(waits: WaitModel, pacing: Pacing) -> str:
    """``waits`` and ``pacing`` as a scenario's blocks."""
    body = {
        "waits": waits.model_dump(mode="json", exclude_none=True),
        "pacing": pacing.model_dump(mode="json", exclude_none=True),
    }
    return yaml.safe_dump(body, sort_keys=False, width=100)
