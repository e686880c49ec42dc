"""agentload.record: the recording proxy, ``agentload record`` (docs/record.md).

Any agent that lets you set its base URL talks to its upstream through this proxy, unchanged,
and its LLM calls land in an ordinary agentload trace: replayable, exportable, redactable.

* ``relay``    — the reverse proxy on raw asyncio protocols: forwards every request and its
  answer's bytes as they come, keeps a recorded call's payload and arrival times; here
  ``Relay`` and its agent connections (request heads read, keep-alive, timeouts)
* ``exchange`` — one request and its answer: the request forwarded upstream, the failures, the
  end (the answer to the sink, the connections kept or closed)
* ``answer``   — the upstream's answer in an exchange: its head read (interim answers skipped, a
  101 checked), its body relayed as framed and, for a recorded call, kept with its arrival times
* ``upstream`` — the ``--upstream`` URL and one connection to it
* ``heads``    — what the relay writes of its own: rebuilt heads, its error answers (the
  HTTP/1.1 framing it reads and writes is ``client.http1``, shared with the client)
* ``sink``     — what it hands the recorder process of a recorded call (``Answer``)
* ``websocket`` — WebSocket upgrades checked and tunnelled frame by frame, a tunnel's messages
  and end noted as events
* ``recorder_process`` — the recorder process, at a lower CPU priority: reads each recorded call's
  request and answer (Chat Completions, Responses, Messages, Gemini: ``agentload.wire``) and writes the
  trace, so that recording never delays forwarding (the proxy's end; the process's own end is
  ``recorder_child``)
* ``threads``  — sessions and agents rebuilt from the conversations (the rules are in its
  docstring and in docs/record.md), tool calls observed from replies and later requests
* ``parents``  — rules 3 and 5: the call a new thread is a sub-agent of (by name, by id, by
  task text; a fork that comes before its parent's next request)
* ``sides``    — rule 7: the session a headerless side call (a title, a summary) belongs to,
  and the side agents of each session once the recording is over
* ``ledger``   — the bookkeeping under those rules: agents, sessions, tool calls outstanding
  and answered, where a request was placed (``Placement``)
* ``matching`` — the comparisons the rules make on messages (``reply_match``: a turn carried
  back exactly or changed, ``same_reply``,
  ``delegation_like``, a task's text, the names a result gives)
* ``native``   — the session and agent an agent's own headers name (Claude Code, Codex)
* ``transcribe`` — one request and its answer → trace records (``CallCapture``, as ``generate``;
  a closed tool call → its ``tool_call`` record)
* ``server``   — ``RecordServer``: the relay, the recorder process, the stop conditions
* ``cli``      — the ``agentload record`` command
"""

__all__: list[str] = []
