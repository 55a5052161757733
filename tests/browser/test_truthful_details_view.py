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


def _nonfinite_loss_run(path: Path) -> Path:
    """A linear regression evaluated on six inputs, one NaN and one +inf: losses NaN, +inf."""
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    x[1, 0], x[2, 0] = float("nan"), float("inf")
    model = nn.Linear(4, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.0)
    with nbviz.Run(path) as run:
        run.log_samples(x.numpy())
        run.evaluate(5, model, [(x, torch.zeros(6, 1))], loss_fn=nn.MSELoss(reduction="none"))
    return path


NONFINITE_RGB = "rgb(196, 16, 63)"  # .nbviz-nonfinite (widgets/base.py)


def test_a_card_names_a_non_finite_loss_and_the_toolbar_says_losses(
    new_page: Callable[..., Any], tmp_path: Path
) -> None:
    with nbviz.open_run(_nonfinite_loss_run(tmp_path / "run")) as run:
        g = nbviz.SampleGallery(run, ids=[0, 1, 2], live=False)
        g.show(1)  # its detail open as the page opens (a saved page opens no other)
        save_html(g, tmp_path / "gallery.html")
        g.close()
    page = open_saved(new_page(), tmp_path / "gallery.html", OUTPUT_AREA_PX)
    view = page.locator(".nbviz-gallery")
    expect(view.locator(".nbviz-gallery-eval")).to_have_text("losses of step 5")
    cards = view.locator(".nbviz-gallery-card")
    expect(cards).to_have_count(3)
    values = view.locator(".nbviz-gallery-loss .nbviz-gallery-value")
    expect(values).to_have_count(3)
    texts = values.all_text_contents()
    assert texts[1:] == ["NaN", "+Inf"] and float(texts[0]) > 0
    colours = values.evaluate_all("vs => vs.map(v => getComputedStyle(v).color)")
    assert colours[1] == colours[2] == NONFINITE_RGB
    assert colours[0] != NONFINITE_RGB
    # the detail names it too
    loss = view.locator(".nbviz-gallery-detail .nbviz-gallery-line", has_text="loss")
    expect(loss.locator(".nbviz-nonfinite")).to_have_text("NaN")
    view.screenshot(path=str(ARTIFACTS / "truthful-nonfinite-losses.png"))


def _data_map_page(run_path: Path, out: Path) -> tuple[list[dict], Any]:
    """A saved page of a DataMap; its suspects and the points' (x, y) in [-1, 1]."""
    from nbviz.widgets.wire import array_from_payload

    with nbviz.open_run(run_path) as run:
        dm = nbviz.DataMap(run, live=False)
        save_html(dm, out)
        suspects = list(dm.suspects)
        xy = array_from_payload(dm.points["xy"]).reshape(-1, 2)
        dm.close()
    return suspects, xy


@pytest.fixture(scope="module")
def map_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training import data_map_run

    return data_map_run(tmp_path_factory.mktemp("map") / "run")


def _click_point(page: Any, view: Any, xy: Any, i: int) -> None:
    """Click point ``i`` where the map draws it (the square maps [-1, 1] onto its sides)."""
    view.scroll_into_view_if_needed()
    box = view.locator(".nbviz-dm-stage canvas").bounding_box()
    assert box is not None
    x, y = float(xy[i, 0]), float(xy[i, 1])
    page.mouse.click(box["x"] + (x + 1) / 2 * box["width"], box["y"] + (1 - y) / 2 * box["height"])


def _away_from(xy: Any, listed: set[int], radius: float = 0.1) -> int:
    """A point not in ``listed`` with none of them within ``radius`` (so that a click near
    it picks a point outside the list, whichever of its neighbours is nearest)."""
    import numpy as np

    others = np.asarray(sorted(listed), dtype=np.int64)
    for i in range(len(xy)):
        if i in listed:
            continue
        if not len(others) or np.hypot(*(xy[others] - xy[i]).T).min() > radius:
            return i
    raise AssertionError("every point is near a listed one")


def test_a_click_on_the_data_map_of_a_saved_page_opens_its_sample(
    new_page: Callable[..., Any], map_run: Path, tmp_path: Path
) -> None:
    suspects, xy = _data_map_page(map_run, tmp_path / "map.html")
    page = open_saved(new_page(), tmp_path / "map.html")
    view = page.locator(".nbviz-datamap")
    expect(view).to_have_attribute("data-drawn", str(len(xy)))
    gallery = view.locator(".nbviz-dm-gallery")
    expect(gallery).to_contain_text("Click a point")
    # a row of the list of the most likely mislabelled
    first = suspects[0]
    view.locator(f'.nbviz-dm-suspect[data-id="{first["id"]}"]').click()
    card = gallery.locator(".nbviz-gallery-card")
    expect(card).to_have_count(1)
    expect(card.locator(".nbviz-gallery-id")).to_have_text(f"#{first['id']}")
    expect(card.locator("img")).to_be_visible()
    # a point on the map, away from the others
    i = _away_from(xy, {s["index"] for s in suspects})
    _click_point(page, view, xy, i)
    expect(card).to_have_count(1)
    expect(card).not_to_have_attribute("data-id", str(first["id"]))
    expect(view.locator(".nbviz-dm-unanswered")).to_be_hidden()
    view.screenshot(path=str(ARTIFACTS / "truthful-data-map-click.png"))


def test_a_data_map_too_large_for_the_page_says_why_a_click_shows_nothing(
    new_page: Callable[..., Any], map_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbviz.widgets import answer_plans

    monkeypatch.setattr(answer_plans, "MAX_MAP_POINTS", 10)  # as a map of 100,000 points
    suspects, xy = _data_map_page(map_run, tmp_path / "map.html")
    page = open_saved(new_page(), tmp_path / "map.html")
    view = page.locator(".nbviz-datamap")
    expect(view).to_have_attribute("data-drawn", str(len(xy)))
    i = _away_from(xy, {s["index"] for s in suspects})
    _click_point(page, view, xy, i)
    why = view.locator(".nbviz-dm-unanswered")
    expect(why).to_be_visible()
    expect(why).to_contain_text("does not hold the sample of this point")
    expect(why).to_contain_text(f"the {len(suspects)} most likely mislabelled")
    expect(view.locator(".nbviz-dm-gallery")).to_be_hidden()
    view.screenshot(path=str(ARTIFACTS / "truthful-data-map-unanswered.png"))
    # a row of the list still opens its sample, and the words go
    first = suspects[0]
    view.locator(f'.nbviz-dm-suspect[data-id="{first["id"]}"]').click()
    expect(why).to_be_hidden()
    card = view.locator(".nbviz-dm-gallery .nbviz-gallery-card")
    expect(card.locator(".nbviz-gallery-id")).to_have_text(f"#{first['id']}")


def test_non_finite_words_in_the_layer_table_stay_whole_at_848_px(
    new_page: Callable[..., Any], tmp_path: Path
) -> None:
    from training import nan_run

    with nbviz.open_run(nan_run(tmp_path / "nan")) as run:
        lb = nbviz.LayerBrowser(run, live=False)
        lb.step = 7  # one unit of act1 NaN: a value with a count beside it; fc2 all NaN
        save_html(lb, tmp_path / "layers.html", max_steps=2)
        lb.close()
    page = open_saved(new_page(), tmp_path / "layers.html", OUTPUT_AREA_PX)
    view = page.locator(".nbviz-layer-browser")
    act1 = view.locator('.nbviz-lb-row[data-layer="act1"]')
    expect(act1.locator(".nbviz-lb-nonfinite").nth(0)).to_have_text("\u26a0 32 non-finite")
    fc2 = view.locator('.nbviz-lb-row[data-layer="fc2"]')
    expect(fc2.locator(".nbviz-lb-value").nth(1)).to_have_text("non-finite (1,024)")
    scroll = view.locator(".nbviz-lb-scroll")
    assert scroll.evaluate("s => s.scrollWidth <= s.clientWidth")
    # every word is whole inside its cell: none cut by the column's edge
    cut = view.locator(".nbviz-lb-value, .nbviz-lb-nonfinite:not(:empty)").evaluate_all(
        "ss => ss.filter(s => { const r = s.getBoundingClientRect();"
        " const t = s.closest('td').getBoundingClientRect();"
        " return r.width > 0 && (r.left < t.left - 0.5 || r.right > t.right + 0.5); })"
        ".map(s => s.textContent)"
    )
    assert cut == []
    view.screenshot(path=str(ARTIFACTS / "truthful-layer-table-nonfinite-848.png"))
