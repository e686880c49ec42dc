"""agentload.generate: running agent sessions and measuring them — ``agentload generate`` and
``agentload eval``. The agents themselves are ``agentload.agents``; what is measured is written by
``agentload.measure``, the same code ``replay`` uses.

* ``options``    — ``GenerateOptions``: each option declared once, and the checks across them
* ``run``        — a generate run: N sessions, K at a time, one trace file
* ``sessions``   — the sessions the same on every executor: the agent kind's runner
  (agentload's agents or an agent product) and ``run_sessions``, K at a time
* ``dispatch``   — where a run goes, decided once: this process (agentload's agents, or an
  agent product: ``product_run``), or a Ray cluster (``--ray``)
* ``ray_driver`` — the run on a Ray cluster: the driver; ``ray_actor`` — the actor that runs a
  worker's sessions and relays their records
* ``calibrate``  — the run's server/ours token ratio, measured once before the sessions
* ``simproc``    — the built-in simulator in a child process
* ``live``       — the live benchmark: one run per ``--sweep`` level, its traces → the
  ``ResultsDocument`` (``mode: live``, its config an ``options.live.LiveConfig``),
  results.json, summary.csv, report.html
* ``live_capacity`` — ``--capacity``: a probe as rounds of live runs at one parallelism
  (the search itself is ``measure.capacity_search``'s)
* ``live_point`` — one run's trace → its ``Point``: the request and session records, the
  window, the aggregates
* ``evalrun``    — an eval run's sessions → ``EvalDocument`` (built, written and reported by
  ``agentload.evals``)
* ``display``    — the live table / plain lines and the summary table
* ``cli``        — ``agentload generate`` and ``agentload eval``
"""
