"""Each parameter's distance from its initial value and the step's update, as recorded.

A capture measures them from copies of the weights (the initial ones, and those
when the step began): large CPU parameters take one path, small ones another
(:meth:`nbviz.probes.measure.StepMeasure._distance_into_prev`); both must give
the norms a recomputation gives. The update comes at every capture, divided by the
weight norm of that step; the weights' statistics and distance from init come with
the distributions (every ``hist_every`` steps).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import nbviz


def test_distance_from_init_and_update_norms_equal_a_recomputation(tmp_path):
    torch.manual_seed(0)
    # 300 x 256 = 76,800 weights (a large parameter), then small ones
    model = nn.Sequential(nn.Linear(256, 300), nn.ReLU(), nn.Linear(300, 4))
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(32, 256), torch.randint(0, 4, (32,))
    expected_rel, expected_update, expected_ratio = {}, {}, {}
    with nbviz.Run(tmp_path / "run") as run, run.watch(model, every=2) as probe:
        assert probe.hist_every == 10
        for step in range(12):
            before = {n: p.detach().clone() for n, p in model.named_parameters()}
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            run.log(step, train_loss=1.0)
            if step % 2 == 0:
                for n, p in model.named_parameters():
                    w = p.detach()
                    expected_rel[(step, n)] = float((w - initial[n]).norm() / initial[n].norm())
                    expected_update[(step, n)] = float((w - before[n]).norm())
                    expected_ratio[(step, n)] = expected_update[(step, n)] / float(w.norm())
        run.flush()
        weights = run.stats("weight")
        updates = run.stats("update")
    assert model[0].weight.numel() >= 65536  # the large-parameter path was taken
    assert sorted(set(weights["step"])) == [0, 10]
    assert len(weights) == 2 * 4
    for row in weights.itertuples():
        assert row.rel == pytest.approx(expected_rel[(row.step, row.layer)], rel=1e-5)
    assert sorted(set(updates["step"])) == [0, 2, 4, 6, 8, 10]
    assert len(updates) == len(expected_update) == 6 * 4
    for row in updates.itertuples():
        assert row.norm == pytest.approx(expected_update[(row.step, row.layer)], rel=1e-5)
        assert row.rel == pytest.approx(expected_ratio[(row.step, row.layer)], rel=1e-5)
    assert np.all(updates["norm"] > 0)
