"""agentload.replay: identical, closed-loop agentic traffic against any endpoint.

* ``plan``      — traces → per-session call graphs (bodies, digests, gaps, reuse ceilings)
* ``shapes``    — load shapes and the salted, replicated session pool
* ``schedule``  — runs one load point (lanes or Poisson arrivals, warm-up, windows)
* ``client``    — the streaming HTTP client with precise timings (``netback``: its transport)
* ``metrics``   — one class per metric, formulas in docstrings
* ``run``       — a whole run: checks, probe, points, aggregates (``config``: its options)
* ``results``, ``report``, ``plots``, ``pareto``, ``compare`` — outputs
* ``cli``       — ``agentload replay|report|compare``

See docs/replay.md.
"""

__all__: list[str] = []
