"""agentload.endpoint.policy: the simulator's "model", what each request gets back."""

from agentload.endpoint.policy.types import Conversation, Decision, LengthDist, Policy, PolicyConfig

__all__ = ["Conversation", "Decision", "LengthDist", "Policy", "PolicyConfig"]
