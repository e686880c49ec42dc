"""The KV-survival ceiling of salted requests: the prompt tokens the target can have cached.

KV survival divides the cached tokens a server reports by a ceiling. Without salting the
ceiling is the leading prompt blocks a call shares with earlier calls of its session, counted
on the trace's block hashes (``plan``). A salted request is not the recorded one: its salt
line sits inside the prefix the server caches, and two things follow.

* Within a session instance every call carries the same salt, so a prefix two calls share
  grows by the salt's tokens once it reaches the salt, and can cover one block more than the
  unsalted blocks say.
* Across instances the salts differ, but what comes before the salt does not: the tool
  schemas (which chat templates render before the system prompt), any message before the
  first system message, the system message's head, and the salt's own leading tokens. An
  agent's first call can find those cached from another replica (or another sweep point).

So the salted ceiling of a call is the larger of the two, in full blocks of its salted prompt:
the longest prefix it shares with a call of the same instance that may run before it (one
recorded earlier, or a later one that is not its successor: parallel sub-agents may swap
order on the target), and the prefix it shares with any other instance's salt (everything up
to the salt's last token). Prompts are hashed by ``recorder.prefix.hash_prompt``, the code
the recorder and the simulator's KV model use, with the trace's tokenizer and block size; the
salt's fixed token layout (``salt``) makes the counts the same for every instance. Against
the simulator, cached ≤ ceiling holds exactly; against another server it holds up to the
difference between its tokenizer and agentload's.
"""

from __future__ import annotations

import graphlib
import itertools
from collections.abc import Sequence
from typing import Any

from agentload.recorder.prefix import PrefixHasher, common_blocks, hash_prompt, seen_blocks
from agentload.replay.salt import REPRESENTATIVE_SALTS, salt_messages, salt_target
from agentload.tokenizer import ChatTokenCounter

__all__ = ["Prompt", "salted_ceilings"]

Prompt = tuple[list[dict[str, Any]], list[dict[str, Any]] | None]
"""A request's (messages, tools) as recorded (unsalted)."""


def _descendants(succs: Sequence[Sequence[int]]) -> list[int]:
    """Per call, the calls that run only after it (transitive successors), as bit sets."""
    order = graphlib.TopologicalSorter({i: set(s) for i, s in enumerate(succs)}).static_order()
    desc = [0] * len(succs)
    for i in order:  # successors come first
        for j in succs[i]:
            desc[i] |= (1 << j) | desc[j]
    return desc


def _cross_tokens(counter: ChatTokenCounter, prompt: Prompt) -> int:
    """Tokens of the prompt that another instance's salted prompt can share: the pieces before
    the salted message, and that message up to where two salts differ."""
    messages, tools = prompt
    n = len(counter.ids_for_tools(tools)) if tools else 0
    if not messages:
        return n
    t = salt_target(messages)
    n += sum(len(counter.ids_for_message(m)) for m in messages[:t])
    a, b = (counter.ids_for_message(salt_messages(messages, s)[t]) for s in REPRESENTATIVE_SALTS)
    # token ids agree again after the salt, so this prefix is counted, not binary-searched
    return n + sum(
        1 for _ in itertools.takewhile(lambda ab: ab[0] == ab[1], zip(a, b, strict=False))
    )


def salted_ceilings(
    counter: ChatTokenCounter,
    block_size: int,
    prompts: Sequence[Prompt],
    succs: Sequence[Sequence[int]],
) -> list[int]:
    """The salted ceiling, in tokens, of each call of one recorded session (module docstring).

    ``prompts`` are the calls in recorded submit order; ``succs[i]`` the indexes of the calls
    that wait for call ``i``.
    """
    hasher = PrefixHasher(block_size)
    salt = REPRESENTATIVE_SALTS[0]
    blocks = [
        hash_prompt(hasher, counter, salt_messages(m, salt), t or None).state.blocks
        for m, t in prompts
    ]
    desc = _descendants(succs)
    out = []
    seen: set[str] = set()
    for i, b in enumerate(blocks):
        within = seen_blocks(b, seen)  # earlier calls
        later = (blocks[j] for j in range(i + 1, len(blocks)) if not desc[i] >> j & 1)
        within = max(within, max((common_blocks(b, other) for other in later), default=0))
        seen.update(b)
        cross = _cross_tokens(counter, prompts[i]) // block_size
        out.append(max(within, cross) * block_size)
    return out
