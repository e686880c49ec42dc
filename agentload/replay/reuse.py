"""The KV-survival ceiling of replayed requests: the prompt tokens the target can have cached.

KV survival divides the cached tokens a server reports by a ceiling; the cross-session split
of those hits needs the part of it one session instance can reuse from itself. So each call
gets two counts, in full blocks of its prompt as sent (salted as ``--salt-at`` says, see
``salt``), and its ceiling is the larger:

* **within** the instance: the longest prefix it shares with a call of the same instance that
  may run before it (one recorded earlier, or a later one that is not its successor: parallel
  sub-agents may swap order on the target). Every call of an instance carries the same salt,
  so a prefix two calls share grows by the salt's tokens once it reaches the salt, and can
  cover one block more than the unsalted blocks say.
* **across** instances: what another instance (another replica, another recorded session,
  another sweep point) can have put in the cache. Salted, that is everything up to where two
  salts differ: ``start`` — the tool schemas (which chat templates render before the system
  prompt), any message before the first system message, the system message's head and the
  salt's own leading tokens; ``after-system`` — the tools, every leading system/developer
  message and the salted message's head. Unsalted (``off``), replicas of one recorded session
  send identical prompts, so another instance can hold the whole prompt: across is all of its
  full blocks, and within is the recorded sharing (the trace's block hashes, counted the same
  way as salted), which no longer bounds what a server may reuse.

Prompts are hashed by ``trace.prefix.hash_prompt``, the code the recorder and the
simulator's KV model use, with the trace's tokenizer and block size; the salt's fixed token
layout (``salt``) makes the counts the same for every instance. Against the simulator,
cached ≤ ceiling holds exactly; against another server it holds up to the difference between
its tokenizer and agentload's.

A synthesized call (a content-free trace, ``trace.synth``) is never tokenized for this: its
token layout is known (the framing's head, then one token a word, the words of equal leading
block ids equal), so ``synth_ceilings`` counts the tokens two calls share from their block ids
(compared as prefixes: the ids are chained here, so ``[A, B]`` and ``[C, B]`` share nothing)
and rounds down to ``CEILING_BLOCK`` tokens, the block of agentload's own traces, of the
simulator and of vLLM. Both ceilings come from it, the recorded one (earlier calls only, as
``plan`` counts it) and the mode's (within the instance, the salt's tokens added; across
instances up to where the salts differ, or the whole prompt unsalted).
"""

from __future__ import annotations

import graphlib
import itertools
from collections.abc import Hashable, Sequence
from typing import Any

from agentload.replay.salt import REPRESENTATIVE_SALTS, SaltAt, salt_messages, salt_target
from agentload.tokenizer import ChatTokenCounter
from agentload.trace.prefix import PrefixHasher, common_blocks, hash_prompt, seen_blocks
from agentload.trace.synth import Layout, Synthesizer

__all__ = [
    "CEILING_BLOCK",
    "Ceiling",
    "Prompt",
    "salt_tokens",
    "salted_ceilings",
    "synth_ceilings",
    "synth_salt_tokens",
    "unsalted_ceilings",
]

CEILING_BLOCK = 16
"""Tokens a block when ceilings of synthesized prompts are counted (see the module docstring)."""

Prompt = tuple[list[dict[str, Any]], list[dict[str, Any]] | None]
"""A request's (messages, tools) as recorded (unsalted)."""

Ceiling = tuple[int, int]
"""A call's (within-instance, cross-instance) reusable tokens (module docstring)."""


def _descendants(succs: Sequence[Sequence[int]]) -> list[int]:
    """Per call, the calls that run only after it (transitive successors), as bit sets."""
    order = graphlib.TopologicalSorter({i: set(s) for i, s in enumerate(succs)}).static_order()
    desc = [0] * len(succs)
    for i in order:  # successors come first
        for j in succs[i]:
            desc[i] |= (1 << j) | desc[j]
    return desc


def _within(blocks: Sequence[Sequence[Hashable]], succs: Sequence[Sequence[int]]) -> list[int]:
    """Per call, the leading blocks it shares with a call of the same instance that may run
    before it: an earlier one, or a later one that is not its successor."""
    desc = _descendants(succs)
    out = []
    seen: set[Hashable] = set()
    for i, b in enumerate(blocks):
        within = seen_blocks(b, seen)  # earlier calls
        later = (blocks[j] for j in range(i + 1, len(blocks)) if not desc[i] >> j & 1)
        out.append(max(within, max((common_blocks(b, other) for other in later), default=0)))
        seen.update(b)
    return out


def salt_tokens(counter: ChatTokenCounter, messages: list[dict[str, Any]], at: SaltAt) -> int:
    """Tokens the salt line adds to a prompt in mode ``at``: the salted message's count minus
    the unsalted one's (every salt has the same token layout, see ``salt``)."""
    if at == "off" or not messages:
        return 0
    i, _ = salt_target(messages, at)
    salted = salt_messages(messages, REPRESENTATIVE_SALTS[0], at)[i]
    return len(counter.ids_for_message(salted)) - len(counter.ids_for_message(messages[i]))


def _cross_tokens(counter: ChatTokenCounter, prompt: Prompt, at: SaltAt) -> int:
    """Tokens of the prompt that another instance's prompt salted in mode ``at`` (not off)
    can share: the pieces before the salted message, and that message up to where two salts
    differ."""
    messages, tools = prompt
    n = len(counter.ids_for_tools(tools)) if tools else 0
    if not messages:
        return n
    t, _ = salt_target(messages, at)
    n += sum(len(counter.ids_for_message(m)) for m in messages[:t])
    a, b = (
        counter.ids_for_message(salt_messages(messages, s, at)[t]) for s in REPRESENTATIVE_SALTS
    )
    # token ids agree again after the salt, so this prefix is counted, not binary-searched
    return n + sum(
        1 for _ in itertools.takewhile(lambda ab: ab[0] == ab[1], zip(a, b, strict=False))
    )


def salted_ceilings(
    counter: ChatTokenCounter,
    block_size: int,
    prompts: Sequence[Prompt],
    succs: Sequence[Sequence[int]],
    at: SaltAt,
) -> list[Ceiling]:
    """The (within, cross) tokens of each call of one recorded session, salted in mode ``at``
    (``start`` or ``after-system``; module docstring).

    ``prompts`` are the calls in recorded submit order; ``succs[i]`` the indexes of the calls
    that wait for call ``i``.
    """
    hasher = PrefixHasher(block_size)
    salt = REPRESENTATIVE_SALTS[0]
    blocks = [
        hash_prompt(hasher, counter, salt_messages(m, salt, at), t or None).state.blocks
        for m, t in prompts
    ]
    return [
        (w * block_size, _cross_tokens(counter, p, at) // block_size * block_size)
        for w, p in zip(_within(blocks, succs), prompts, strict=True)
    ]


def unsalted_ceilings(
    blocks: Sequence[Sequence[Hashable]], block_size: int, succs: Sequence[Sequence[int]]
) -> list[Ceiling]:
    """The (within, cross) tokens of each call of one recorded session sent unsalted (``off``):
    within from the recorded block hashes, across the whole prompt's full blocks."""
    return [
        (w * block_size, len(b) * block_size)
        for w, b in zip(_within(blocks, succs), blocks, strict=True)
    ]


def _chain(ids: Sequence[str]) -> list[int]:
    """Prefix hashes of a block-id list: equal at k iff the first k + 1 ids are equal."""
    out = []
    h = 0
    for b in ids:
        h = hash((h, b))
        out.append(h)
    return out


def _sample(synth: Synthesizer) -> list[dict[str, Any]]:
    """A synthesized prompt's framing: the salt's place in it is the system message (start),
    or the user message in front of its first word (after-system); the salt's tokens and what
    comes before it do not depend on the words."""
    return [synth.system, {"role": "user", "content": synth.words[0] + " "}]


def synth_salt_tokens(synth: Synthesizer, at: SaltAt) -> int:
    """Tokens the salt adds to every synthesized prompt in mode ``at``."""
    return salt_tokens(synth.counter, _sample(synth), at)


def synth_ceilings(
    synth: Synthesizer,
    layouts: Sequence[Layout],
    succs: Sequence[Sequence[int]],
    at: SaltAt,
) -> tuple[list[int], list[Ceiling]]:
    """(recorded ceilings, (within, cross) tokens in mode ``at``) of one session's synthesized
    calls in recorded submit order (module docstring); ``succs`` as for ``salted_ceilings``."""
    g = CEILING_BLOCK
    chains = [_chain(lay.ids) for lay in layouts]
    desc = _descendants(succs)
    s = synth_salt_tokens(synth, at)
    cross = _cross_tokens(synth.counter, (_sample(synth), None), at) // g * g if s else 0
    holder: dict[int, int] = {}  # prefix hash -> the earlier call with it and the most words
    recorded: list[int] = []
    out: list[Ceiling] = []
    for i, lay in enumerate(layouts):
        ch = chains[i]
        earlier = 0
        if i:
            j = seen_blocks(ch, holder)
            earlier = synth.common_tokens(lay, layouts[holder[ch[j - 1]] if j else i - 1], j)
        recorded.append(earlier // g * g)
        within = earlier + s if i else 0
        for k in range(i + 1, len(layouts)):
            if not desc[i] >> k & 1:
                j = common_blocks(ch, chains[k])
                within = max(within, synth.common_tokens(lay, layouts[k], j) + s)
        out.append((within // g * g, lay.tokens // g * g if at == "off" else cross))
        for h in ch:
            old = holder.get(h)
            if old is None or layouts[old].words < lay.words:
                holder[h] = i
    return recorded, out
