"""agentload.replay: identical, closed-loop agentic traffic against any endpoint.

* ``plan``      — traces → per-session call graphs (bodies, digests, gaps, reuse ceilings)
* ``fit``       — ``--max-context``/``--fit``: each session cut (or left out) to fit a context
* ``engines``   — the engine presets (the extras each server accepts; docs/engines.md)
* ``salt``, ``reuse`` — the salt line and where it goes (``--salt-at``), and the reuse
  ceilings of requests as sent (within a session instance, across instances)
* ``shapes``    — load shapes and the salted, replicated session pool
* ``schedule``  — runs one load point (lanes or Poisson arrivals, warm-up, windows)
* ``client``    — the streaming HTTP client with precise timings (``netback``: its transport)
* ``metrics``   — one class per metric, formulas in docstrings (``tasks``: pass rate and
  solved tasks of a live eval run)
* ``config``    — ``ReplayConfig``: the options of a run and every check of their values
* ``run``       — a whole run: plans, probe, points, aggregates
* ``sharded``, ``worker`` — the same run on a Ray cluster (``--ray``): the driver, and the actor
  that runs one shard of each point (docs/distributed.md)
* ``records``   — the request, session and window records (pydantic dataclasses), the
  measured window and the phase of each request
* ``results``   — ``ResultsDocument``: results.json, typed and versioned (write, read)
* ``verdict``   — the exit code of a run (0, 2, 3, 130), decided in one place
* ``summary``, ``report``, ``plots``, ``pareto``, ``compare`` — outputs read from it
* ``cli``       — ``agentload replay|report|compare``

See docs/replay.md and docs/engines.md.
"""

__all__: list[str] = []
