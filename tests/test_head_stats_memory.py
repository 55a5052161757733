"""Per-head statistics hold no attention weights: each layer's softmax result is freed as
the model frees it (with activation checkpointing, once its layer ends), not kept until
the captured forward ends."""

from __future__ import annotations

import math
import weakref

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import nbviz

WIDTH, HEADS, TOKENS = 16, 2, 6


class SelfAttention(nn.Module):
    """Attention written out by hand: softmax of the scores, then times the values."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.softmax_results: list[weakref.ref] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, _ = x.shape
        q, k, v = (
            p.reshape(n, t, HEADS, WIDTH // HEADS).transpose(1, 2)
            for p in self.qkv(x).chunk(3, dim=-1)
        )
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(WIDTH // HEADS), dim=-1)
        self.softmax_results.append(weakref.ref(weights))
        return x + self.out((weights @ v).transpose(1, 2).reshape(n, t, WIDTH))


class Checkpointed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, WIDTH)
        self.layers = nn.ModuleList(SelfAttention() for _ in range(3))
        self.head = nn.Linear(WIDTH, 20)
        self.alive_at_end: list[int] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False)
        held = [r for layer in self.layers for r in layer.softmax_results if r() is not None]
        self.alive_at_end.append(len(held))
        return self.head(x)


def test_a_captured_forward_holds_no_layers_attention_weights(tmp_path):
    torch.manual_seed(0)
    model = Checkpointed()
    run = nbviz.Run(tmp_path / "run")
    run.watch(model, every=1)
    ids = torch.randint(0, 20, (4, TOKENS))
    for step in range(2):
        loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
        loss.backward()
        run.log(step, train_loss=loss)
    run.flush()
    assert "layers.2/heads" in run.meta("heads")["layers"]  # the heads were measured
    assert model.alive_at_end == [0, 0]
    run.close()
