"""Attention written out by hand (Hugging Face's ``eager`` attention: softmax, then a
product with the values) is measured as its ``scaled_dot_product_attention`` twin."""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import nbviz  # noqa: E402
from nbviz.probes.heads import SIGNALS  # noqa: E402

VOCAB, TOKENS = 40, 10
LAYERS = ["model.layers.0.self_attn", "model.layers.1.self_attn"]


def llama(implementation: str) -> transformers.LlamaForCausalLM:
    """The same weights whatever the attention implementation (grouped-query heads)."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        attn_implementation=implementation,
    )
    return transformers.LlamaForCausalLM(config)


def train(model, path=None, steps: int = 3) -> tuple[list[float], nbviz.Run | None]:
    run = nbviz.Run(path) if path is not None else None
    probe_ids = torch.arange(TOKENS).reshape(1, -1) % VOCAB
    if run is not None:
        run.watch(model, every=1, attention=probe_ids, hist_every=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for step in range(steps):
        ids = torch.randint(0, VOCAB, (4, TOKENS), generator=gen)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if run is not None:
            run.log(step, train_loss=loss)
    if run is not None:
        run.flush()
    return losses, run


def test_eager_attention_heads_and_maps_equal_the_sdpa_models(tmp_path):
    _, sdpa = train(llama("sdpa"), tmp_path / "sdpa")
    _, eager = train(llama("eager"), tmp_path / "eager")
    assert eager.attention_layers() == sdpa.attention_layers() == LAYERS
    for layer in LAYERS:
        assert eager.meta("heads")["layers"][f"{layer}/heads"]["heads"] == 4
        for signal in SIGNALS[:2]:  # rms, peak
            steps, got = eager.unit_stats(f"{layer}/heads", signal)
            _, want = sdpa.unit_stats(f"{layer}/heads", signal)
            assert steps.tolist() == [0, 1, 2]
            np.testing.assert_allclose(got, want, rtol=1e-4)
        np.testing.assert_allclose(
            eager.attention(2, layer), sdpa.attention(2, layer), atol=2e-3
        )  # float16 maps
    eager.close()
    sdpa.close()


def test_watching_eager_attention_leaves_training_bitwise_equal(tmp_path):
    model = llama("eager")
    twin = copy.deepcopy(model)
    watched, run = train(model, tmp_path / "run")
    alone, _ = train(twin)
    assert watched == alone
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(p, q)
    run.close()
