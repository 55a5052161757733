"""Zero fractions come with the distributions: NaN ("not measured") at the captures
between, the true fraction at a distribution step; every other statistic at each capture."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from training import mlp, random_batches, sgd_step

import nbviz


def test_zero_fractions_come_with_the_distributions(tmp_path):
    """Between distribution steps a gradient's or an activation's zero fraction is not
    measured (NaN), its other statistics are; at a distribution step it is the true
    fraction."""
    torch.manual_seed(0)
    model = mlp()
    seen = {}
    model[1].register_full_backward_hook(
        lambda m, gin, gout: seen.__setitem__(len(seen), gout[0].detach().clone())
    )
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1, hist_every=3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step, (x, y) in enumerate(random_batches(7)):
            run.log(step, train_loss=sgd_step(model, opt, x, y))
        run.flush()
        grads = run.stats("gradient")
        acts = run.stats("activation")
    assert sorted(set(grads["step"])) == list(range(7))
    measured = grads[grads["zero_frac"].notna()]
    assert sorted(set(measured["step"])) == [0, 3, 6]
    # every gradient, of outputs and of parameters, small (batched) and large alike
    assert set(measured["layer"]) == set(grads["layer"]) and "0.bias" in set(grads["layer"])
    assert grads["norm"].notna().all() and (grads["nonfinite"] == 0).all()
    relu = grads[grads["layer"] == "1"].set_index("step")
    for step in (0, 3, 6):
        g = seen[step].double().numpy()
        assert relu.loc[step, "zero_frac"] == pytest.approx((g == 0).mean())
        assert relu.loc[step, "norm"] == pytest.approx(np.sqrt((g**2).sum()), rel=1e-5)
    g = seen[4].double().numpy()
    assert relu.loc[4, "norm"] == pytest.approx(np.sqrt((g**2).sum()), rel=1e-5)
    assert sorted(set(acts[acts["zero_frac"].notna()]["step"])) == [0, 3, 6]
    assert acts["mean"].notna().all() and sorted(set(acts["step"])) == list(range(7))
