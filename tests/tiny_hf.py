"""Tiny Hugging Face models built from configs (nothing downloaded), shared by the tests."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402
import transformers  # noqa: E402


def tiny_llama(kv_heads: int = 4, vocab: int = 40) -> transformers.LlamaForCausalLM:
    """Two layers of four query heads over ``kv_heads`` key/value heads (grouped-query
    attention below four), seeded."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=32,
    )
    return transformers.LlamaForCausalLM(config)
