"""Activation checkpointing (``torch.utils.checkpoint``) runs a segment's forward again
during backward. With ``use_reentrant=True`` (the older default, and an option of Hugging Face's
``activation_checkpointing_enable()``) the first forward runs under no_grad, so a watched
output there has no gradient to give: it is taken from the recomputation. Either way the
statistics are the ones an unchecked model gives, counted once, and the probes change
nothing."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from training import steps_seen

import nbviz


class Checkpointed(nn.Module):
    """Three GELU blocks, each a checkpointed segment (or not, ``reentrant=None``), held in
    a ``ModuleList`` or, ``direct``, as the model's own children ``b0`` .. ``b2``."""

    def __init__(self, reentrant: bool | None, direct: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.reentrant = reentrant
        blocks = [nn.Sequential(nn.Linear(16, 16), nn.GELU()) for _ in range(3)]
        if direct:
            for i, block in enumerate(blocks):
                self.add_module(f"b{i}", block)
        else:
            self.blocks = nn.ModuleList(blocks)
        self.order = blocks  # a plain list: registered above, once
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.order:
            if self.reentrant is None:
                x = block(x)
            else:
                x = checkpoint(block, x, use_reentrant=self.reentrant)
        return self.head(x)


def train(model: nn.Module, run: nbviz.Run | None, steps: int = 4) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 16, generator=g).requires_grad_()  # a reentrant segment needs one
    y = torch.randint(0, 4, (32,), generator=g)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    return steps_seen(model, opt, x, y, run, steps)


def recorded(path: Path, reentrant: bool | None, direct: bool = False) -> pd.DataFrame:
    model = Checkpointed(reentrant, direct)
    with nbviz.Run(path) as run:
        with run.watch(model, every=1):
            train(model, run)
        run.flush()
        frames = [run.stats(signal, steps=[2]) for signal in ("activation", "gradient")]
    cols = ["signal", "layer", "count", "mean", "std", "norm"]
    return pd.concat(frames)[cols].sort_values(["signal", "layer"]).reset_index(drop=True)


@pytest.mark.parametrize("direct", [False, True], ids=["in a ModuleList", "the model's children"])
@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpointed_segments_record_what_an_unchecked_model_records(
    tmp_path: Path, reentrant: bool, direct: bool
) -> None:
    plain = recorded(tmp_path / "plain", None, direct)
    checked = recorded(tmp_path / "checked", reentrant, direct)
    block = "b{}" if direct else "blocks.{}"
    inner = {f"{block.format(i)}.{j}" for i in (0, 2) for j in (0, 1)}
    grads = set(checked.loc[checked["signal"] == "gradient", "layer"])
    assert inner <= grads  # each output's gradient, also from a reentrant recomputation
    assert list(checked["layer"]) == list(plain["layer"])
    assert (checked["count"] == plain["count"]).all()  # counted once, not per recomputation
    pd.testing.assert_frame_equal(checked, plain, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("reentrant", [True, False])
def test_probes_leave_a_checkpointed_model_unchanged(tmp_path: Path, reentrant: bool) -> None:
    model = Checkpointed(reentrant)
    twin = copy.deepcopy(model)
    plain = train(model, None)
    with nbviz.Run(tmp_path / "r") as run, run.watch(twin, every=1):
        watched = train(twin, run)
    for a, b in zip(plain, watched, strict=True):
        assert torch.equal(a, b)


def _llama_gradients(path: Path, checkpointing: bool) -> pd.DataFrame:
    pytest.importorskip("transformers")
    from tiny_hf import tiny_llama

    model = tiny_llama()
    if checkpointing:
        reentrant = {"use_reentrant": True}
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=reentrant)
        model.enable_input_require_grads()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    tokens = torch.randint(0, 40, (4, 16), generator=torch.Generator().manual_seed(0))
    with nbviz.Run(path) as run:
        with run.watch(model, every=2):
            for step in range(3):
                loss = model(input_ids=tokens, labels=tokens).loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                run.log(step, train_loss=loss)
        run.flush()
        modules = set(run.layers()["name"])
        grads = run.stats("gradient", steps=[2])
    grads = grads[grads["layer"].isin(modules)]
    return grads[["layer", "count", "norm"]].sort_values("layer").reset_index(drop=True)


def test_hugging_face_gradient_checkpointing_keeps_every_output_gradient(tmp_path: Path) -> None:
    plain = _llama_gradients(tmp_path / "plain", checkpointing=False)
    checked = _llama_gradients(tmp_path / "checked", checkpointing=True)
    assert len(plain) > 20 and any(".layers.1.mlp" in n for n in plain["layer"])
    pd.testing.assert_frame_equal(checked, plain, rtol=1e-5, atol=1e-8)
