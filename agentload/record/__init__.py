"""agentload.record: the recording proxy, ``agentload record`` (docs/record.md).

Any agent that lets you set its base URL talks to its upstream through this proxy, unchanged,
and its LLM calls land in an ordinary agentload trace: replayable, exportable, redactable.

* ``relay``    — the reverse proxy on raw asyncio protocols: forwards every request and its
  answer's bytes as they come, keeps a recorded call's payload and arrival times
* ``http1``    — the HTTP/1.1 framing it reads (heads, Content-Length and chunked bodies)
* ``worker``   — the recorder process, at a lower CPU priority: reads each recorded call's
  request and answer (Chat Completions, Responses, Messages: ``agentload.wire``) and writes the
  trace, so that recording never delays forwarding
* ``threads``  — sessions and agents rebuilt from the conversations (the rules are in its
  docstring and in docs/record.md), tool calls observed from replies and later requests
* ``recorder`` — one request and its answer → trace records (``CallCapture``, as ``generate``)
* ``server``   — ``RecordServer``: the relay, the recorder process, the stop conditions
* ``cli``      — the ``agentload record`` command
"""

__all__: list[str] = []
