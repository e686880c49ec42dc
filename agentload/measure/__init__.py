"""agentload.measure: what was measured, however it was produced — request and session records,
one class per metric, points, the results document and every output read from it. ``replay``
produces records by sending a trace; ``generate`` and ``eval`` from the calls their agents
made; both write them with the same code.

* ``records``  — the request, session and window records (pydantic dataclasses), the measured
  window and the phase of each request (``Phase``)
* ``metrics``  — one class per metric, formulas in docstrings (``tasks``: pass rate and solved
  tasks of a live eval run)
* ``results``  — ``ResultsDocument``: results.json, typed and versioned (write, read); its parts:
  ``aggregates`` (a point's and a group's metric values), ``points`` (a load point),
  ``runinfo`` (environment, engine, plan, live run, cluster)
* ``capacity`` — capacity at an SLO: the objectives, a percentile's exact one-sided bounds
  (``binomial``), a point's verdict, results.json's ``capacity`` object; ``capacity_search``:
  the search's probes and answer (replay's and generate's), ``capacity_stages``: the search in
  one run whose lanes it moves, ``search``: the levels (a climb, then probes placed where the
  margins cross, both ends confirmed), ``steady``: when a probe has measured enough, the
  sequential test (on a running point, ``LivePoint``)
* ``power``    — energy: NVML sampling and the window's average watts
* ``files``    — a run's files written one way (results.json, summary.csv, report.html)
* ``verdict``  — the exit code of a run (0, 2, 3, 130), decided in one place
* ``repeats``  — ``--repeat``: each headline metric's mean and 95% interval per load
* ``summary``, ``report``, ``plots``, ``pareto``, ``compare`` — outputs read from it;
  ``interactive`` (with ``report.js``): the report's interactive Pareto plots and swim lanes

See docs/replay.md ("Metrics", "Outputs").
"""

__all__: list[str] = []
