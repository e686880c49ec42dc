"""agentload.client: the one client of the three LLM APIs (Chat Completions, Responses, Messages).

Replay sends a trace's requests with it and ``generate``'s agents their calls, so both share the
URL and secrets policy, the connections, the probe, the stream reading and timing, and the
error kinds. Nothing here retries: a request becomes an ``Outcome``, never an exception; the
agents' retry policy (``agents.llm``) asks ``failures.verdict`` what a failure means.

* ``stream``    — ``StreamClient``: one request sent and timed (a wait for a connection and the
  whole stream bounded), the probe, connection warm-up, a small non-streamed request
* ``deadline``  — the requests' time limits, filed per 10 ms tick: one loop timer a tick, not
  one a request
* ``target``    — where requests go and which secrets they carry: URLs, headers, what may be shown
* ``pool``      — the connections: one per concurrent stream (lean on plain HTTP, a
  single-connection httpx client on HTTPS), and the shared httpx client of the probes
* ``lean``      — a keep-alive HTTP/1.1 connection for one stream at a time: one write per
  request, no locks, an answer head read well once known by its bytes, the answer's body one
  network read at a time
* ``http1``     — strict HTTP/1.1 framing (heads, Content-Length, chunked and to-close bodies,
  header lines to write): the lean connection's and the recording proxy's
* ``netback``   — plain asyncio sockets with kernel receive times: under the lean connections
  and under httpcore; a body can be pumped to a sink from the socket's callback
* ``kstamps``   — kernel receive times (``SO_TIMESTAMPNS``) converted to ``perf_counter_ns``
* ``gate``      — a scheduled request written at its due time by whoever runs then (replay's
  waker), not by its task one loop turn later
* ``probe``     — ``GET /models`` (replay: the model must be listed; an agent run: a named
  model, or the first listed) and which APIs the endpoint speaks
* ``streams``   — an answer read into an ``Outcome``: every content event's time, usage, the
  failure; asked for the answer itself, ``wire``'s reader of its API reassembles it
* ``chatsse``   — a Chat Completions stream folded into an ``Outcome`` a read at a time
  (``ChatReader``: synchronous, so a lean connection feeds it from its socket's callback)
* ``textrun``   — a run of a Chat Completions stream's plain text deltas counted by the bytes
  around their text (learned from one parsed delta), not event by event
* ``outcome``   — ``Outcome``: what happened to one request
* ``failures``  — each failure to its ``measure.errorkinds.ErrorKind`` (or ``http_<status>``),
  and what it means for a retry (``Verdict``, ``Retry-After``)
"""

__all__: list[str] = []
