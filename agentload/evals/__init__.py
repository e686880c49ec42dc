"""agentload.evals: the eval task suite, its self-check, and the results of ``agentload eval``.

* ``tasks``     — the suite: ``presets/*.yaml``, one real bug each (``Task``, its ``Fault``,
  which is also the workspace fault of that name), ``select_tasks``, and ``SUITE_RUNNER``, the
  one test runner of every success check (``parse_suite`` reads its result line)
* ``taskcheck`` — the suite's self-check: clean, faulted and fixed runs of each task's suite
* ``cli``       — ``agentload scenarios tasks [--check]`` (mounted by ``scenarios.cli``)
* ``results``   — ``EvalDocument`` (eval.json, ``agentload.eval-results/1``): every attempt, per
  task pass@1 / pass@k (the unbiased estimator), wall time, tokens, calls, tool time and end
  reasons, the overall figures (solved tasks per hour, per GPU, per MW) and which mode ran
* ``report``    — the summary table, the HTML per-task grid (eval.html), eval.json and eval.html
  written together, and the per-task differences of two runs (``agentload compare``)

Running the eval's sessions is ``agentload.generate`` (``evalrun`` turns them into an
``EvalDocument``); the live run's solved-task metrics are ``measure.metrics.tasks``.
"""
