"""What a NaN/Inf is traced back to: a learning rate so high that the loss overflows
within a few steps, or a layer whose weights turned non-finite before its output."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from training import named_mlp

import nbviz

X = torch.randn(512, 12, generator=torch.Generator().manual_seed(0))
Y = (X[:, :2] > 0).long() @ torch.tensor([1, 2])


def _train(path: Path, lr: float, poison_at: int | None = None, every: int = 50) -> nbviz.Run:
    torch.manual_seed(0)
    model = named_mlp(12, 64, 64, 4)
    opt = torch.optim.SGD(model.parameters(), lr)
    run = nbviz.Run(path)
    with run.watch(model, every=every):
        for step in range(30):
            i = (step * 32) % 512
            loss = nn.functional.cross_entropy(model(X[i : i + 32]), Y[i : i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == poison_at:  # a write that puts a NaN in one weight
                with torch.no_grad():
                    model.fc2.weight[3, 5] = float("nan")
            run.log(step, train_loss=loss)
    run.flush()
    return run


def test_a_loss_that_climbs_then_overflows_is_the_learning_rates_doing(tmp_path: Path) -> None:
    run = _train(tmp_path / "r", lr=1e3)
    findings = run.diagnose().set_index("check")
    high = findings.loc["learning_rate_too_high"]
    assert high["severity"] == "error"
    assert "then inf at step" in high["message"] or "then nan at step" in high["message"]
    assert findings.loc["nonfinite", "root"] == high["id"]  # the overflow follows from it
    verdict = run.triage()
    assert verdict["cause"].iloc[0] == "learning_rate"
    assert "Lower the learning rate" in verdict["advice"].iloc[0]
    run.close()


def test_a_nan_written_into_a_weight_while_the_loss_falls_stays_numerical(tmp_path: Path) -> None:
    run = _train(tmp_path / "r", lr=0.05, poison_at=15)
    findings = run.diagnose()
    assert "learning_rate_too_high" not in set(findings["check"])
    assert run.triage()["cause"].iloc[0] == "numerics"
    run.close()


def test_a_layer_whose_weights_held_the_nan_first_is_told_so_where_they_were_captured(
    tmp_path: Path,
) -> None:
    """The first non-finite output is fc2's; the capture after step 15's update already
    shows the NaN in fc2.weight, so the advice points at what changed the weights, not
    at the layer's forward."""
    run = _train(tmp_path / "r", lr=0.05, poison_at=15, every=1)
    row = run.diagnose().set_index("check").loc["nonfinite"]
    assert row["layer"] == "fc2" and row["step"] == 16
    assert "parameter 'fc2.weight' already held non-finite values at step 15" in row["message"]
    assert "log/sqrt" not in row["message"]
    run.close()
