"""The simulated server's HTTP surface (Starlette): chat and text completions, Responses,
Messages and Gemini (``messages_api``, ``responses_api``, ``gemini_api``), models, health,
metrics.

``Simulator`` holds one server's state (profile, engine, policy, token and prefix caches);
``build_app`` wraps it in a Starlette application. Prompt tokens are counted with
``agentload.tokenizer.ChatTokenCounter`` (ids cached per message content) and block hashes
with ``agentload.trace.prefix.PrefixHasher`` (resumes from the longest known prefix), so a
400K-token request whose history was seen before costs O(new messages).
"""

from __future__ import annotations

import hmac
import itertools
import os
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import orjson
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agentload.endpoint.policy import Policy
from agentload.endpoint.policy.textgen import text_tokens
from agentload.endpoint.policy.types import PolicyConfig
from agentload.endpoint.server import gemini_api, messages_api
from agentload.endpoint.server.lengths import extend, fit_reply
from agentload.endpoint.server.metrics import metrics_registry, metrics_text
from agentload.endpoint.server.request import (
    APIError,
    ChatRequest,
    callable_tools,
    error_body,
    parse_chat_request,
    parse_completion_request,
)
from agentload.endpoint.server.responses_api import responses
from agentload.endpoint.server.sse import (
    Rendered,
    Reply,
    paced,
    render_json,
    render_stream,
    usage_event,
)
from agentload.endpoint.timing.clock import Clock
from agentload.endpoint.timing.engine import Engine, Sequence
from agentload.endpoint.timing.profiles import Profile, load_profile
from agentload.hashing import content_id
from agentload.tokenizer import DEFAULT_TOKENIZER, ChatTokenCounter
from agentload.trace.prefix import PrefixHasher, hash_prompt
from agentload.wire.apis import gemini_target

__all__ = ["Simulator", "build_app"]


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def _error(exc: APIError) -> Response:
    return Response(exc.body(), status_code=exc.status, media_type="application/json")


class Simulator:
    """One simulated server: profile, engine, policy and caches."""

    def __init__(
        self,
        profile: str | os.PathLike[str] | Profile = "instant",
        model: str = "agentload-sim",
        seed: int = 0,
        *,
        clock: Clock | None = None,
        tokenizer: str = DEFAULT_TOKENIZER,
        policy: PolicyConfig | None = None,
        policy_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.profile = load_profile(profile if isinstance(profile, Profile) else str(profile))
        self.model = model
        self.seed = seed
        self.engine = Engine(self.profile, clock)
        self.counter = ChatTokenCounter(tokenizer)
        self.hasher = PrefixHasher(self.profile.block_size)
        self.tokens = text_tokens(tokenizer)
        config = policy or self.profile.policy or PolicyConfig()
        if policy_overrides:
            config = PolicyConfig.model_validate({**config.model_dump(), **policy_overrides})
        self.policy = Policy(seed, self.tokens, config)
        self.created = int(time.time())
        self._ids = itertools.count(1)
        self._tag = os.urandom(3).hex()
        self._registry: CollectorRegistry | None = None  # made at the first scrape
        self.stored_responses: dict[str, list[dict[str, Any]]] = {}
        """``/v1/responses``' stored conversations (``previous_response_id``), oldest first."""

    # -- prompt accounting -------------------------------------------------------------------
    def prompt(self, req: ChatRequest) -> tuple[list[str], int, list[str]]:
        """Message content ids, prompt tokens and prompt block hashes of a request."""
        pp = hash_prompt(self.hasher, self.counter, req.messages, req.tools or None)
        mids, state = pp.message_ids, pp.state
        return mids, state.tokens, list(state.blocks)

    # -- the reply ---------------------------------------------------------------------------
    def reply(self, req: ChatRequest, mids: list[str], prompt_tokens: int) -> Reply:
        tools = callable_tools(req.tools)
        conv = self.policy.conversation(
            req.messages, mids, tools, req.tool_choice, prompt_tokens, req.seed
        )
        d = self.policy.decide(conv)
        if not req.parallel_tool_calls:
            d.tool_calls = d.tool_calls[:1]
        return fit_reply(self.tokens, req, d, prompt_tokens, conv.digest)

    # -- HTTP handlers -----------------------------------------------------------------------
    def _check(self, model: str, prompt_tokens: int, max_tokens: int | None, param: str) -> None:
        """``APIError`` for a model not served or a request longer than the context."""
        if model != self.model:
            raise APIError(
                404,
                f"The model `{model}` does not exist; this server serves `{self.model}`.",
                "model",
                "model_not_found",
            )
        limit = self.profile.max_context
        want = prompt_tokens + (max_tokens or 0)
        if prompt_tokens >= limit or want > limit:
            raise APIError(
                400,
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {want} tokens ({prompt_tokens} in the {param}, "
                f"{max_tokens or 0} in the completion).",
                param,
                "context_length_exceeded",
            )

    def admit(self, req: ChatRequest, param: str = "messages") -> tuple[Reply, Sequence]:
        """The reply to a validated chat request and its engine sequence; ``APIError`` for a
        model not served or a prompt over the context. ``/v1/chat/completions``,
        ``/v1/messages`` and ``/v1/responses`` all answer through here (the latter two on
        their translation to chat, ``agentload.wire``), so one conversation gets one reply
        whichever API carried it."""
        if req.model != self.model:
            self._check(req.model, 0, None, param)
        mids, prompt_tokens, hashes = self.prompt(req)
        self._check(req.model, prompt_tokens, req.max_tokens, param)
        reply = self.reply(req, mids, prompt_tokens)
        seq = Sequence(prompt_tokens, hashes, max(1, reply.completion_tokens))
        seq.finish_reason = reply.finish_reason
        return reply, seq

    def response_id(self, prefix: str) -> str:
        """A fresh response id, ``{prefix}-...`` (``chatcmpl``, ``msg``, ``resp``)."""
        return f"{prefix}-{self._tag}{next(self._ids):010x}"

    async def chat(self, request: Request) -> Response:
        try:
            req = parse_chat_request(await request.body())
            reply, seq = self.admit(req)
        except APIError as exc:
            return _error(exc)
        rid = self.response_id("chatcmpl")
        if req.stream:
            r = render_stream(reply, rid, self.created, self.model, req.include_usage)

            def on_first() -> None:
                if req.include_usage:
                    r.events[-2] = usage_event(reply, rid, self.created, self.model)

            return self.streaming(r, reply, seq, on_first)
        await self.finish(reply, seq)
        return Response(
            render_json(reply, rid, self.created, self.model), media_type="application/json"
        )

    async def finish(self, reply: Reply, seq: Sequence) -> None:
        """Run ``seq`` through the engine to its end (a non-streamed answer); sets the reply's
        cached tokens."""
        async for _ in self.engine.run(seq):
            pass
        reply.cached_tokens = seq.cached_tokens

    def streaming(
        self, r: Rendered, reply: Reply, seq: Sequence, on_first: Callable[[], None]
    ) -> StreamingResponse:
        """The SSE response that sends ``r``'s events as the engine generates tokens;
        ``on_first`` runs when the first token is ready (``reply.cached_tokens`` is known then:
        a renderer fills usage into its last events there)."""

        def first() -> None:
            reply.cached_tokens = seq.cached_tokens
            on_first()

        return StreamingResponse(
            paced(r, self.engine.run(seq), first),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )

    async def completions(self, request: Request) -> Response:
        """``POST /v1/completions``: one text prompt, answered without streaming, with usage.
        Prompt tokens are the prompt text's own count (no chat framing); the engine times it
        like a chat request, without prefix caching. What ``generate`` calibrates against."""
        try:
            req = parse_completion_request(await request.body())
            self._check(req.model, 0, None, "prompt")
            prompt_tokens = self.counter.count_text(req.prompt)
            self._check(req.model, prompt_tokens, req.max_tokens, "prompt")
        except APIError as exc:
            return _error(exc)
        messages = [{"role": "user", "content": req.prompt}]
        conv = self.policy.conversation(messages, [content_id(req.prompt)], [], "none", 0)
        d = self.policy.plain(conv)
        text = self.tokens.fit(extend(self.tokens, d, req.max_tokens + 16), req.max_tokens)
        n = self.tokens.count(text)
        finish = "length" if n >= req.max_tokens else "stop"
        seq = Sequence(prompt_tokens, [], max(1, n))
        async for _ in self.engine.run(seq):
            pass
        return _json(
            {
                "id": f"cmpl-{self._tag}{next(self._ids):010x}",
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": n,
                    "total_tokens": prompt_tokens + n,
                },
            }
        )

    async def models(self, request: Request) -> Response:
        return _json(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.model,
                        "object": "model",
                        "created": self.created,
                        "owned_by": "agentload",
                        "max_model_len": self.profile.max_context,
                    }
                ],
            }
        )

    async def health(self, request: Request) -> Response:
        return _json({"status": "ok", "model": self.model, "profile": self.profile.name})

    async def metrics(self, request: Request) -> Response:
        if self._registry is None:
            self._registry = metrics_registry(self.engine, self.model)
        body, ctype = metrics_text(self._registry)
        return Response(body, media_type=ctype)


def build_app(sim: Simulator, api_key: str | None = None) -> ASGIApp:
    """The ASGI application serving ``sim``; with ``api_key``, every ``/v1/`` and ``/v1beta/``
    request must carry ``Authorization: Bearer <api_key>`` (else 401, as vLLM's ``--api-key``
    does), while ``/health`` and ``/metrics`` stay open; ``/v1/messages`` also takes
    ``x-api-key: <api_key>`` (what Anthropic's SDK sends), a Gemini path
    ``x-goog-api-key: <api_key>`` (what Google's SDKs send)."""

    async def not_found(request: Request, exc: Exception) -> Response:
        return Response(
            error_body(404, f"no route {request.method} {request.url.path}", None, "not_found"),
            status_code=404,
            media_type="application/json",
        )

    async def bad_method(request: Request, exc: Exception) -> Response:
        return Response(
            error_body(405, f"method {request.method} not allowed", None, "method_not_allowed"),
            status_code=405,
            media_type="application/json",
        )

    routes = [
        Route("/v1/chat/completions", sim.chat, methods=["POST"]),
        Route("/v1/completions", sim.completions, methods=["POST"]),
        Route("/v1/messages", partial(messages_api.messages, sim), methods=["POST"]),
        Route("/v1/responses", partial(responses, sim), methods=["POST"]),
        Route("/v1/models", sim.models, methods=["GET"]),
        *_gemini_routes(sim),
        Route("/health", sim.health, methods=["GET"]),
        Route("/metrics", sim.metrics, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: bad_method})
    app.state.simulator = sim
    if api_key is None:
        return app
    expected = f"Bearer {api_key}".encode()
    key = api_key.encode()
    refused = error_body(401, "Incorrect API key provided", None, "invalid_api_key")

    async def keyed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(("/v1/", "/v1beta/")):
            path, headers = scope["path"], dict(scope["headers"])
            own = (
                b"x-api-key"
                if path == "/v1/messages"
                else b"x-goog-api-key"
                if path.startswith("/v1beta/") or gemini_target(path)
                else None
            )
            ok = hmac.compare_digest(headers.get(b"authorization", b""), expected) or (
                own is not None and hmac.compare_digest(headers.get(own, b""), key)
            )
            if not ok:
                await Response(refused, status_code=401, media_type="application/json")(
                    scope, receive, send
                )
                return
        await app(scope, receive, send)

    return keyed


def _gemini_routes(sim: Simulator) -> list[Route]:
    """Gemini's calls (``gemini_api``) under ``/v1beta`` and ``/v1``; its model list under
    ``/v1beta`` (``/v1/models`` is OpenAI's)."""
    call = partial(gemini_api.gemini, sim)
    return [
        Route("/v1beta/models/{target}", call, methods=["POST"]),
        Route("/v1/models/{target}", call, methods=["POST"]),
        Route("/v1beta/models/{target}", partial(gemini_api.gemini_model, sim), methods=["GET"]),
        Route("/v1beta/models", partial(gemini_api.gemini_models, sim), methods=["GET"]),
    ]
