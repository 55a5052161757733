"""The learning rate a capture step records is the one its update used, not the next step's."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nbviz


def test_the_lr_of_a_capture_step_is_the_one_its_update_used(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # a schedule that changes the lr at every step, stepped after each update as usual
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0 / (k + 1))
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    used = {}
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=2, optimizer=opt)
        for step in range(7):
            used[step] = opt.param_groups[0]["lr"]
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            sched.step()
            run.log(step, train_loss=1.0)
    with nbviz.open_run(tmp_path / "run") as run:
        lr = run.scalars("optimizer/lr").set_index("step")["value"]
    assert list(lr.index) == [0, 2, 4, 6]
    assert lr.to_dict() == pytest.approx({s: used[s] for s in (0, 2, 4, 6)})


def test_without_an_update_the_lr_is_read_when_the_step_ends(tmp_path):
    """A capture step whose optimizer.step() did not run (a scaler skipped it) still records."""
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.25)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, optimizer=opt)
        model(torch.randn(3, 4)).sum().backward()  # no optimizer.step()
        probe.close()
    with nbviz.open_run(tmp_path / "run") as run:
        assert run.scalars("optimizer/lr")["value"].tolist() == [0.25]
