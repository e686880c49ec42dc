"""agentload.realism: how real our traces look, measured against a corpus of real sessions.

* ``statistics`` — every statistic defined once (unit, definition, values per session), read
  from the trace model on the timeline with modeled waits (``trace.timeline``);
* ``judge`` — ours beside the corpus: bands (the corpus's p25-p75), verdicts, KS distance, the
  ``agentload.realism/1`` document;
* ``sides`` — loading each side: traces as they are, anything else imported (``trace import``);
* ``run`` — one comparison end to end; ``render`` — the table (terminal, Markdown);
  ``figure`` — the CDF overlays (PNG, self-contained HTML); ``fit`` — the modeled waits fitted
  to a corpus (``--fit``); ``cli`` — ``agentload realism``.

docs/realism.md defines each statistic and holds the default scenario's table.
"""
