"""The agents of ``agentload generate``: a LangGraph orchestrator and its sub-agents.

Modules (imported on use, so ``agentload.agents.contract`` stays light for the simulator):

* ``contract``  — role markers, tool names and schemas shared with the simulator's policy
* ``graphs``    — the orchestrator graph and one sub-agent graph per kind
* ``steps``     — one recorded model call, one recorded tool call
* ``llm``       — the streamed chat-completions client (exact timings, retries)
* ``context``   — the orchestrator's first prompt, sized to the scenario's budget
* ``recording`` — the session's trace records and live counters
* ``session``   — one session: workspace, sandbox, toolbox, graph, end reason
* ``run``       — a generate run: N sessions, K at a time, one trace file
* ``progress``  — the live table / plain lines and the summary table
* ``cli``       — ``agentload generate`` and ``agentload eval``
"""
