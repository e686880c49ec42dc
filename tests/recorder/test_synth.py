"""Prompt synthesis for content-free traces: vocabulary, exact lengths, block identity."""

from __future__ import annotations

import glob
import os
import random
import sysconfig
from pathlib import Path

import pytest

from agentload.errors import TokenizerError
from agentload.tokenizer import get_tokenizer
from agentload.trace.synth import Synthesizer, vocabulary


def train_tokenizer(path: Path, kind: str) -> str:
    """A real HF tokenizer.json, BPE trained on a little stdlib source (about a second)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    lib = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob(os.path.join(lib, "email", "*.py")))
    files += sorted(glob.glob(os.path.join(lib, "json", "*.py")))
    tok = Tokenizer(models.BPE())
    if kind == "bytelevel":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        alphabet = []
    tok.train(
        files,
        trainers.BpeTrainer(vocab_size=3000, initial_alphabet=alphabet, show_progress=False),
    )
    tok.save(str(path))
    return f"hf:{path}"


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_a_run_of_vocabulary_words_is_one_token_a_word(name: str) -> None:
    words = vocabulary(name)
    enc = get_tokenizer(name).encode
    assert len(words) > 20_000 and all(w[0] == " " and w[1:].isalpha() for w in words)
    rng = random.Random(1)
    for n in (1, 2, 50, 3000):
        sample = rng.choices(words, k=n)
        assert enc("".join(sample)) == [enc(w)[0] for w in sample]


def test_blocks_are_deterministic_distinct_and_block_sized() -> None:
    s = Synthesizer("o200k_base", seed=7)
    enc = s.counter.tokenizer.encode
    a = s.block_text("17", 64)
    assert a == Synthesizer("o200k_base", seed=7).block_text("17", 64)  # same seed, same text
    assert a != Synthesizer("o200k_base", seed=8).block_text("17", 64)
    assert len(enc(a)) == 64 and a.count(" ") == 64
    texts = {s.block_text(str(i), 64) for i in range(2000)}
    assert len(texts) == 2000
    # the first words carry the id's 64-bit hash: different ids differ within them
    heads = {" ".join(s.block_text(str(i), 512).split()[: s.code_words]) for i in range(2000)}
    assert len(heads) == 2000


@pytest.mark.parametrize("block", [16, 64, 512])
def test_every_length_is_exact_and_the_ids_are_laid_out_in_order(block: int) -> None:
    s = Synthesizer("o200k_base", seed=0)
    for n_tokens in (s.framing, s.framing + 1, 300, 1000, 4321):
        ids = [f"0:{i}" for i in range(-(-n_tokens // block))]
        lay = s.layout("call-1", ids, n_tokens, block)
        msgs = s.messages(lay)
        assert s.counter.count_prompt(msgs) == lay.tokens == n_tokens
        text = msgs[1]["content"]
        full, rest = divmod(lay.covered, block)
        expect = "".join(s.block_text(b, block) for b in ids[:full])
        assert text.startswith(expect)
        if rest:  # a partial last block: that block's first words
            tail = text[len(expect) :]
            words = s.block_text(ids[full], block).split()[:rest]
            assert tail == "".join(" " + w for w in words) + " "  # then the closing space


def test_the_tail_beyond_the_ids_is_unique_per_call() -> None:
    s = Synthesizer("o200k_base", seed=0)
    a = s.messages(s.layout("a", ["1"], 300, 64))[1]["content"]
    b = s.messages(s.layout("b", ["1"], 300, 64))[1]["content"]
    block = s.block_text("1", 64)
    assert a.startswith(block) and b.startswith(block)
    assert a[len(block) :].split()[:5] != b[len(block) :].split()[:5]
    assert a == s.messages(s.layout("a", ["1"], 300, 64))[1]["content"]


def test_below_the_framing_the_prompt_is_the_framing() -> None:
    s = Synthesizer("o200k_base")
    lay = s.layout("a", ["1"], 3, 64)
    assert lay.words == 0 and not lay.ids and s.counter.count_prompt(s.messages(lay)) == s.framing


@pytest.mark.parametrize("kind", ["bytelevel", "metaspace"])
def test_an_hf_tokenizer_gives_exact_lengths(tmp_path: Path, kind: str) -> None:
    spec = train_tokenizer(tmp_path / "tokenizer.json", kind)
    s = Synthesizer(spec, seed=3)
    assert len(s.words) > 256
    for n_tokens in (s.framing + 1, 777, 5000):
        lay = s.layout("x", [str(i) for i in range(-(-n_tokens // 64))], n_tokens, 64)
        assert s.counter.count_prompt(s.messages(lay)) == n_tokens
    assert len(s.counter.tokenizer.encode(s.block_text("9", 64))) == 64


def test_a_bad_tokenizer_file_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json\n")
    for spec in (f"hf:{bad}", f"hf:{tmp_path / 'missing.json'}"):
        with pytest.raises(TokenizerError) as exc:
            Synthesizer(spec)
        assert "\n" not in str(exc.value) and str(exc.value).startswith(f"tokenizer {spec}")
