"""Small truths of the views, read in Chromium from saved pages (no kernel): the
LayerBrowser's table fits an 848 px output area, a gallery card names a non-finite
loss in the non-finite colour and its toolbar what the evaluation recorded, and a
click on the DataMap of a saved page shows the sample or says why it cannot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from notebook_page import ARTIFACTS
from playwright.sync_api import expect
from torch import nn

import nbviz
from nbviz.widgets.export import save_html

#: The width of a notebook's output area in JupyterLab at its usual window size.
OUTPUT_AREA_PX = 848


def open_saved(page: Any, path: Path, width: int | None = None) -> Any:
    """Open a saved page; with ``width``, its views get that many pixels, as in a notebook."""
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("#nbviz-report-root[data-nbviz-ready=true]")
    if width is not None:
        page.evaluate(
            "w => { const r = document.getElementById('nbviz-report-root');"
            " r.style.width = w + 'px'; r.style.boxSizing = 'border-box'; }",
            width,
        )
    return page


class LongNamedBlock(nn.Module):
    """Layers with the long, nested names of real models (``encoder.layers.0...``)."""

    def __init__(self) -> None:
        super().__init__()
        self.input_projection = nn.Linear(64, 48)
        self.residual_blocks = nn.Sequential(
            *[
                nn.Sequential(nn.Linear(48, 48), nn.LayerNorm(48), nn.GELU(), nn.Dropout(0.1))
                for _ in range(2)
            ]
        )
        self.classification_head = nn.Linear(48, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classification_head(self.residual_blocks(self.input_projection(x)))


@pytest.fixture(scope="module")
def long_named_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nbviz.demo import load_digits

    data = load_digits()
    x = torch.from_numpy(data.x_train).reshape(-1, 64)
    y = torch.from_numpy(data.y_train).long()
    torch.manual_seed(0)
    model = LongNamedBlock()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    path = tmp_path_factory.mktemp("long") / "run"
    with nbviz.Run(path) as run, run.watch(model, every=5):
        for step in range(30):
            xb, yb = x[step * 32 : step * 32 + 32], y[step * 32 : step * 32 + 32]
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss.item())
    return path


def test_the_layer_table_fits_an_output_area_of_848_px(
    new_page: Callable[..., Any], long_named_run: Path, tmp_path: Path
) -> None:
    with nbviz.open_run(long_named_run) as run:
        lb = nbviz.LayerBrowser(run, live=False)
        save_html(lb, tmp_path / "layers.html", max_steps=4)
        lb.close()
    page = open_saved(new_page(), tmp_path / "layers.html", OUTPUT_AREA_PX)
    view = page.locator(".nbviz-layer-browser")
    expect(view.locator(".nbviz-lb-row").first).to_be_visible()
    sizes = view.locator(".nbviz-lb-scroll").evaluate(
        "s => ({scroll: s.scrollWidth, client: s.clientWidth,"
        " view: s.closest('.nbviz-layer-browser').scrollWidth})"
    )
    view.screenshot(path=str(ARTIFACTS / "truthful-layer-table-848.png"))
    assert 0 < sizes["client"] <= OUTPUT_AREA_PX
    assert sizes["scroll"] <= sizes["client"], sizes  # no horizontal scrollbar
    assert sizes["view"] <= OUTPUT_AREA_PX, sizes
    # a nested name too long for its column is cut at its start, whole in the title
    name = "residual_blocks.1.1"
    cell = view.locator(f'.nbviz-lb-row[data-layer="{name}"] td.nbviz-lb-name')
    expect(cell).to_have_attribute("title", name)
    expect(cell).to_have_text(name)
    cut = cell.locator(".nbviz-lb-layer-name").evaluate("s => s.scrollWidth > s.clientWidth")
    assert cut is True
    # every sparkline is whole in its cell
    clipped = view.locator(".nbviz-lb-row canvas").evaluate_all(
        "cs => cs.filter(c => { const r = c.getBoundingClientRect();"
        " const t = c.closest('td').getBoundingClientRect();"
        " return r.left < t.left || r.right > t.right; }).length"
    )
    assert clipped == 0
