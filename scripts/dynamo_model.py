"""The model folder Dynamo's mocker workers serve, made here, offline: no weights, no download.

    python scripts/dynamo_model.py DIR

A mocker needs what a Hugging Face model folder holds around its weights: ``config.json`` (a
Llama-style architecture: its layers, heads and sizes give the KV cache's bytes per token),
``tokenizer.json`` (the frontend tokenizes every prompt with it, and the KV router hashes those
tokens into blocks) and ``tokenizer_config.json`` with a chat template. The tokenizer is a byte-level
BPE trained here with Hugging Face ``tokenizers`` on this Python's own standard library sources (a
mix of code and English prose, as coding agents send), so a prompt costs about as many tokens as
a real model's tokenizer gives it, and it is the same on every run with the same Python. Written
into a temporary folder and moved into place: a folder that exists is complete.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

VOCAB = 32_000
CORPUS_BYTES = 24 << 20
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]

# ChatML, with tool calls and tool results written out as JSON: every message of every API's
# chat form renders (text parts joined), and the prompt ends where the assistant's turn starts.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}"
    "<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% elif m['content'] %}{% for p in m['content'] %}"
    "{% if p['text'] is defined %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% if m['tool_calls'] is defined and m['tool_calls'] %}\n{{ m['tool_calls'] | tojson }}"
    "{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if tools is defined and tools %}<|im_start|>tools\n{{ tools | tojson }}<|im_end|>\n"
    "{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "torch_dtype": "bfloat16",
    "vocab_size": VOCAB,
    "bos_token_id": 0,
    "eos_token_id": 1,
}
"""A Llama 3.2 1B-like shape (16 layers, 8 KV heads of 64): 32 KiB of KV cache per token."""


def corpus() -> list[str]:
    """This Python's standard library sources, in a fixed order, up to ``CORPUS_BYTES``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts, size = [], 0
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        size += len(text)
        if size >= CORPUS_BYTES:
            break
    return texts


def tokenizer(texts: list[str]) -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=SPECIAL, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def build(out: Path) -> None:
    if out.is_dir():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        tok = tokenizer(corpus())
        tok.save(str(tmp / "tokenizer.json"))  # type: ignore[attr-defined]
        (tmp / "config.json").write_text(json.dumps(CONFIG, indent=1))
        (tmp / "generation_config.json").write_text(
            json.dumps({"bos_token_id": 0, "eos_token_id": 1})
        )
        (tmp / "tokenizer_config.json").write_text(json.dumps({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": SPECIAL[0], "eos_token": SPECIAL[1], "pad_token": SPECIAL[1],
            "add_bos_token": False, "model_max_length": CONFIG["max_position_embeddings"],
            "chat_template": CHAT_TEMPLATE,
        }, indent=1))  # fmt: skip
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: dynamo_model.py DIR")
    build(Path(sys.argv[1]))
