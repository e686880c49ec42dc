"""agentload.endpoint: the built-in simulated OpenAI-compatible server.

``SimulatorServer`` runs it in-process (tests, ``generate``); ``agentload serve`` runs it in
the foreground. See docs/simulator.md.
"""

from agentload.endpoint.policy.types import LengthDist, PolicyConfig
from agentload.endpoint.server.app import Simulator, build_app
from agentload.endpoint.server.server import SimulatorServer
from agentload.endpoint.timing.profiles import Profile, list_profiles, load_profile

__all__ = [
    "LengthDist",
    "PolicyConfig",
    "Profile",
    "Simulator",
    "SimulatorServer",
    "build_app",
    "list_profiles",
    "load_profile",
]
