"""A layer with a parametrized weight (``weight_norm``, ``spectral_norm``, ``orthogonal``:
``torch.nn.utils.parametrize``) is one layer, as the ``Linear`` it was: the modules
torch adds to compute its weight are not layers of the network (their output is the
weight, not something computed from the input), and the originals they hold are the
layer's weight, with its gradient, update ratio and histograms."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrizations
from training import steps_seen

import nbviz
from nbviz.param_names import module_of, short_name


def parametrized_mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        parametrizations.weight_norm(nn.Linear(12, 16, bias=False)),
        nn.ReLU(),
        parametrizations.spectral_norm(nn.Linear(16, 16)),
        nn.Tanh(),
        parametrizations.orthogonal(nn.Linear(16, 16)),
        nn.ReLU(),
        nn.Linear(16, 3),
    )


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 12, generator=g)
    return x, x[:, :3].argmax(1)


def train(model: nn.Module, run: nbviz.Run | None, steps: int = 5) -> list[torch.Tensor]:
    """Adam steps on one batch; the logits and every parameter gradient of each step."""
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    x, y = batch()
    return steps_seen(model, opt, x, y, run, steps)


def test_parameter_names_map_to_the_layer_that_holds_them() -> None:
    assert module_of("block.0.weight") == "block.0" and short_name("block.0.weight") == "weight"
    assert module_of("bias") == "" and short_name("bias") == "bias"
    original = "enc.conv.parametrizations.weight.original1"
    assert module_of(original) == "enc.conv" and short_name(original) == "weight.original1"
    assert module_of("parametrizations.weight.original") == ""  # a parametrized root


def test_a_parametrized_layer_is_one_layer_that_holds_its_originals(tmp_path: Path) -> None:
    model = parametrized_mlp()
    with nbviz.Run(tmp_path / "r") as run:
        with run.watch(model, every=2):
            train(model, run)
        run.flush()
        layers = run.layers().set_index("name")
        assert list(layers.index) == ["0", "1", "2", "3", "4", "5", "6"]
        assert layers.loc["0", "type"] == "ParametrizedLinear"
        # weight_norm: the direction (16 x 12) and a magnitude per output unit (16 x 1)
        assert layers.loc["0", "own_params"] == 16 * 12 + 16 == layers.loc["0", "params"]
        assert set(run.stats("activation", steps=[4])["layer"]) == set(layers.index)
        grads = set(run.stats("gradient", steps=[4])["layer"])
        assert not any("parametrizations" in g for g in grads if g in layers.index)
        for original in (
            "0.parametrizations.weight.original0",
            "0.parametrizations.weight.original1",
            "2.parametrizations.weight.original",
            "4.parametrizations.weight.original",
        ):
            assert original in grads

        view = nbviz.LayerBrowser(run, live=False)
        view.step = 4
        table = view.data().set_index("layer")
        assert list(table.index) == list(layers.index)
        for layer, weight in (
            ("0", "0.parametrizations.weight.original0"),
            ("2", "2.parametrizations.weight.original"),
            ("4", "4.parametrizations.weight.original"),
        ):
            update = run.stats("update", layer=weight, steps=[4])["rel"].iloc[0]
            assert np.isfinite(update) and update > 0
            assert table.loc[layer, "update_ratio"] == update
        view.selected_layer = "0"
        shown = {(h["label"], h["layer"]) for h in view.detail_at["histograms"]}
        assert ("weight", "0.parametrizations.weight.original0") in shown
        view.close()


def test_probes_leave_a_parametrized_model_outputs_and_gradients_unchanged(
    tmp_path: Path,
) -> None:
    model = parametrized_mlp()
    twin = copy.deepcopy(model)
    plain = train(model, None)
    with nbviz.Run(tmp_path / "r") as run, run.watch(twin, every=1):
        watched = train(twin, run)
    assert len(plain) == len(watched)
    for a, b in zip(plain, watched, strict=True):
        assert torch.equal(a, b)
