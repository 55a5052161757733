"""Labels that hold one class alone: a data bug that makes any loss look like success."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from training import named_mlp

import nbviz


def _train(path: Path, labels: torch.Tensor, val_labels: torch.Tensor) -> nbviz.Run:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 12, generator=g)
    torch.manual_seed(0)
    model = named_mlp(12, 32, 4)
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    run = nbviz.Run(path)
    with run.watch(model, every=10):
        for step in range(30):
            i = (step * 32) % 256
            loss = nn.functional.cross_entropy(model(x[i : i + 32]), labels[i : i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
    val = [(x[i : i + 32], val_labels[i : i + 32]) for i in range(0, 128, 32)]
    run.evaluate(29, model, val)
    run.flush()
    return run


def test_labels_of_one_class_are_a_data_warning_not_a_healthy_run(tmp_path: Path) -> None:
    constant = torch.full((256,), 2)
    run = _train(tmp_path / "r", constant, constant)
    findings = run.diagnose()
    one = findings[findings["check"] == "class_imbalance"]
    assert len(one) == 1 and one["severity"].iloc[0] == "warning"
    assert "every label is '2' (the 128 val samples)" in one["message"].iloc[0]
    verdict = run.triage()
    assert verdict["cause"].iloc[0] == "data"
    assert "every label is '2'" in verdict["summary"].iloc[0]
    run.close()


def test_one_class_in_one_split_beside_varied_training_labels_is_not_that_warning(
    tmp_path: Path,
) -> None:
    """A held-out split of one class (say, the samples of a class under study) is no bug
    while the training split's labels vary."""
    varied = torch.arange(256) % 4
    run = _train(tmp_path / "r", varied, torch.zeros(256, dtype=torch.long))
    x = torch.randn(64, 12, generator=torch.Generator().manual_seed(1))
    run.evaluate(29, named_mlp(12, 32, 4), [(x, varied[:64])], split="train")
    run.flush()
    messages = run.diagnose()["message"].tolist()
    assert not any("every label is" in m for m in messages)
    run.close()
