"""``Answering``: what the ``/v1/messages``, ``/v1/responses`` and Gemini handlers use of
``app.Simulator`` (a protocol, so those modules and ``app`` do not import each other)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from starlette.responses import StreamingResponse

from agentload.endpoint.server.request import ChatRequest
from agentload.endpoint.server.sse import Rendered, Reply
from agentload.endpoint.timing.engine import Sequence

__all__ = ["Answering"]


class Answering(Protocol):
    """The simulator's chat pipeline: admit a chat request, pace or finish its reply."""

    model: str
    created: int
    stored_responses: dict[str, list[dict[str, Any]]]
    """``/v1/responses``' stored conversations (``previous_response_id``), oldest first."""

    def admit(self, req: ChatRequest, param: str = ...) -> tuple[Reply, Sequence]: ...

    def prompt(self, req: ChatRequest) -> tuple[list[str], int, list[str]]:
        """Message content ids, prompt tokens and prompt block hashes of a request."""
        ...

    def response_id(self, prefix: str) -> str: ...

    async def finish(self, reply: Reply, seq: Sequence) -> None: ...

    def streaming(
        self, r: Rendered, reply: Reply, seq: Sequence, on_first: Callable[[], None]
    ) -> StreamingResponse: ...
