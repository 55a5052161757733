"""A layer that holds several weight matrices (a recurrent layer: input and hidden
weights per stacked layer) is one layer in the vanishing-gradient finding: counted and
named once, with how many of its matrices fall below."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from torch import nn

import nbviz


class RecurrentThenDeep(nn.Module):
    """A 2-layer LSTM read by eight sigmoid layers: the gradient reaching the LSTM vanishes."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.rnn = nn.LSTM(16, 16, num_layers=2, batch_first=True)
        layers: list[nn.Module] = []
        for _ in range(8):
            layers += [nn.Linear(16, 16), nn.Sigmoid()]
        self.deep = nn.Sequential(*layers, nn.Linear(16, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(x))
        return self.deep(h[:, -1])


def test_a_recurrent_layer_is_counted_and_named_once(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 20, (256, 8), generator=g)
    y = x[:, 0] % 3
    torch.manual_seed(0)
    model = RecurrentThenDeep()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with nbviz.Run(tmp_path / "r") as run:
        with run.watch(model, every=5, optimizer=opt):
            for step in range(60):
                idx = torch.randint(0, 256, (32,), generator=g)
                loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                run.log(step, train_loss=loss)
        findings = run.diagnose()
    found = findings[findings["check"] == "vanishing_gradients"]
    assert len(found) == 1
    message = found["message"].iloc[0]
    assert message.count("'rnn'") == 1, message
    assert re.search(r"'rnn' \(\d of its 4 weight matrices\)", message), message
    below, total = map(int, re.search(r"(\d+) of (\d+) layers are below", message).groups())
    assert total == 11  # emb, rnn and the nine Linear layers: modules, not matrices
    assert 2 <= below < total
