"""Traces in and out: other tools' formats to agentload traces and back, and redacted sharing.

* ``imports``: ``agentload trace import {weka,tracelab,mooncake}``, one module per source format
  (``weka``, ``tracelab``, ``mooncake``); each streams its input into an ordinary, content-free
  agentload trace (see ``agentload.recorder.schema``: content-free traces).
* ``exports``: ``agentload trace export {weka,mooncake,otel}``, one module per target format
  (``weka_out``, ``mooncake_out``, ``otel``).
* ``redact``: ``agentload trace redact``: the same trace with every text replaced by lengths and
  salted block ids.

The mapping of every field, and what each direction loses, is in docs/trace-formats.md.
"""
