"""A module called twice per forward, in a real JupyterLab: clicking its row in the
Layers table opens its detail with the probe's note that its statistics pool both calls."""

from __future__ import annotations

from pathlib import Path

import torch
from notebook_page import ARTIFACTS
from playwright.sync_api import expect
from torch import nn

import nbviz


class SharedBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(12, 16)
        self.block = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.block(torch.relu(self.block(self.inp(x))))))


def test_a_shared_layers_detail_says_its_statistics_pool_its_calls(nb, tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 12, generator=g), torch.randint(0, 3, (32,), generator=g)
    torch.manual_seed(0)
    model = SharedBlock()
    opt = torch.optim.SGD(model.parameters(), 0.1)
    with nbviz.Run(tmp_path / "r") as run, run.watch(model, every=1):
        for step in range(4):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
    nb.run(
        "shared.ipynb",
        [
            "import nbviz\n"
            f"lb = nbviz.LayerBrowser(nbviz.open_run({str(tmp_path / 'r')!r}), live=False)\n"
            "lb",
        ],
        ready=".nbviz-layer-browser .nbviz-lb-row",
    )
    page = nb.page
    page.locator('.nbviz-lb-row[data-layer="block"]').click()
    note = page.locator(".nbviz-lb-detail .nbviz-lb-note")
    expect(note).to_have_text("called 2 times per forward: its statistics pool every call")
    page.locator('.nbviz-lb-row[data-layer="inp"]').click()
    expect(page.locator(".nbviz-lb-detail h4")).to_contain_text("inp")
    expect(page.locator(".nbviz-lb-detail .nbviz-lb-note")).to_have_count(0)
    page.locator('.nbviz-lb-row[data-layer="block"]').click()
    expect(note).to_have_count(1)
    page.locator(".nbviz-layer-browser").screenshot(path=str(ARTIFACTS / "shared-layer.png"))
