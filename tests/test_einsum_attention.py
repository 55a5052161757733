"""Attention written as Einstein sums (``einsum("bhqd,bhkd->bhqk")``, a softmax, then
``einsum("bhqk,bhkd->bhqd")`` with the values) is recorded as its matmul twin: the same
maps and per-head statistics, whatever layout the sum writes its result in."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import nbviz
from nbviz.probes.attention import einsum_weighted
from nbviz.probes.heads import SIGNALS

WIDTH, HEADS, TOKENS, VOCAB = 32, 4, 8, 30


class Attention(nn.Module):
    """Self-attention over ``HEADS`` heads, its product with the values spelled ``style``."""

    def __init__(self, style: str) -> None:
        super().__init__()
        self.style = style
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        scale = 1 / math.sqrt(d // HEADS)
        if self.style == "matmul":
            weights = (q @ k.transpose(-2, -1) * scale).softmax(dim=-1)
            y = (weights @ v).transpose(1, 2)
        else:
            weights = F.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) * scale, dim=-1)
            if self.style == "einsum":
                y = torch.einsum("bhqk,bhkd->bhqd", weights, v).transpose(1, 2)
            else:  # values first, the result laid out (batch, queries, heads, dim)
                y = torch.einsum("bhkd,bhqk->bqhd", v, weights)
        return self.proj(y.reshape(b, t, d))


class Net(nn.Module):
    def __init__(self, style: str) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Attention(style) for _ in range(2))
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def net(style: str) -> Net:
    torch.manual_seed(0)
    return Net(style)


def train(model: Net, path=None, steps: int = 3) -> tuple[list[torch.Tensor], nbviz.Run | None]:
    run = nbviz.Run(path) if path is not None else None
    if run is not None:
        probe = torch.arange(TOKENS).reshape(1, -1) % VOCAB
        run.watch(model, every=1, hist_every=1, attention=probe)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for step in range(steps):
        ids = torch.randint(0, VOCAB, (4, TOKENS), generator=gen)
        loss = F.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if run is not None:
            run.log(step, train_loss=loss)
    if run is not None:
        run.flush()
    return losses, run


@pytest.mark.parametrize("style", ["einsum", "einsum_bqhd"])
def test_einsum_attention_is_recorded_as_its_matmul_twin(style, tmp_path):
    _, matmul = train(net("matmul"), tmp_path / "matmul")
    _, spelled = train(net(style), tmp_path / style)
    layers = ["blocks.0", "blocks.1"]
    assert spelled.attention_layers() == matmul.attention_layers() == layers
    for layer in layers:
        got, want = spelled.attention(2, layer), matmul.attention(2, layer)
        np.testing.assert_allclose(got, want, atol=1e-3)
        for signal in SIGNALS[:2]:  # each head's rms and peak
            _, got = spelled.unit_stats(f"{layer}/heads", signal)
            _, want = matmul.unit_stats(f"{layer}/heads", signal)
            np.testing.assert_allclose(got, want, rtol=1e-4)


def test_einsum_maps_equal_a_recomputation_from_q_and_k(tmp_path):
    model = net("einsum")
    _, run = train(model, tmp_path / "run", steps=1)  # maps taken after the step's update
    block = model.blocks[1]
    x = model.embed(torch.arange(TOKENS).reshape(1, -1) % VOCAB)
    x = x + model.blocks[0](x)
    q, k, _ = block.qkv(x).reshape(1, TOKENS, 3, HEADS, -1).permute(2, 0, 3, 1, 4)
    want = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(WIDTH // HEADS), dim=-1)
    np.testing.assert_allclose(run.attention(0, "blocks.1"), want.detach().numpy(), atol=1e-3)


def test_watching_einsum_attention_leaves_training_bitwise_equal(tmp_path):
    model = net("einsum_bqhd")
    twin = copy.deepcopy(model)
    losses, _ = train(model, tmp_path / "run")
    plain, _ = train(twin)
    assert all(torch.equal(a, b) for a, b in zip(losses, plain, strict=True))
    for p, r in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(p, r)


@pytest.mark.parametrize(
    "equation",
    [
        "bhqk,bhkd->bhq",  # no value dimension
        "bhqk,bhqd->bhqd",  # keys not summed with the values
        "bhqk,bhkd->bqd",  # heads summed away
        "...qk,...kd->...qd",  # an ellipsis: not read
        "bhqk->bhq",  # one operand
    ],
)
def test_an_einsum_that_is_no_weighted_sum_of_values_is_left_alone(equation):
    w, v = torch.rand(1, 2, 3, 3), torch.rand(1, 2, 3, 4)
    out = torch.rand(1, 2, 3, 4)
    assert einsum_weighted(equation, w, v, out, True) is None
