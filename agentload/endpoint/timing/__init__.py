"""agentload.endpoint.timing: when the simulated server's tokens are ready.

* ``profiles`` — the hardware ``Profile`` (rates, batch limit, KV capacity, context limit), the
  shipped YAML profiles in ``profiles/`` and ``load_profile``;
* ``engine`` — the scheduler: admission, queueing, prefill and decode timing, preemption, and
  the counters ``/metrics`` reads;
* ``kv`` — KV-cache block accounting with prefix caching (LRU over resident blocks);
* ``clock`` — the one clock every sleep goes through (``RealClock``, ``VirtualClock`` for tests).
"""

from agentload.endpoint.timing.clock import Clock, RealClock, VirtualClock
from agentload.endpoint.timing.engine import Engine, Sequence
from agentload.endpoint.timing.kv import KVCache
from agentload.endpoint.timing.profiles import Profile, list_profiles, load_profile

__all__ = [
    "Clock",
    "Engine",
    "KVCache",
    "Profile",
    "RealClock",
    "Sequence",
    "VirtualClock",
    "list_profiles",
    "load_profile",
]
