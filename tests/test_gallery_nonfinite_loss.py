"""A sample whose evaluated loss is itself non-finite: the gallery names it NaN, +Inf
or -Inf (JSON has no such numbers), where a card would otherwise show a dash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn
from training import nan_run

import nbviz
from nbviz.store.predictions import NONFINITE_PRED


def nonfinite_loss_run(path: Path) -> Path:
    """A linear regression evaluated on six inputs, one NaN and one +inf (losses NaN and
    +inf at step 5), then with a loss of its own that is +-inf or NaN (step 6)."""
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    x[1, 0], x[2, 0] = float("nan"), float("inf")
    y = torch.zeros(6, 1)
    model = nn.Linear(4, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.0)
    with nbviz.Run(path, overwrite=True) as run:
        run.evaluate(5, model, [(x, y)], loss_fn=nn.MSELoss(reduction="none"))
        run.evaluate(6, model, [(x, -x[:, :1])], loss_fn=lambda out, t: (out - t).squeeze(1) * 1e39)
    return path


@pytest.fixture(scope="module")
def nonfinite_losses(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return nonfinite_loss_run(tmp_path_factory.mktemp("nf") / "run")


def test_a_loss_only_card_names_its_non_finite_loss(nonfinite_losses: Path) -> None:
    with nbviz.open_run(nonfinite_losses) as run:
        g = nbviz.SampleGallery(run, ids=[0, 1, 2], step=5, live=False)
        first, nan, inf = g.items
        assert first["loss"] > 0 and "nonfinite" not in first
        assert nan["loss"] is None and nan["nonfinite"] == {"loss": "NaN"}
        assert inf["loss"] is None and inf["nonfinite"] == {"loss": "+Inf"}
        g.show(1)
        assert g.detail["nonfinite"] == {"loss": "NaN"}
        json.dumps(g.get_state(["items", "detail"]), allow_nan=False, default=lambda o: "<binary>")
        g.close()


def test_minus_infinity_is_named_too(nonfinite_losses: Path) -> None:
    with nbviz.open_run(nonfinite_losses) as run:
        losses = run.predictions(6).set_index("id")["loss"]
        g = nbviz.SampleGallery(run, ids=[0, 1, 2, 3, 4, 5], step=6, live=False)
        names = {i["id"]: i.get("nonfinite", {}).get("loss") for i in g.items}
        for i, v in losses.items():
            want = "NaN" if v != v else ("+Inf" if v > 0 else "-Inf")
            assert names[i] == want, (i, v)
        assert "-Inf" in names.values() and "+Inf" in names.values()
        g.close()


def test_a_class_from_non_finite_logits_names_its_loss_and_confidence(tmp_path: Path) -> None:
    with nbviz.open_run(nan_run(tmp_path / "nan")) as run:
        g = nbviz.SampleGallery(run, ids=[0, 1], step=10, live=False)
        item = g.items[0]
        assert item["pred"] == NONFINITE_PRED
        assert item["nonfinite"] == {"loss": "NaN", "confidence": "NaN"}
        g.step = 5  # finite there: nothing named
        assert all("nonfinite" not in i for i in g.items)
        g.close()
