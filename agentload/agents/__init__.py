"""The agents of ``agentload generate``: a LangGraph orchestrator and its sub-agents.

Roles, tool names and schemas are ``agentload.contract`` (shared with the tools, the
scenarios and the simulator's policy). Running many sessions, on this machine or on Ray, and
measuring them is ``agentload.generate``. Modules:

* ``graphs``    — the orchestrator graph
* ``subagents`` — one sub-agent graph per kind, and the cut-reply handling both graphs share
* ``steps``     — one recorded model call, one recorded tool call
* ``llm``       — an agent's model calls: retries, backoff and the session's end over
  ``agentload.client`` (the one client of the LLM APIs)
* ``limits``    — the session's limits and what ends it
* ``runtime``   — what the graphs' nodes need at run time (settings, client, tools, recorder)
* ``first_prompt`` — the orchestrator's first prompt, sized to the scenario's budget
* ``tracing``   — the session's trace records and live counters (written to a ``TraceSink``)
* ``session``   — one session: workspace, sandbox, toolbox, graph, end reason
"""
