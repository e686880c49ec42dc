"""agentload.options: the options of the commands, declared once, with every check of their
values (the CLI turns a failed check into one line naming the option).

* ``values``  — limits of the count options, the text forms (durations, SLOs, levels), what a
  header, body field or endpoint URL may be
* ``slo``     — ``Objective`` (what an SLO bounds) and ``--slo``'s text form
* ``modes``   — the words of the few-words options (``--salt-at``, ``--fit``)
* ``engines`` — the engine presets (the extras each server accepts; docs/engines.md)
* ``measure``, ``capacity`` — the measurement options (GPUs, power, SLO, targets) and, on top,
  the capacity search's (``--capacity``, ``--slo-percentile``, …), shared by replay and generate
* ``load``    — ``LoadOptions`` (a replay's load) and ``Levels`` (``--concurrency``, ``--sweep``,
  ``--parallel``, ``-p``: one option in every command that offers load)
* ``cluster`` — ``ClusterOptions``: ``--ray``, ``--workers``, shared by replay and generate
* ``replay``  — ``ReplayConfig``: the options of a replay run (stored in results.json)
* ``live``    — ``LiveConfig``: what a live run (``generate``/``eval``) stores in results.json
"""

__all__: list[str] = []
