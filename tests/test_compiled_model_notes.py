"""A torch.compile'd model: hooks inside its graph do not run, so its layers have no
activations. The probe says so when it is attached, and each layer's row says why."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from training import named_mlp

import nbviz


def test_a_compiled_model_warns_at_watch_and_each_layer_says_why_it_has_no_activations(
    tmp_path: Path,
) -> None:
    torch.manual_seed(0)
    model = named_mlp(12, 16, 3)
    compiled = torch.compile(model, backend="eager")
    opt = torch.optim.SGD(model.parameters(), 0.1)
    x, y = torch.randn(16, 12), torch.randint(0, 3, (16,))
    with nbviz.Run(tmp_path / "r") as run:
        with pytest.warns(UserWarning, match=r"watch: the model is torch\.compile'd"):
            probe = run.watch(compiled, every=1)
        for step in range(3):
            loss = nn.functional.cross_entropy(compiled(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
        probe.close()
        run.flush()
        layers = run.layers().set_index("name")
        assert set(layers.index) == {"fc1", "act1", "fc2"}
        assert not layers["watched"].any()
        assert layers["note"].str.contains("torch.compile'd model, where hooks do not run").all()
        assert run.recorded_layers("activation") == []
        assert "fc1.weight" in run.recorded_layers("gradient")
        view = nbviz.LayerBrowser(run, live=False)
        view.selected_layer = "fc1"
        assert "torch.compile'd" in view.detail["empty"] + view.detail["note"]
        view.close()
