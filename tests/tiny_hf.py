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


def tiny_bart(vocab: int = 50) -> transformers.BartForConditionalGeneration:
    """An encoder-decoder of two layers each, BART's 0.02 initialisation, seeded: its word
    embedding is shared by both stacks and the head, and each stack has its own table of
    learned positions."""
    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=vocab,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=32,
    )
    return transformers.BartForConditionalGeneration(config)
