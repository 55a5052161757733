"""A run whose losses and logits overflow (to +-inf, then NaN) is recorded and shown
without a numpy RuntimeWarning from nbviz's own arithmetic: the views say what is
non-finite in their own words, and a warning printed under a training cell would be
about nbviz, not about the user's code."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import nbviz


class Overflowing(nn.Module):
    """A linear classifier whose first class's logit overflows on the first five samples:
    to 0 (step 1, finite), -inf (step 2: an infinite loss), +inf (step 3), NaN (step 4)."""

    def __init__(self, value: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 3)
        self.value = value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.fc(x).clone()
        out[:5, 0] = self.value
        return out


class LossOfItsOwn(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :1]


@pytest.fixture(scope="module")
def overflowing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 4, generator=g), torch.zeros(40, dtype=torch.int64)
    path = tmp_path_factory.mktemp("overflow") / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with nbviz.Run(path) as run:
            run.log_samples(x.numpy(), y.numpy())
            for step, value in enumerate((0.0, -np.inf, np.inf, np.nan), start=1):
                run.evaluate(step, Overflowing(value), [(x, y)], embed_layer="fc")
                run.log(step, train_loss=[1.0, np.inf, -np.inf, np.nan][step - 1])
    return path


def test_evaluating_overflowing_logits_is_quiet(overflowing: Path) -> None:
    with nbviz.open_run(overflowing) as run:
        losses = run.predictions(2)["loss"].to_numpy(dtype=np.float64)
        assert np.isinf(losses).sum() == 5 and np.isfinite(losses).sum() == 35


def test_a_mean_of_plus_and_minus_infinite_losses_is_quiet_and_nan(tmp_path: Path) -> None:
    x = torch.tensor([[np.inf], [-np.inf], [1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with nbviz.Run(tmp_path / "run") as run:
            metrics = run.evaluate(
                3, LossOfItsOwn(), [(x, torch.zeros(3, 1))], loss_fn=lambda out, t: out[:, 0]
            )
    assert np.isnan(metrics["val_loss"])


@pytest.mark.parametrize("view", ["EmbeddingProjector", "SampleGallery", "Dashboard"])
def test_the_views_of_an_overflowing_run_are_quiet(overflowing: Path, view: str) -> None:
    with nbviz.open_run(overflowing) as run, warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        w = getattr(nbviz, view)(run, live=False)
        for step in (1, 2, 3, 4):
            if hasattr(w, "step"):
                w.step = step
        if view == "EmbeddingProjector":
            w.step = 2
            w.color_by = "loss"
            assert w.points["loss_max"] > 0 and np.isfinite(w.points["loss_max"])
        w.close()
