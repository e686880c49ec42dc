"""agentload.record: the recording proxy, ``agentload record`` (docs/record.md).

Any agent that lets you set its base URL talks to its upstream through this proxy, unchanged,
and its LLM calls land in an ordinary agentload trace: replayable, exportable, redactable.

* ``proxy``    — the ASGI reverse proxy: forwards every request, streams chunk by chunk, reads
  Chat Completions, Responses and Messages answers (``agentload.wire``) as they pass
* ``threads``  — sessions and agents rebuilt from the conversations (the rules are in its
  docstring and in docs/record.md), tool calls observed from replies and later requests
* ``recorder`` — one request and its answer → trace records (``CallCapture``, as ``generate``)
* ``server``   — ``RecordServer``: uvicorn, the trace writer, the stop conditions
* ``cli``      — the ``agentload record`` command
"""

__all__: list[str] = []
