"""Small GPT-style language models with transformer faults planted, trained into runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from reference_models import GPT, GPTConfig
from torch import nn
from training import lm_steps

import nbviz

CONFIG = GPTConfig(vocab=64, context=16, width=64, heads=4, blocks=6)


def blocks_and_leaves(name: str, module: nn.Module) -> bool:
    """The leaves and every block, whose outputs are the residual stream: the default
    selection watches a stack's blocks of one type, this also a block a plant wrapped."""
    return (name.startswith("blocks.") and name.count(".") == 1) or not list(module.children())


class FeatureGain(nn.Module):
    """Sets one feature of the stream: at the first token only (``value``), or scales it
    at every token (``scale``)."""

    def __init__(self, feature: int, value: float | None = None, scale: float | None = None):
        super().__init__()
        self.feature, self.value, self.scale = feature, value, scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        if self.value is not None:
            y[:, 0, self.feature] = self.value
        else:
            y[..., self.feature] = y[..., self.feature] * self.scale
        return y


class GainedBlock(nn.Module):
    """A block whose output goes through ``after`` (a planted fault)."""

    def __init__(self, block: nn.Module, after: nn.Module) -> None:
        super().__init__()
        self.inner, self.after = block, after

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.after(self.inner(x))


class ScaledBlock(nn.Module):
    """A block whose whole output is multiplied by ``gain``: the stream compounds."""

    def __init__(self, block: nn.Module, gain: float) -> None:
        super().__init__()
        self.inner, self.gain = block, gain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gain * self.inner(x)


def train_lm(
    path: Path,
    *,
    steps: int = 60,
    every: int = 5,
    plant: Callable[[GPT], None] | None = None,
    fault: Callable[[GPT, int], None] | None = None,
    layers=blocks_and_leaves,
) -> nbviz.Run:
    """A small GPT trained with AdamW on synthetic text; returns the run read back."""
    torch.manual_seed(0)
    model = GPT(CONFIG)
    if plant is not None:
        plant(model)
    gen = torch.Generator().manual_seed(1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with nbviz.Run(path) as run:
        run.watch(model, every=every, layers=layers)
        lm_steps(run, model, opt, gen, steps, batch=8, before=fault)
    return nbviz.open_run(path)


def gain_after_block(after: nn.Module) -> Callable[[GPT], None]:
    """A plant that routes block 1's output through ``after`` (named ``blocks.1.after``)."""

    def plant(model: GPT) -> None:
        model.blocks[1] = GainedBlock(model.blocks[1], after)

    return plant
