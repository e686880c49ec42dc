"""agentload.evals: the results of ``agentload eval`` over the task suite.

* ``results`` — ``EvalDocument`` (eval.json, ``agentload.eval-results/1``): every attempt, per
  task pass@1 / pass@k (the unbiased estimator), wall time, tokens, calls, tool time and end
  reasons, the overall figures (solved tasks per hour, per GPU, per MW) and which mode ran;
* ``report`` — the summary table, the HTML per-task grid (eval.html) and the per-task
  differences of two runs (``agentload compare``).
"""
