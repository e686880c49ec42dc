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

A synthesized call (a content-free trace, ``recorder.synth``) is never tokenized for this: its
token layout is known (the framing's head, then one token a word, the words of equal leading
block ids equal), so ``synth_ceilings`` counts the tokens two calls share from their block ids
(compared as prefixes: the ids are chained here, so ``[A, B]`` and ``[C, B]`` share nothing)
and rounds down to ``CEILING_BLOCK`` tokens, the block of agentload's own traces, of the
simulator and of vLLM. Both ceilings come from it, the unsalted one (earlier calls only, as
``plan`` counts it) and the salted one (within the instance, the salt's tokens added, or across
instances up to where the salts differ).
"""

from __future__ import annotations

import graphlib
import itertools
from collections.abc import Sequence
from typing import Any

from agentload.recorder.prefix import PrefixHasher, common_blocks, hash_prompt, seen_blocks
from agentload.recorder.synth import Layout, Synthesizer
from agentload.replay.salt import REPRESENTATIVE_SALTS, salt_messages, salt_target
from agentload.tokenizer import ChatTokenCounter

__all__ = ["CEILING_BLOCK", "Prompt", "salted_ceilings", "synth_ceilings"]

CEILING_BLOCK = 16
"""Tokens a block when ceilings of synthesized prompts are counted (see the module docstring)."""

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


def _chain(ids: Sequence[str]) -> list[int]:
    """Prefix hashes of a block-id list: equal at k iff the first k + 1 ids are equal."""
    out = []
    h = 0
    for b in ids:
        h = hash((h, b))
        out.append(h)
    return out


def synth_ceilings(
    synth: Synthesizer,
    layouts: Sequence[Layout],
    succs: Sequence[Sequence[int]],
    salted: bool,
) -> tuple[list[int], list[int] | None]:
    """(unsalted, salted or None) ceilings, in tokens, of one session's synthesized calls in
    recorded submit order (module docstring); ``succs`` as for ``salted_ceilings``."""
    g = CEILING_BLOCK
    chains = [_chain(lay.ids) for lay in layouts]
    desc = _descendants(succs) if salted else []
    s = salt = cross = 0
    if salted:
        system = [synth.system]
        salt = len(synth.counter.ids_for_message(salt_messages(system, REPRESENTATIVE_SALTS[0])[0]))
        s = salt - len(synth.counter.ids_for_message(synth.system))
        cross = _cross_tokens(synth.counter, (system, None)) // g * g
    holder: dict[int, int] = {}  # prefix hash -> the earlier call with it and the most words
    unsalted: list[int] = []
    out: list[int] = []
    for i, lay in enumerate(layouts):
        ch = chains[i]
        earlier = 0
        if i:
            j = seen_blocks(ch, holder)
            earlier = synth.common_tokens(lay, layouts[holder[ch[j - 1]] if j else i - 1], j)
        unsalted.append(earlier // g * g)
        if salted:
            within = earlier + s if i else 0
            for k in range(i + 1, len(layouts)):
                if not desc[i] >> k & 1:
                    j = common_blocks(ch, chains[k])
                    within = max(within, synth.common_tokens(lay, layouts[k], j) + s)
            out.append(max(within // g * g, cross))
        for h in ch:
            old = holder.get(h)
            if old is None or layouts[old].words < lay.words:
                holder[h] = i
    return unsalted, out if salted else None
