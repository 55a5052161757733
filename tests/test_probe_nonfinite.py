"""A non-finite value is found at the exact step and layer, counted, and never spread into
the statistics, whichever way a tensor is read (the ``read_path`` fixture)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn
from training import fit, mlp, random_batches

import nbviz


class NanAtCall(nn.Module):
    """Passes its input on (cast to ``dtype`` if given), with a NaN in it on call ``call``."""

    def __init__(self, call: int, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.call, self.dtype, self.calls = call, dtype, 0

    def forward(self, x):
        self.calls += 1
        if self.calls == self.call:
            x = x.clone()
            x[0, 0] = float("nan")
        return x if self.dtype is None else x.to(self.dtype)


def test_nan_is_reported_at_the_exact_step_and_layer(tmp_path, read_path):
    torch.manual_seed(0)
    poison = NanAtCall(14)  # the 14th training forward: step 13
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), poison, nn.Linear(16, 5))
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=10, layers=["0", "1", "2", "3"])
        fit(run, model, random_batches(20))
        events = run.events("nonfinite")
    activation = events[events["signal"] == "activation"]
    first = activation.sort_values(["step", "layer"]).iloc[0]
    assert first["step"] == 13
    assert first["layer"] == "2"
    origin = min(
        activation.itertuples(),
        key=lambda r: (
            r.step,
            json.loads(r.detail)["order"] if isinstance(r.detail, str) else r.detail["order"],
        ),
    )
    assert origin.layer == "2"
    # the layer before the poison stayed finite at step 13
    assert not ((activation["layer"] == "0") & (activation["step"] == 13)).any()


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2], ids=str
)
def test_narrow_float_outputs_are_watched_and_their_nan_is_found(tmp_path, dtype, read_path):
    """Half, bfloat16 and float8 outputs (quantisation sketches): no crash, exact NaN report."""
    torch.manual_seed(0)
    narrow = NanAtCall(8, dtype)  # the 8th training forward: step 7
    back = NanAtCall(0, torch.float32)  # only casts back (there is no call 0)
    model = nn.Sequential(nn.Linear(12, 16), narrow, back, nn.Linear(16, 5))
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=5)  # step 7 is not a capture step
        fit(run, model, random_batches(12))
        narrow = run.stats("activation", layer="1", steps=0).iloc[0]
        events = run.events("nonfinite")
    assert narrow["count"] == 8 * 16
    assert narrow["nonfinite"] == 0
    activation = events[events["signal"] == "activation"]
    first = activation.sort_values(["step", "layer"]).iloc[0]
    assert (first["step"], first["layer"]) == (7, "1")


def test_nonfinite_values_are_counted_not_propagated(tmp_path, read_path):
    class Inf(nn.Module):
        def forward(self, x):
            x = x.clone()
            x[:, 0] = float("inf")
            return x

    model = nn.Sequential(nn.Linear(12, 16), Inf())
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, signals="activations")
        with torch.no_grad():
            pass
        out = model(torch.randn(8, 12))
        out.sum()
        probe.close()
        row = run.stats("activation", layer="1").iloc[0]
    assert row["nonfinite"] == 8
    assert np.isfinite(row["mean"]) and np.isfinite(row["std"])


def test_nonfinite_weights_and_gradients_are_counted_not_propagated(tmp_path, read_path):
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, hist_every=1)

        def poison(grad):
            grad = grad.clone()
            grad[0, :3] = float("nan")
            grad[1, 0] = float("inf")
            return grad

        for step, (x, y) in enumerate(random_batches(3)):
            opt.zero_grad()
            handle = model[4].weight.register_hook(poison) if step == 2 else None
            nn.functional.cross_entropy(model(x), y).backward()
            if handle is not None:
                handle.remove()
            opt.step()
            run.log(step, train_loss=1.0)
        probe.close()
        grad = run.stats("gradient", layer="4.weight", steps=2).iloc[0]
        weight = run.stats("weight", layer="4.weight", steps=2).iloc[0]
    assert grad["nonfinite"] == 4 and weight["nonfinite"] == 4
    w = model[4].weight.detach().double().numpy()
    finite = w[np.isfinite(w)]
    assert weight["mean"] == pytest.approx(finite.mean(), rel=1e-5)
    assert weight["std"] == pytest.approx(finite.std(), rel=1e-4)
    assert weight["min"] == pytest.approx(finite.min()) and np.isfinite(grad["std"])


def test_a_weight_gone_nonfinite_between_distributions_is_counted_in_its_update(tmp_path):
    """At a capture without the weights' statistics (every=1: they come every 10th step),
    the update of a weight that now holds NaN/Inf counts them, so the step is still told."""
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=1)
        for step, (x, y) in enumerate(random_batches(4)):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            if step == 2:
                with torch.no_grad():
                    model[4].weight[0, :3] = float("nan")  # what a bad update leaves
            run.log(step, train_loss=1.0)
        run.flush()
        weight_steps = list(run.steps("weight"))
        updates = run.stats("update", layer="4.weight").set_index("step")
    assert weight_steps == [0]
    assert updates.loc[1, "nonfinite"] == 0 and np.isfinite(updates.loc[1, "norm"])
    assert updates.loc[2, "nonfinite"] == 3 and not np.isfinite(updates.loc[2, "norm"])
