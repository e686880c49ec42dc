"""The live counters of a product's sessions, from what the recorder writes as it writes it.

A product's calls go through the run's recording proxy; its recorder process reports each call
and each request that closed tool runs (``record.sink.Recorded``). ``LiveCounts`` adds them to
the session's ``SessionStats``, so the progress display shows a product's context, tokens,
agents and tool time while it runs, as for the built-in agents. Once the trace is closed,
``product_run.counted`` sets every counter from the trace itself (what the summary shows).

    live = LiveCounts()
    proxy = RecordServer(opts, trace_path=..., header=..., on_recorded=live)
    ...
    live.watch(stats)        # as a session starts
"""

from __future__ import annotations

from agentload.agents.tracing import SessionStats
from agentload.record.ledger import header_session_id
from agentload.record.sink import Recorded

__all__ = ["LiveCounts"]


class LiveCounts:
    """Each watched session's counters, kept up to date from ``Recorded`` facts (called in the
    proxy's thread; the display only reads them)."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionStats] = {}
        self._agents: dict[str, set[str]] = {}

    def watch(self, stats: SessionStats) -> None:
        """Count what the recorder writes of ``stats``'s session from now on."""
        sid = header_session_id(stats.session_id)
        self._sessions[sid] = stats
        self._agents[sid] = set()

    def __call__(self, r: Recorded) -> None:
        st = self._sessions.get(r.session)
        if st is None:
            return
        agents = self._agents[r.session]
        agents.add(r.agent)
        st.agents = len(agents)
        st.tool_ns += r.tool_ns
        if not r.call:
            return
        st.prompt_tokens += r.prompt_tokens
        st.completion_tokens += r.completion_tokens
        st.tool_calls += r.tool_calls
        if r.root:
            st.orchestrator_calls += 1
            if st.orch_first_prompt is None:
                st.orch_first_prompt = r.prompt_tokens
            st.orch_last_prompt = r.prompt_tokens
