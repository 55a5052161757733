"""Tiny Hugging Face models built from configs (nothing downloaded), shared by the tests."""

from __future__ import annotations

import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402
import transformers  # noqa: E402

import nbviz  # noqa: E402


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


def bart_run(
    path: Path,
    *,
    source: int = 10,
    target: int = 6,
    probe_samples: int = 2,
    every: int = 1,
    steps: int = 2,
) -> nbviz.Run:
    """:func:`tiny_bart` trained ``steps`` AdamW steps on random ids (4 pairs of ``source``
    and ``target`` tokens), watched every ``every`` steps with ``probe_samples`` pairs as
    the attention probe batch (tokens named ``w<id>``): the run, flushed and open."""
    model = tiny_bart()
    gen = torch.Generator().manual_seed(1)
    probe = {
        "input_ids": torch.randint(2, 50, (probe_samples, source), generator=gen),
        "decoder_input_ids": torch.randint(2, 50, (probe_samples, target), generator=gen),
    }
    run = nbviz.Run(path)
    run.watch(model, every=every, attention=probe, tokens=lambda i: f"w{i}")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(steps):
        ids = torch.randint(2, 50, (4, source), generator=gen)
        labels = torch.randint(2, 50, (4, target), generator=gen)
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.flush()
    return run
