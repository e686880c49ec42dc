"""A chat reply fitted to the request's length controls.

The policy's ``Decision`` says what to answer; ``fit_reply`` makes the ``Reply`` the server
sends: ``ignore_eos`` with ``max_tokens`` fills exactly ``max_tokens`` (finish ``length``), a
``stop`` string cuts the text there and drops the tool calls, a reply over ``max_tokens`` is cut
to it (finish ``length``), one under ``min_tokens`` is lengthened to it, an empty one gets one
token. Text is lengthened from the decision's own continuation (``Decision.more``).
"""

from __future__ import annotations

import orjson

from agentload.endpoint.policy.textgen import TextTokens
from agentload.endpoint.policy.types import Decision
from agentload.endpoint.server.request import ChatRequest
from agentload.endpoint.server.sse import Reply

__all__ = ["extend", "fit_reply"]


def extend(tok: TextTokens, d: Decision, n: int) -> list[str]:
    """``d``'s text segments, continued until they hold at least ``n`` tokens (or ``d`` has no
    more)."""
    segs = list(d.segments)
    have = tok.count("".join(segs))
    while have < n:
        extra = d.more(max(32, n - have))
        if not extra:
            break
        if segs and not extra[0].startswith((" ", "\n")):
            extra[0] = " " + extra[0]
        segs.extend(extra)
        have += tok.count("".join(extra))
    return segs


def fit_reply(
    tok: TextTokens, req: ChatRequest, d: Decision, prompt_tokens: int, digest: int
) -> Reply:
    """The reply to ``req`` from ``d``, within its length controls; tool call ids come from the
    conversation's ``digest``."""
    calls = [(n, orjson.dumps(a).decode()) for n, a in d.tool_calls]
    finish = "tool_calls" if calls else "stop"
    if req.ignore_eos and req.max_tokens is not None:
        text = tok.fit(extend(tok, d, req.max_tokens + 16), req.max_tokens)
        calls, finish = [], "length"
    else:
        text = "".join(d.segments)
        for s in req.stop:
            cut = text.find(s) if s else -1
            if cut >= 0:
                text, calls, finish = text[:cut], [], "stop"
        arg_tokens = sum(tok.count(a) for _, a in calls)
        total = tok.count(text) + arg_tokens
        if req.max_tokens is not None and total > req.max_tokens:
            text = tok.fit(extend(tok, d, req.max_tokens + 16), req.max_tokens)
            calls, finish = [], "length"
        elif req.min_tokens and total < req.min_tokens:
            want = req.min_tokens - arg_tokens
            text = tok.fit(extend(tok, d, want + 16), want)
        elif total == 0:
            text = tok.fit(extend(tok, d, 16), 1)
    pieces = tok.pieces(text)
    tc = []
    n_args = 0
    for i, (name, args) in enumerate(calls):
        ap = tok.pieces(args)
        n_args += tok.count(args)
        tc.append((f"call_{digest:016x}{i:02x}", name, ap))
    return Reply(pieces, tc, finish, prompt_tokens, tok.count(text) + n_args)
