"""agentload.replay: identical, closed-loop agentic traffic against any endpoint.

A trace → identical load → request and session records; what they measure (metrics, results.json
and the files read from it) is ``agentload.measure``, the options ``agentload.options``, and the
requests go out through ``agentload.client`` (the streaming client with precise timings).

* ``plan``      — traces → per-session call graphs (bodies, digests, gaps, reuse ceilings);
  ``callplan``: what a plan is made of (``CallPlan``, ``SessionPlan``, ``Edge``)
* ``fit``       — ``--max-context``/``--fit``: each session cut (or left out) to fit a context
* ``salt``, ``reuse`` — the salt line and where it goes (``--salt-at``), and the reuse
  ceilings of requests as sent (within a session instance, across instances)
* ``bodies``    — a planned call → the body sent (the engine preset's extras, the session id)
* ``shapes``    — load shapes and the salted, replicated session pool
* ``schedule``  — runs one load point (warm-up, windows, the records; ``account``: what it
  recorded and has in flight); ``modes``: its three schedules behind one interface
  (closed-loop lanes, which a capacity search may move, Poisson arrivals, the recorded open loop)
* ``waker``, ``timerfd`` — sending on time: every due send in one heap, woken by a kernel
  timer (Linux) or a short spin, the request written by the waker itself (``client.gate``);
  ``heap``: the garbage collector kept off a running point's loaded plans
* ``scrape``    — the target's Prometheus ``/metrics``, sampled at 1 Hz
* ``points``    — one point run with its side tasks, and the executor and watcher interfaces
* ``prepare``   — what a run decides before the load: plans, APIs, load shapes, connections
* ``run``       — a whole run, one orchestration for either executor: levels, ``--repeat``, the
  ``--capacity`` search (``measure.capacity_search``; replay's probes: ``capacity_run``, or
  the stages of one run whose lanes ``measure.capacity_stages`` moves), results
* ``local``     — the executor of this machine
* ``sharded``, ``ray_actor`` — the executor of a Ray cluster (``--ray``): the driver's side, and
  the actor that runs one shard of each point (``sharded_point``: one point as the driver
  follows and merges it; docs/distributed.md)
* ``progress``  — the live progress line of a point
* ``cli``       — ``agentload replay|report|compare``

See docs/replay.md and docs/engines.md.
"""

__all__: list[str] = []
