"""The profiler view in a real JupyterLab: it renders what was profiled, and clicking a
module in the icicle zooms to it (the kernel sees the zoom, the icicle redraws)."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

SETUP = """\
import torch, nbviz
from torch import nn

class Matmul(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, width) / width ** 0.5)
    def forward(self, x):
        for _ in range(4):
            x = x @ self.weight
        return x

class Slow(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.first, self.second = Matmul(width), Matmul(width)
    def forward(self, x):
        return self.second(self.first(x))

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), Slow(256), nn.Linear(256, 4))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))

def step():
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
"""


def test_profiler_renders_and_a_click_zooms_to_the_module(nb, tmp_path: Path) -> None:
    view = nb.run(
        "profiler.ipynb",
        [
            SETUP,
            f"run = nbviz.Run({str(tmp_path / 'run')!r})\n"
            "p = nbviz.Profiler(model, step, steps=3, warmup=1, run=run, step=12)\n"
            "p",
        ],
        timeout_ms=120_000,
        ready=".nbviz-profiler",
    )
    expect(view.locator(".nbviz-prof-title")).to_have_text("Sequential at step 12")
    expect(view.locator(".nbviz-prof-overhead")).to_contain_text(
        re.compile(r"profiler overhead: a step took [\d.e+-]+ ms profiled")
    )
    for part in ("forward", "backward", "optimizer"):
        expect(view.locator(f'.nbviz-prof-seg[data-part="{part}"]')).to_have_count(1)
    icicle = view.locator(".nbviz-prof-icicle")
    expect(icicle).to_have_attribute("data-zoom", "")
    expect(icicle.locator('.nbviz-prof-node[data-name="2"]')).to_have_count(1)
    # the module table: every module, slowest self time first, as the kernel ranks them
    rows = view.locator(".nbviz-prof-modules tbody tr")
    expect(rows).to_have_count(int(nb.kernel_eval("len(p.profile['modules'])")))
    first = nb.kernel_eval("p.modules().iloc[0]['name']").strip("'")
    expect(rows.first).to_have_attribute("data-name", first)
    # the operator table: slowest self time first (which operator that is depends on the
    # machine's load at the moment), the matrix products among them
    ops = view.locator(".nbviz-prof-ops tbody tr")
    slowest = nb.kernel_eval("max(p.profile['operators'], key=lambda o: o['self_ms'])['name']")
    expect(ops.first.locator("td").first).to_have_text(slowest.strip("'"))
    expect(ops.filter(has_text="aten::mm")).not_to_have_count(0)
    root_width = icicle.locator(".nbviz-prof-root").bounding_box()["width"]
    slow_width = icicle.locator('.nbviz-prof-node[data-name="2"]').bounding_box()["width"]
    assert slow_width < root_width

    # click the slow block: the kernel sees the zoom, the block spans the icicle
    icicle.locator('.nbviz-prof-node[data-name="2"]').click()
    nb.wait_kernel("p.zoom", "'2'")
    expect(icicle).to_have_attribute("data-zoom", "2")
    top = icicle.locator(".nbviz-prof-root")
    expect(top).to_have_attribute("data-name", "2")
    assert abs(top.bounding_box()["width"] - root_width) < 2
    expect(icicle.locator('.nbviz-prof-node[data-name="2.first"]')).to_have_count(1)
    expect(icicle.locator('.nbviz-prof-node[data-name="0"]')).to_have_count(0)
    expect(rows).to_have_count(3)  # the zoomed subtree: Slow and its two blocks
    expect(view.locator(".nbviz-prof-crumb")).to_have_text(["(Sequential)", "2"])
    nb.screenshot("profiler-zoomed")

    # the top bar zooms back out; a header sorts the table
    top.click()
    nb.wait_kernel("p.zoom", "''")
    expect(icicle).to_have_attribute("data-zoom", "")
    view.locator('.nbviz-prof-modules th[data-key="name"]').click()
    nb.wait_kernel("(p.sort_by, p.descending)", "('name', False)")
    expect(rows.first).to_have_attribute("data-name", "")
