"""agentload.endpoint.server: the simulated server's HTTP surface and how it is run.

* ``app`` — ``Simulator`` (one server's state: profile, engine, policy, caches) and
  ``build_app`` (the Starlette application: chat completions, messages, responses, Gemini,
  text completions, models, health, metrics);
* ``request`` — validation of chat- and text-completion bodies, OpenAI-shaped errors;
* ``lengths`` — a chat reply fitted to ``max_tokens``, ``min_tokens``, ``stop``, ``ignore_eos``;
* ``sse`` — response bodies: SSE chunk streams (and their pacing) and non-streaming JSON;
* ``messages_api`` — ``POST /v1/messages``: Anthropic Messages read into chat, answered by
  ``Simulator.admit``, rendered as Anthropic's message JSON or SSE events, Anthropic errors;
* ``responses_api`` — ``POST /v1/responses``: a Responses request read into chat
  (``agentload.wire.responses``), answered by ``Simulator.admit``, rendered as a ``response``
  object or its ``response.*`` event stream;
* ``gemini_api`` — ``POST …/models/{model}:generateContent`` (``/v1beta``, ``/v1``): Google's
  Gemini API read into chat (``agentload.wire.gemini``), answered by ``Simulator.admit``,
  rendered as a ``GenerateContentResponse`` or its SSE events; ``:countTokens``, the model
  list, Google's errors;
* ``answering`` — ``Answering``: the part of ``Simulator`` those handlers use (a protocol);
* ``metrics`` — ``/metrics``: Prometheus text named after vLLM's metrics;
* ``server`` — ``SimulatorServer``: uvicorn in a background thread (tests, ``generate``), and
  ``ServeOptions`` (its address, TLS files and API key);
* ``cli`` — ``agentload serve``: the server in the foreground.
"""

from agentload.endpoint.server.app import Simulator, build_app
from agentload.endpoint.server.server import ServeOptions, SimulatorServer

__all__ = ["ServeOptions", "Simulator", "SimulatorServer", "build_app"]
