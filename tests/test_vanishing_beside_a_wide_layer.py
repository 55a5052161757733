"""A deep sigmoid stack whose gradient vanishes is found even beside a wide linear layer
that learns: only projections inside a recorded attention module are let off for a layer
before them that learns."""

from __future__ import annotations

import torch
from torch import nn

import nbviz
from nbviz.demo import load_digits


def sigmoid_stack(*sizes: int) -> nn.Sequential:
    model = nn.Sequential()
    for i, (a, b) in enumerate(zip(sizes, sizes[1:]), 1):
        model.add_module(f"fc{i}", nn.Linear(a, b))
        if i < len(sizes) - 1:
            model.add_module(f"act{i}", nn.Sigmoid())
    return model


class WideAndDeep(nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        self.wide = nn.Linear(64, 10)
        self.deep = sigmoid_stack(64, *[32] * (depth - 1), 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.wide(x) + self.deep(x)


def test_a_deep_sigmoid_stack_beside_a_wide_layer_has_vanishing_gradients(tmp_path):
    data = load_digits(seed=0)
    x = torch.from_numpy(data.x_train).flatten(1)
    y = torch.from_numpy(data.y_train)
    torch.manual_seed(0)
    model = WideAndDeep(depth=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    run = nbviz.Run(tmp_path / "run")
    run.watch(model, every=10, optimizer=opt)
    gen = torch.Generator().manual_seed(0)
    for step in range(200):
        idx = torch.randint(0, len(y), (64,), generator=gen)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.flush()
    findings = run.diagnose()
    found = findings[findings["check"] == "vanishing_gradients"]
    assert found["layer"].tolist() == ["deep.fc1"]
    run.close()
