"""NaN in only some layers: the LayerBrowser counts the non-finite values of exactly the
layers that hold them, at the step shown, and keeps the others' values as they are;
a NaN in a layer's bias is counted on the layer's row even though its value is the
weight's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import nbviz
from nbviz.widgets.wire import array_from_payload

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Clean(nn.Module):
    """NaN/inf made 0: what follows it stays finite."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)


def partial_nan_run(path: Path) -> Path:
    """``0`` (Linear) and ``1`` (ReLU) output NaN in one unit from step 6 (one bias
    entry made NaN, then frozen); ``3`` (Linear, after ``Clean``) stays finite."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), Clean(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with nbviz.Run(path) as run, run.watch(model, every=1, layers=["0", "1", "3"]):
        for step in range(12):
            if step == 6:
                with torch.no_grad():
                    model[0].bias[2] = float("nan")
                model[0].bias.requires_grad_(False)
            x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
    return path


def test_only_the_layers_holding_nan_are_counted_and_the_others_keep_their_values(
    tmp_path: Path,
) -> None:
    with nbviz.open_run(partial_nan_run(tmp_path / "run")) as run:
        view = nbviz.LayerBrowser(run)
        assert view.step == 11
        names = [row["name"] for row in view.layers]

        def at(metric: str, what: str) -> dict[str, float]:
            values = array_from_payload(view.current[metric][what])
            return dict(zip(names, np.asarray(values, dtype=float).tolist()))

        bad = at("zero_frac", "nonfinite")
        assert bad["0"] == 32 and bad["1"] == 32 and bad["3"] == 0  # one unit of 32 samples
        assert np.isfinite(at("zero_frac", "values")["3"])
        # layer 0's update/weight is its weight's, finite; its bias's NaN is counted beside it
        assert np.isfinite(at("update_ratio", "values")["0"])
        assert at("update_ratio", "nonfinite")["0"] == 1
        assert at("update_ratio", "nonfinite")["3"] == 0
        view.step = 5  # before the NaN: nothing counted
        assert at("zero_frac", "nonfinite")["0"] == 0
        view.close()
