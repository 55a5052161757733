"""A recurrent and an attention layer in a real JupyterLab: their rows in the Layers
table show the update/weight ratio of their weight matrices (``weight_ih_l0``,
``in_proj_weight``) as a number, like a Linear layer's, not a dash."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from notebook_page import ARTIFACTS
from playwright.sync_api import expect
from torch import nn

import nbviz


class RecurrentAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.rnn = nn.GRU(16, 16, batch_first=True)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(x))
        a, _ = self.attn(h, h, h)
        return self.head(a[:, -1])


def _record(path: Path) -> Path:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 20, (64, 10), generator=g)
    y = x[:, 0] % 3
    torch.manual_seed(0)
    model = RecurrentAttention()
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    with nbviz.Run(path) as run, run.watch(model, every=2):
        for step in range(6):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
    return path


def test_recurrent_and_attention_rows_show_their_update_ratio(nb, tmp_path: Path) -> None:
    run_dir = _record(tmp_path / "rnn")
    nb.run(
        "recurrent.ipynb",
        [
            "import nbviz\n"
            f"lb = nbviz.LayerBrowser(nbviz.open_run({str(run_dir)!r}), live=False)\n"
            "lb",
        ],
        ready=".nbviz-layer-browser .nbviz-lb-row",
    )
    page = nb.page
    for layer in ("rnn", "attn", "head"):
        row = page.locator(f'.nbviz-lb-row[data-layer="{layer}"]')
        expect(row).to_have_count(1)
        expect(row.locator("td").last).to_have_text(re.compile(r"\d"))
    page.locator(".nbviz-layer-browser").screenshot(path=str(ARTIFACTS / "recurrent-layers.png"))
