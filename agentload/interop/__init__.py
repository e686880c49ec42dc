"""Traces in and out: other tools' formats to agentload traces and back, and redacted sharing.

* ``imports``: ``agentload trace import {claude-code,codex,openhands,mlperf,atif,otel,weka,
  tracelab,mooncake,dynamo,auto}``, one module per source format. ``claude_code``, ``codex``,
  ``openhands``, ``mlperf``, ``atif`` and ``otel_in`` turn agents' logs, agent datasets and
  OTel spans into full-content traces: each call rebuilt as the request the agent sent, played
  through the recording proxy's recorder in proxy order by ``exchanges``. ``claude_code`` reads
  the logs with ``claude_code_log``; ``atif`` reads trajectories with ``atif_trajectory`` (their
  steps: ``atif_steps``). ``chat_rows`` is what the chat-message trajectory importers
  (``openhands``, ``mlperf``, ``atif``) share; ``otel_in``
  reads OTLP/JSON with ``otlp_json`` and a span's GenAI attributes with ``genai_attrs`` (the
  conventions' parts form both ways: ``genai_parts``, shared with the export). ``weka``,
  ``tracelab``, ``mooncake`` and ``dynamo_trace`` (NVIDIA Dynamo's request trace; its tree of
  sessions: ``dynamo_tree``) stream their input into an ordinary, content-free agentload trace
  (see ``agentload.trace.schema``: content-free traces); ``weka_fields`` reads Weka's
  fields, ``import_io`` reads their JSONL sources and writes their traces. Every
  importer reads its fields and counts its deviations with ``content_free``.
* ``exports``: ``agentload trace export {weka,mooncake,otel}``, one module per target format
  (``weka_out``, ``mooncake_out``, ``otel``).
* ``redact``: ``agentload trace redact``: the same trace with every text replaced by lengths and
  salted block ids.

The mapping of every field, and what each direction loses, is in docs/trace-formats.md.
"""
