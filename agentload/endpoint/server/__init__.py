"""agentload.endpoint.server: the simulated server's HTTP surface and how it is run.

* ``app`` — ``Simulator`` (one server's state: profile, engine, policy, caches) and
  ``build_app`` (the Starlette application: chat completions, responses, text completions, models,
  health, metrics);
* ``request`` — validation of chat- and text-completion bodies, OpenAI-shaped errors;
* ``sse`` — response bodies: SSE chunk streams and non-streaming JSON;
* ``responses_api`` — ``POST /v1/responses``: a Responses request read into chat
  (``agentload.wire.responses``), answered by ``Simulator.admit``, rendered as a ``response``
  object or its ``response.*`` event stream;
* ``metrics`` — ``/metrics``: Prometheus text named after vLLM's metrics;
* ``server`` — ``SimulatorServer``: uvicorn in a background thread (tests, ``generate``);
* ``cli`` — ``agentload serve``: the server in the foreground.
"""

from agentload.endpoint.server.app import Simulator, build_app
from agentload.endpoint.server.server import SimulatorServer

__all__ = ["Simulator", "SimulatorServer", "build_app"]
