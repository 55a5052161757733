"""Whatever checks the sentinel takes from others, it reports, per layer, exactly the
first step that layer's output was non-finite.

The ground truth here is independent of the probe: hooks of the test's own that
read ``torch.isfinite`` of every watched output on every step.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from reference_models import GPT, GPTConfig, next_token_loss, token_batch
from torch import nn
from training import sgd_step

import nbviz
from nbviz.probes import finite

BAD_STEP = 7
STEPS = 12
NAN, INF = float("nan"), float("inf")


def small_gpt() -> nn.Module:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab=32, context=8, width=16, heads=2, blocks=4))


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3),
        nn.ReLU(),
        nn.Conv2d(4, 8, 3),
        nn.GroupNorm(2, 8),
        nn.Sequential(nn.Flatten(), nn.Linear(8 * 8 * 8, 5)),
    )


def deep_chain() -> nn.Module:
    """Ten Linear + ReLU over tokens: a long chain of checks taken from the one before."""
    torch.manual_seed(0)
    return nn.Sequential(*(m for _ in range(10) for m in (nn.Linear(16, 16), nn.ReLU())))


def token_features(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(4, 32, 16, generator=gen), torch.randn(4, 32, 16, generator=gen)


class RaiseOnce(nn.Module):
    """Raises in the forward of one step, after the layers before it ran."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.calls, self.at = 0, at

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.at:
            raise RuntimeError("a forward cut short")
        return x


def cut_short() -> nn.Module:
    """Two Linear layers whose forward raises once, before the bad step (a loop that
    skips that batch)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), RaiseOnce(at=4))


def gpt_batches(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = token_batch(gen, 4, 9, 32)
    return ids[:, :-1], ids[:, 1:]


def image_batches(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(6, 1, 12, 12, generator=gen), torch.randint(0, 5, (6,), generator=gen)


MODELS = {
    "gpt": (small_gpt, gpt_batches, next_token_loss),
    "cnn": (small_cnn, image_batches, nn.functional.cross_entropy),
    "chain": (deep_chain, token_features, nn.functional.mse_loss),
    "cut short": (cut_short, token_features, nn.functional.mse_loss),
}


def set_nan(name: str, index: tuple[int, ...], value: float = NAN, via_data: bool = False):
    """A planting: one element of parameter ``name`` set at the bad step (through
    ``.data`` too, which leaves the parameter's version counter as it was)."""

    def plant(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        p = model.get_parameter(name)
        with torch.no_grad():
            (p.data if via_data else p)[index] = value
        return x

    return plant


def poison_input(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x[0, 0, 5, 5] = NAN
    return x


def run_with_truth(
    tmp_path, kind: str, plant: Callable[[nn.Module, torch.Tensor], torch.Tensor]
) -> tuple[dict[str, int], dict[str, int]]:
    """Train ``STEPS`` steps, ``plant`` applied before the forward of ``BAD_STEP``;
    -> (per layer, the first step the probe reported its output non-finite; the
    first step its output was non-finite, by the test's own reading)."""
    make, batches, loss_fn = MODELS[kind]
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    truth: dict[str, int] = {}
    step = 0
    with nbviz.Run(tmp_path / kind) as run:
        probe = run.watch(model, every=10)

        def read(name: str, module, args, output) -> None:
            if module.training and not torch.isfinite(output).all():
                truth.setdefault(name, step)

        for name, module in probe.modules:
            module.register_forward_hook(lambda m, a, o, name=name: read(name, m, a, o))
        gen = torch.Generator().manual_seed(0)
        for step in range(STEPS):
            x, y = batches(gen)
            if step == BAD_STEP:
                x = plant(model, x)
            try:
                loss = sgd_step(model, opt, x, y, loss_fn)
            except RuntimeError:
                continue  # a forward cut short: the loop skips the batch
            run.log(step, train_loss=loss)
        run.flush()
        events = run.events("nonfinite")
    events = events[events["signal"] == "activation"]
    reported = {row.layer: int(row.step) for row in events.itertuples()}
    return reported, truth


PLANTINGS = {
    "gpt: a LayerNorm weight after a block": ("gpt", set_nan("blocks.1.ln1.weight", (3,))),
    "gpt: a qkv weight, through .data": (
        "gpt",
        set_nan("blocks.0.attn.qkv.weight", (5, 2), INF, via_data=True),
    ),
    "gpt: an MLP bias": ("gpt", set_nan("blocks.1.mlp.fc.bias", (7,))),
    "gpt: the final LayerNorm's bias": ("gpt", set_nan("ln_f.bias", (0,), -INF)),
    "gpt: the tied head (a row of the token embedding)": ("gpt", set_nan("tok.weight", (31,))),
    "cnn: the second convolution's weight": ("cnn", set_nan("2.weight", (1, 0, 2, 2))),
    "cnn: a GroupNorm weight": ("cnn", set_nan("3.weight", (6,), INF)),
    "cnn: a NaN in the images": ("cnn", poison_input),
    "chain: the eighth Linear's weight": ("chain", set_nan("14.weight", (3, 1))),
    "chain: the last Linear's bias": ("chain", set_nan("18.bias", (0,), INF)),
    "after a forward cut short: the second Linear's weight": (
        "cut short",
        set_nan("2.weight", (0, 0)),
    ),
}


@pytest.mark.parametrize("planting", list(PLANTINGS))
def test_each_layer_is_reported_at_the_first_step_its_output_was_non_finite(planting, tmp_path):
    kind, plant = PLANTINGS[planting]
    reported, truth = run_with_truth(tmp_path, kind, plant)
    assert truth, "the planting made nothing non-finite"
    assert min(truth.values()) == BAD_STEP
    assert reported == truth


def test_a_container_returning_its_last_layers_output_takes_that_layers_check(
    monkeypatch, tmp_path
):
    reads: list[tuple[int, ...]] = []
    real = finite.checksum
    make, batches, loss_fn = MODELS["cnn"]
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(0)
    with nbviz.Run(tmp_path / "cnn") as run:
        run.watch(model, every=1000)
        for step in range(3):
            if step == 2:  # steps 0 (a capture) and 1 (first calls) left out
                monkeypatch.setattr(finite, "checksum", lambda x: reads.append(x.shape) or real(x))
            x, y = batches(gen)
            run.log(step, train_loss=sgd_step(model, opt, x, y, loss_fn))
    # the inner Sequential returns its Linear's (6, 5) output: one sum for both slots
    assert reads.count(torch.Size([6, 5])) == 1
