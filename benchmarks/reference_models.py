"""The reference workloads: models built from code, synthetic data, one training step.

- ``CNN``: MNIST-style, 2 conv + 2 fc on 1x28x28, batch 64, SGD.
- ``MLP``: 784-512-512-512-10, batch 256, SGD.
- ``GPT``: a GPT-style causal language model (token and position embeddings, 4
  pre-norm blocks of LayerNorm, a fused qkv Linear,
  ``F.scaled_dot_product_attention(is_causal=True)`` and a GELU MLP, a head tied
  to the token embedding), next-token loss on synthetic tokens, AdamW.
- ``Encoder``: an ``nn.TransformerEncoder`` text classifier (batch_first, 3
  layers, mean-pooled over the tokens), synthetic tokens and labels, AdamW.

The sizes put an uninstrumented step on this project's 2-core CPU at about
10-70 ms. The benchmarks measure the probe's overhead on these models, and
tests import them too (pytest's ``pythonpath`` lists ``benchmarks/``), so the
models the overhead targets are stated for are the ones the probe is tested on.
This module needs torch and nothing of nbviz.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

Batch = tuple[torch.Tensor, torch.Tensor]


# ----------------------------------------------------------------- vision


def reference_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(0.25),
        nn.Flatten(),
        nn.Linear(9216, 128),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(128, 10),
    )


def reference_mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(784, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Linear(512, 10),
    )


# ----------------------------------------------------------------- GPT-style LM


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 512
    context: int = 64
    width: int = 128
    heads: int = 4
    blocks: int = 4


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention from one fused qkv projection."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not a multiple of heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class FeedForward(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """A pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = FeedForward(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token ids (batch, tokens) -> next-token logits (batch, tokens, vocab)."""

    def __init__(self, config: GPTConfig = GPTConfig()) -> None:
        super().__init__()
        self.config = config
        self.tok = nn.Embedding(config.vocab, config.width)
        self.pos = nn.Embedding(config.context, config.width)
        self.blocks = nn.ModuleList(Block(config.width, config.heads) for _ in range(config.blocks))
        self.ln_f = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, config.vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        self.apply(_gpt_init)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        if t > self.config.context:
            raise ValueError(f"GPT: {t} tokens exceed the context of {self.config.context}")
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _gpt_init(module: nn.Module) -> None:
    """GPT-2's initialisation: weights N(0, 0.02), biases zero (LayerNorms keep theirs)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each position's logits against the token that follows it."""
    return F.cross_entropy(logits.flatten(0, 1), ids.flatten())


def token_batch(
    gen: torch.Generator, batch: int, tokens: int, vocab: int, period: int = 7
) -> torch.Tensor:
    """Synthetic text: each row counts up from a random start modulo ``vocab`` in steps
    that repeat every ``period`` tokens, with 10% of the tokens replaced at random,
    so there is something to learn but not everything."""
    start = torch.randint(0, vocab, (batch, 1), generator=gen)
    stride = 1 + torch.arange(tokens) % period
    ids = (start + stride.cumsum(0)) % vocab
    noise = torch.rand(batch, tokens, generator=gen) < 0.1
    return torch.where(noise, torch.randint(0, vocab, (batch, tokens), generator=gen), ids)


# ----------------------------------------------------------------- encoder classifier


class EncoderClassifier(nn.Module):
    """Token ids (batch, tokens) -> class logits: ``nn.TransformerEncoder``, mean-pooled."""

    def __init__(
        self,
        vocab: int = 512,
        context: int = 64,
        width: int = 128,
        heads: int = 4,
        layers: int = 3,
        classes: int = 4,
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        layer = nn.TransformerEncoderLayer(
            width, heads, dim_feedforward=4 * width, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        return self.head(self.encoder(x).mean(dim=1))


def classified_tokens(gen: torch.Generator, batch: int, tokens: int, vocab: int) -> Batch:
    """Synthetic texts whose class is which quarter of the vocabulary most tokens come from."""
    labels = torch.randint(0, 4, (batch,), generator=gen)
    quarter = vocab // 4
    ids = labels[:, None] * quarter + torch.randint(0, quarter, (batch, tokens), generator=gen)
    noise = torch.rand(batch, tokens, generator=gen) < 0.3
    return torch.where(noise, torch.randint(0, vocab, (batch, tokens), generator=gen), ids), labels


# ----------------------------------------------------------------- workloads


def _sgd(params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.01, momentum=0.9)


def _adamw(params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=3e-4)


def _images(gen: torch.Generator, batch: int) -> Batch:
    return torch.randn(batch, 1, 28, 28, generator=gen), torch.randint(
        0, 10, (batch,), generator=gen
    )


def _lm_batch(gen: torch.Generator, batch: int) -> Batch:
    config = GPTConfig()
    ids = token_batch(gen, batch, config.context + 1, config.vocab)
    return ids[:, :-1], ids[:, 1:]


@dataclass(frozen=True)
class Workload:
    """A model, its synthetic batch and loss, and the optimizer it trains with."""

    model: Callable[[], nn.Module]
    batch_size: int
    make_batch: Callable[[torch.Generator, int], Batch]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]

    def batch(self, seed: int = 0) -> Batch:
        return self.make_batch(torch.Generator().manual_seed(seed), self.batch_size)

    def step(self, model: nn.Module, opt: torch.optim.Optimizer, x, y) -> torch.Tensor:
        """One plain training step (forward, backward, optimizer step); returns the loss."""
        opt.zero_grad()
        loss = self.loss(model(x), y)
        loss.backward()
        opt.step()
        return loss


WORKLOADS: dict[str, Workload] = {
    "CNN": Workload(reference_cnn, 64, _images, F.cross_entropy, _sgd),
    "MLP": Workload(reference_mlp, 256, _images, F.cross_entropy, _sgd),
    "GPT": Workload(GPT, 8, _lm_batch, next_token_loss, _adamw),
    "Encoder": Workload(
        EncoderClassifier,
        16,
        lambda gen, n: classified_tokens(gen, n, 64, 512),
        F.cross_entropy,
        _adamw,
    ),
}
