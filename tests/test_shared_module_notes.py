"""A module the model calls several times per forward (shared weights) is recorded once,
its statistics pooled over the calls; the model summary says so, so a doubled count or a
mixed distribution is not read as one call's."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

import nbviz


class SharedBlock(nn.Module):
    """``block`` runs twice and ``act`` three times in each forward."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(12, 16)
        self.block = nn.Linear(16, 16)
        self.act = nn.ReLU()
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.inp(x))
        h = self.act(self.block(h))
        return self.head(self.act(self.block(h)))


def _train(path: Path, micro_batches: int = 1) -> nbviz.Run:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 12, generator=g), torch.randint(0, 3, (32,), generator=g)
    torch.manual_seed(0)
    model = SharedBlock()
    opt = torch.optim.SGD(model.parameters(), 0.1)
    run = nbviz.Run(path)
    with run.watch(model, every=1, optimizer=opt):
        for step in range(3):
            opt.zero_grad()
            for k in range(micro_batches):
                nn.functional.cross_entropy(
                    model(x[k::micro_batches]), y[k::micro_batches]
                ).backward()
            opt.step()
            run.log(step, train_loss=1.0)
    run.flush()
    return run


def test_modules_called_several_times_per_forward_are_noted_with_their_count(
    tmp_path: Path,
) -> None:
    run = _train(tmp_path / "r")
    notes = run.layers().set_index("name")["note"]
    assert notes["block"] == "called 2 times per forward: its statistics pool every call"
    assert notes["act"] == "called 3 times per forward: its statistics pool every call"
    assert notes["inp"] == "" and notes["head"] == ""
    stats = run.stats("activation", steps=[1]).set_index("layer")["count"]
    assert stats["block"] == 2 * stats["inp"]
    run.close()


def test_several_forwards_per_step_are_not_taken_for_shared_calls(tmp_path: Path) -> None:
    run = _train(tmp_path / "r", micro_batches=4)  # gradient accumulation: 4 forwards a step
    notes = run.layers().set_index("name")["note"]
    assert notes["inp"] == "" and notes["head"] == ""
    assert notes["block"].startswith("called 2 times per forward")
    run.close()
