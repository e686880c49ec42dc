"""agentload.endpoint: the built-in simulated OpenAI-compatible server.

``SimulatorServer`` runs it in-process (tests, ``generate``); ``agentload serve`` runs it in
the foreground. See docs/simulator.md. Three sub-packages, each importing only the ones after
it (``server`` → ``timing`` → ``policy``):

* ``server/`` — the HTTP surface and how it is run
  * ``app``      — ``Simulator`` (one server's state and caches) and ``build_app`` (Starlette)
  * ``request``  — chat-completion bodies validated, OpenAI-shaped errors
  * ``lengths``  — a reply fitted to the request's length controls (max/min tokens, stop)
  * ``sse``      — response bodies: SSE chunk streams (paced by token) and non-streaming JSON
  * ``messages_api`` — ``POST /v1/messages``: Anthropic Messages on the chat pipeline
  * ``responses_api`` — ``POST /v1/responses``: OpenAI Responses answered through chat
  * ``gemini_api`` — ``POST …/models/{model}:generateContent``: Google's Gemini API through chat
  * ``metrics``  — ``/metrics``: Prometheus text named after vLLM's, read from the engine
  * ``server``   — ``SimulatorServer``: uvicorn in a background thread (``ServeOptions``:
    address, TLS, API key)
  * ``cli``      — ``agentload serve``
* ``timing/`` — when tokens are ready
  * ``profiles`` — the hardware ``Profile``; the shipped YAML profiles are in ``profiles/``
  * ``engine``   — the scheduler: admission, queueing, prefill and decode timing, preemption
  * ``kv``       — KV-cache blocks with prefix caching
  * ``clock``    — the one clock every sleep goes through (``VirtualClock`` for tests)
* ``policy/`` — the simulated "model": what each request gets back (``Policy`` in its
  ``__init__``: dispatch on the agent role inferred from the tools and messages)
  * ``types``    — ``PolicyConfig``, ``LengthDist``, ``Conversation``, ``Decision``
  * ``base``     — ``BasePolicy``: a request's conversation, vocabulary, prose, the plain reply
  * ``roles``    — which agent a request comes from (tools offered, system message wording)
  * ``agent_policy``, ``subagents`` — agentload's orchestrator and sub-agents played
  * ``reading``  — the policy's reading of an agent's conversation, and the shared pickers
  * ``facts``    — paths, locations, identifiers, errors read out of the conversation
  * ``prose``    — prose built from the conversation's own vocabulary
  * ``textgen``  — token-exact text with the server's tokenizer
"""

from agentload.endpoint.policy.types import LengthDist, PolicyConfig
from agentload.endpoint.server.app import Simulator, build_app
from agentload.endpoint.server.server import ServeOptions, SimulatorServer
from agentload.endpoint.timing.profiles import Profile, list_profiles, load_profile

__all__ = [
    "LengthDist",
    "PolicyConfig",
    "Profile",
    "ServeOptions",
    "Simulator",
    "SimulatorServer",
    "build_app",
    "list_profiles",
    "load_profile",
]
