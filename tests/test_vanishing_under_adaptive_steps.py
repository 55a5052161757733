"""A gradient that vanishes toward the input is told apart from layers that barely learn:
an optimizer that scales each parameter's step (Adam) can keep them moving, and an
embedding table is no layer's yardstick."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from training import named_mlp

import nbviz
from nbviz.analysis.checks.gradients import KEEPS_PACE


def sigmoid_run(tmp_path, depth: int, optimizer: str, norm: bool = False) -> nbviz.Run:
    """A ``depth``-layer sigmoid MLP trained full-batch for 40 steps (with ``norm``, a
    LayerNorm before one more layer, the head)."""
    torch.manual_seed(0)
    x = torch.randn(256, 16)
    y = (x[:, 0] > 0).long()
    if norm:
        model = named_mlp(16, *([32] * depth), act=nn.Sigmoid)
        model.add_module("norm", nn.LayerNorm(32))
        model.add_module("head", nn.Linear(32, 2))
    else:
        model = named_mlp(16, *([32] * (depth - 1)), 2, act=nn.Sigmoid)
    opt = (
        torch.optim.Adam(model.parameters(), lr=1e-3)
        if optimizer == "adam"
        else torch.optim.SGD(model.parameters(), lr=0.1)
    )
    run = nbviz.Run(tmp_path / f"{depth}-{optimizer}")
    run.watch(model, every=5)
    for step in range(40):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.flush()
    return run


def vanishing(run: nbviz.Run):
    found = run.diagnose()
    rows = found[found["check"] == "vanishing_gradients"]
    assert len(rows) == 1, found[["check", "severity", "layer"]]
    return rows.iloc[0]


def test_under_adam_a_vanishing_gradient_whose_layers_keep_pace_is_info(tmp_path):
    with sigmoid_run(tmp_path, 8, "adam") as run:
        row = vanishing(run)
        assert (row["layer"], row["severity"], row["advice"]) == ("fc1", "info", "")
        assert row["evidence"]["ratio_to_later_layers"] < 1e-3  # the gradient did vanish
        pace = row["evidence"]["keeping_pace"]
        assert set(pace) == {f"{layer}.weight" for layer in row["evidence"]["layers"]}
        assert min(pace.values()) >= KEEPS_PACE
        assert "optimizer's steps make up for it" in row["message"]
        assert "barely learn" not in row["message"].replace("would barely move", "")
        assert run.triage().iloc[0]["cause"] == "healthy"


def test_under_sgd_the_same_network_barely_learns(tmp_path):
    with sigmoid_run(tmp_path, 8, "sgd") as run:
        row = vanishing(run)
        assert (row["layer"], row["severity"]) == ("fc1", "warning")
        assert "barely learn" in row["message"] and row["advice"]
        assert not row["evidence"]["keeping_pace"]


def test_the_advice_leaves_out_the_normalisation_a_model_has(tmp_path):
    with sigmoid_run(tmp_path, 12, "sgd", norm=True) as run:
        row = vanishing(run)
        assert row["severity"] == "warning"
        assert "normalisation" not in row["advice"] and "residual" in row["advice"]
    with sigmoid_run(tmp_path, 8, "sgd") as run:
        assert "normalisation" in vanishing(run)["advice"]


def test_where_adams_steps_cannot_make_up_the_starved_layers_are_named(tmp_path):
    """Deeper, fc1's gradient falls toward Adam's epsilon: its steps shrink too."""
    with sigmoid_run(tmp_path, 10, "adam") as run:
        row = vanishing(run)
        assert (row["layer"], row["severity"]) == ("fc1", "warning") and row["advice"]
        pace = row["evidence"]["keeping_pace"]
        assert "fc1.weight" not in pace and pace  # some deeper ones keep up
        kept = sorted(pace, key=lambda p: int(p[2:].split(".")[0]))
        assert f"keep '{kept[0].removesuffix('.weight')}'" in row["message"]


def test_an_encoder_decoders_position_tables_are_no_yardstick(tmp_path):
    """BART's decoder learns a table of positions whose gradient is near its weights' norm,
    a hundred times a matrix's: beside it the encoder's layers would all look vanishing."""
    tiny_hf = pytest.importorskip("tiny_hf")
    model = tiny_hf.tiny_bart()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    with nbviz.Run(tmp_path / "bart") as run:
        run.watch(model, every=2)
        for step in range(6):
            ids = torch.randint(2, 50, (4, 12), generator=gen)
            labels = torch.randint(2, 50, (4, 6), generator=gen)
            loss = model(input_ids=ids, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
        run.flush()

        def relative(param: str) -> float:
            grad = run.stats("gradient", layer=param)["norm"].median()
            return grad / run.stats("weight", layer=param)["norm"].median()

        table = relative("model.decoder.embed_positions.weight")
        encoder = relative("model.encoder.layers.1.fc1.weight")
        decoder = relative("model.decoder.layers.1.fc1.weight")
        assert encoder < 1e-3 * table and encoder > 1e-3 * decoder
        assert "vanishing_gradients" not in set(run.diagnose()["check"])
