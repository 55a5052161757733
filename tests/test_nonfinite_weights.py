"""Weights that hold NaN/Inf where the forward never reads them (rows of an embedding
table no batch looks up) leave every output, gradient and loss finite: the sentinel sees
nothing, but the weights' own statistics do, and the diagnosis says so. Every gradient was
finite, so the advice points at the update (Adam with eps=0 divides 0 by 0 wherever a
gradient is 0), never at clipping gradients or the forward."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import nbviz


class TokenClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(40, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(x).mean(1))


def train(path: Path, eps: float, tell_optimizer: bool, read_from: int = 99) -> nbviz.Run:
    """30 Adam steps on tokens below 20; from step ``read_from`` on, on all 40."""
    model = TokenClassifier()
    opt = torch.optim.Adam(model.parameters(), 1e-2, eps=eps)
    g = torch.Generator().manual_seed(1)
    run = nbviz.Run(path)
    options = {"optimizer": opt} if tell_optimizer else {}
    with run.watch(model, every=5, **options):
        for step in range(30):
            vocabulary = 40 if step >= read_from else 20  # rows 20..39 looked up from then
            x = torch.randint(0, vocabulary, (16, 8), generator=g)
            loss = nn.functional.cross_entropy(model(x), x[:, 0] % 3)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
    run.flush()
    return run


@pytest.mark.parametrize("tell_optimizer", [True, False])
def test_weights_made_nonfinite_by_the_update_are_found_and_blamed_on_it(
    tmp_path: Path, tell_optimizer: bool
) -> None:
    with train(tmp_path / "r", eps=0.0, tell_optimizer=tell_optimizer) as run:
        assert run.scalars("train_loss")["value"].notna().all()  # the loss never saw them
        findings = run.diagnose()
        verdict = run.triage()
    found = findings[findings["check"] == "nonfinite"]
    assert len(found) == 1
    row = found.iloc[0]
    assert (row["severity"], row["layer"], row["step"]) == ("error", "emb", 0)
    assert "in the weights of 'emb' (Embedding) after that step's update" in row["message"]
    assert f"{20 * 16:,} of {40 * 16:,} values of 'emb.weight'" in row["message"]
    assert "the gradients were finite through step 0" in row["advice"]
    assert ("eps is 0" in row["advice"]) == tell_optimizer
    for contradicted in ("gradient clipping", "lower learning rate", "forward"):
        assert contradicted not in row["advice"]
    assert verdict["cause"].iloc[0] == "numerics"


def test_finite_weights_under_a_positive_eps_leave_no_finding(tmp_path: Path) -> None:
    with train(tmp_path / "r", eps=1e-8, tell_optimizer=True) as run:
        assert not (run.diagnose()["check"] == "nonfinite").any()


def test_weights_held_long_before_a_forward_reads_them_are_the_origin(tmp_path: Path) -> None:
    with train(tmp_path / "r", eps=0.0, tell_optimizer=True, read_from=20) as run:
        found = run.diagnose().set_index("check").loc["nonfinite"]
    assert (found["layer"], found["step"]) == ("emb", 0)
    assert "From later steps: the outputs of 'emb', 'head'" in found["message"]
    assert "eps is 0" in found["advice"]
