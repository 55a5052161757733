"""Layers whose weight is not called ``weight`` (a recurrent layer's ``weight_ih_l0``,
attention's ``in_proj_weight``) show their update/weight ratio, gradient and weight
histograms in the LayerBrowser like any Linear layer, rather than a blank."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

import nbviz


class RecurrentAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.rnn = nn.LSTM(16, 16, batch_first=True)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(x))
        a, _ = self.attn(h, h, h)
        return self.head(a[:, -1])


def test_recurrent_and_attention_layers_show_their_weights_update_ratio(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 20, (64, 10), generator=g)
    y = x[:, 0] % 3
    torch.manual_seed(0)
    model = RecurrentAttention()
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    with nbviz.Run(tmp_path / "r") as run:
        with run.watch(model, every=2):
            for step in range(6):
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                run.log(step, train_loss=loss)
        run.flush()
        view = nbviz.LayerBrowser(run, live=False)
        view.step = 4
        table = view.data().set_index("layer")
        for layer, weight in (("rnn", "rnn.weight_ih_l0"), ("attn", "attn.in_proj_weight")):
            update = run.stats("update", layer=weight, steps=[4])["rel"].iloc[0]
            grad = run.stats("gradient", layer=weight, steps=[4])["norm"].iloc[0]
            assert np.isfinite(update) and update > 0
            assert table.loc[layer, "update_ratio"] == update
            assert table.loc[layer, "grad_norm"] == grad
        view.selected_layer = "rnn"
        shown = {(h["label"], h["layer"]) for h in view.detail_at["histograms"]}
        assert ("weight", "rnn.weight_ih_l0") in shown
        assert ("weight gradient", "rnn.weight_ih_l0") in shown
        view.close()
