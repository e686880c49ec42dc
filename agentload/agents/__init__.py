"""The agents of ``agentload generate``: a LangGraph orchestrator and its sub-agents.

Roles, tool names and schemas are ``agentload.contract`` (shared with the tools, the
scenarios and the simulator's policy). Modules:

* ``graphs``    — the orchestrator graph and one sub-agent graph per kind
* ``steps``     — one recorded model call, one recorded tool call
* ``llm``       — the streamed chat-completions client (exact timings, retries)
* ``first_prompt`` — the orchestrator's first prompt, sized to the scenario's budget
* ``calibrate`` — the run's server/ours token ratio, measured once before the sessions
* ``tracing``   — the session's trace records and live counters (written to a ``TraceSink``)
* ``session``   — one session: workspace, sandbox, toolbox, graph, end reason
* ``run``       — a generate run: N sessions, K at a time, one trace file
* ``raygen``    — the same run on a Ray cluster (``--ray``): the driver; ``rayworker`` — the
  actor that runs a worker's sessions and relays their records
* ``live``      — the live benchmark: one run per ``--sweep`` level, its traces → replay's
  ``ResultsDocument`` (``mode: live``), results.json, summary.csv, report.html
* ``progress``  — the live table / plain lines and the summary table
* ``cli``       — ``agentload generate`` and ``agentload eval``
"""
