"""The offline report in a browser with no network: it opens from file://, every view
renders, the scrubber moves the other views, and clicks open what they open."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from notebook_page import ARTIFACTS
from playwright.sync_api import expect

WAIT_MS = 30_000
LOCAL = ("file:", "blob:", "data:")


@pytest.fixture(scope="module")
def report_file(demo_run_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nbviz.report import write_report

    info = write_report(demo_run_path, tmp_path_factory.mktemp("report") / "report.html")
    print(f"report: {info.nbytes / 1e6:.2f} MB in {info.seconds:.1f} s")
    return Path(info.path)


class Offline:
    """A page in a context with networking off; every request that is not local is aborted."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.outside: list[str] = []
        page.context.route("**/*", self._route)
        page.set_default_timeout(WAIT_MS)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(LOCAL):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    def open(self, path: Path) -> Any:
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("#nbviz-report-root[data-nbviz-ready=true]")
        return self.page


@pytest.fixture
def offline(new_page: Callable[..., Any]) -> Offline:
    return Offline(new_page(offline=True))


# canvases of the line charts and histograms, with the count of their non-blank pixels
PAINTED = """() => [...document.querySelectorAll(
    '.nbviz-loss-curves canvas, .nbviz-histograms canvas')]
  .filter(c => c.width > 0 && c.height > 0)
  .map(c => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i]) n++;
    return n;
  })"""

# the dashboard's tabs and the views each shows
TABS = {
    "overview": [".nbviz-loss-curves", ".nbviz-health"],
    "layers": [".nbviz-layer-browser", ".nbviz-histograms"],
    "predictions": [".nbviz-confusion", ".nbviz-projector"],
}


def open_tab(page: Any, key: str) -> None:
    page.locator(f'.nbviz-dash-tab[data-key="{key}"]').click()
    expect(page.locator(".nbviz-dashboard")).to_have_attribute("data-tab", key)


def open_every_tab(page: Any, last: str = "overview") -> None:
    """Visit each tab once (a tab's views are made when it first opens), then ``last``."""
    for key in [k for k in TABS if k != last] + [last]:
        open_tab(page, key)


def test_report_opens_offline_with_every_view_drawn(offline: Offline, report_file: Path) -> None:
    page = offline.open(report_file)
    page.set_viewport_size({"width": 1280, "height": 600})  # a laptop: the tabs are taller
    expect(page.locator(".nbviz-scrubber")).to_have_count(1)
    for key, selectors in TABS.items():
        open_tab(page, key)
        for selector in selectors:
            view = page.locator(selector)
            expect(view).to_have_count(1)
            expect(view).to_be_visible()
            box = view.bounding_box()
            assert box is not None and box["height"] > 20, f"{selector} is a blank box: {box}"
            assert view.inner_text().strip(), f"{selector} shows no text"
            expect(view.locator(".nbviz-message-error")).to_have_count(0)
        # the scrubber stays in view above whichever tab is read: scrolled 150 px into it
        page.evaluate(
            """() => window.scrollBy(0, document.querySelector('.nbviz-dashboard')
                .getBoundingClientRect().top + 150)"""
        )
        page.wait_for_function(
            """() => Math.abs(document.querySelector('.nbviz-dash-header').getBoundingClientRect()
                .top - Math.max(0, document.querySelector('.nbviz-dashboard')
                .getBoundingClientRect().top)) <= 1"""
        )
        expect(page.locator(".nbviz-scrub-step")).to_be_in_viewport()
        if key == "layers":  # the tallest: the page scrolled past the dashboard's top
            top = page.evaluate(
                "() => document.querySelector('.nbviz-dashboard').getBoundingClientRect().top"
            )
            assert top < -100, top
        page.evaluate("() => window.scrollTo(0, 0)")
        if key == "overview":
            offline.page.screenshot(path=str(ARTIFACTS / "report-overview.png"))
    open_tab(page, "layers")
    # the charts are drawn on canvases with pixels in them
    painted = page.evaluate(PAINTED)
    assert painted and all(n > 100 for n in painted), painted
    expect(page.locator(".nbviz-layer-browser .nbviz-lb-table tbody tr").first).to_be_visible()
    expect(page.locator(".nbviz-report-notes")).to_contain_text("recorded steps are stored")
    page.wait_for_timeout(300)
    assert offline.outside == [], f"the page asked the network for {offline.outside}"


def test_scrubber_moves_the_other_views(offline: Offline, report_file: Path) -> None:
    page = offline.open(report_file)
    open_every_tab(page, last="layers")
    scrubber = page.locator(".nbviz-scrubber")
    layers = page.locator(".nbviz-layer-browser .nbviz-lb-step")
    hist = page.locator(".nbviz-histograms .nbviz-hist-current")
    confusion = page.locator(".nbviz-confusion .nbviz-cm-step")
    expect(scrubber).to_have_attribute("data-step", "65")
    expect(layers).to_contain_text("step 65")
    expect(hist).to_contain_text("step 65")
    expect(confusion).to_contain_text("evaluation of step 65")
    before = page.locator(".nbviz-layer-browser .nbviz-lb-table").inner_text()

    scrubber.locator(".nbviz-scrub-first").click()
    expect(scrubber).to_have_attribute("data-step", "0")
    expect(layers).to_contain_text("step 0")
    expect(hist).to_contain_text("step 0")
    expect(confusion).to_contain_text("no evaluation at or before step 0")
    assert page.locator(".nbviz-layer-browser .nbviz-lb-table").inner_text() != before
    expect(scrubber.locator(".nbviz-scrub-scalars")).to_contain_text("train_loss")

    # the slider too: the middle of the run, the first evaluation
    slider = scrubber.locator(".nbviz-scrub-slider")
    slider.evaluate(
        """(s) => { s.value = String(Math.floor((Number(s.max) + 1) / 2));
                    s.dispatchEvent(new Event('input')); }"""
    )
    step = int(scrubber.get_attribute("data-step") or "-1")
    assert 0 < step < 65
    expect(layers).to_contain_text(f"step {step}")
    expect(confusion).to_contain_text(re.compile(r"evaluation of step 21|no evaluation"))


def test_confusion_cell_click_shows_its_samples(
    offline: Offline, report_file: Path, demo_run: Any
) -> None:
    preds = demo_run.predictions(65, split="val")
    wrong = preds[preds["label"] != preds["pred"]]
    pair = wrong.groupby(["label", "pred"]).size().sort_values(ascending=False)
    (t, p), n = pair.index[0], int(pair.iloc[0])
    page = offline.open(report_file)
    open_tab(page, "predictions")
    view = page.locator(".nbviz-confusion")
    expect(view.locator(".nbviz-gallery")).to_contain_text("Click a cell")
    canvas = view.locator("canvas.nbviz-cm-canvas")
    box = canvas.bounding_box()
    assert box is not None and box["width"] > 100
    cell = box["width"] / 10
    canvas.click(position={"x": (p + 0.5) * cell, "y": (t + 0.5) * cell})
    thumbs = view.locator(".nbviz-gallery .nbviz-gallery-card img.nbviz-gallery-thumb")
    expect(thumbs).to_have_count(min(n, 24))
    # the thumbnails are the cell's samples, decoded from the page itself
    widths = thumbs.evaluate_all("(imgs) => imgs.map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 0 for w in widths), widths

    # the selection survives a change of step; its samples follow the evaluation
    earlier = demo_run.predictions(43, split="val")
    n43 = int(((earlier["label"] == t) & (earlier["pred"] == p)).sum())
    page.locator(".nbviz-scrubber .nbviz-scrub-back").click()
    expect(view.locator(".nbviz-cm-step")).to_contain_text("evaluation of step 43")
    if n43:
        expect(thumbs).to_have_count(min(n43, 24))
    else:
        expect(view.locator(".nbviz-gallery")).to_contain_text("No samples in this cell")

    # with the cell still selected, the first step (before any evaluation) moves the matrix too
    page.locator(".nbviz-scrubber .nbviz-scrub-first").click()
    expect(view.locator(".nbviz-cm-step")).to_contain_text("no evaluation at or before step 0")
    expect(page.locator(".nbviz-report-status")).to_be_hidden()  # nothing went unanswered


def test_projector_and_matrix_name_the_same_evaluation_at_every_step(
    offline: Offline, report_file: Path, demo_run: Any
) -> None:
    evals = [int(s) for s in demo_run.prediction_steps("val")]
    positions = [int(s) for s in nbviz_positions(demo_run)]
    page = offline.open(report_file)
    open_tab(page, "predictions")
    slider = page.locator(".nbviz-scrubber .nbviz-scrub-slider")
    matrix = page.locator(".nbviz-confusion .nbviz-cm-step")
    projector = page.locator(".nbviz-projector .nbviz-pj-step")
    for i, step in enumerate(positions):
        slider.evaluate(
            "(s, i) => { s.value = String(i); s.dispatchEvent(new Event('input')); }", i
        )
        expect(page.locator(".nbviz-scrubber")).to_have_attribute("data-step", str(step))
        shown = [e for e in evals if e <= step]
        if shown:
            expect(matrix).to_contain_text(f"evaluation of step {shown[-1]} (")
            expect(projector).to_have_text(f"step {shown[-1]}")
        else:
            expect(matrix).to_contain_text(f"no evaluation at or before step {step}")
            expect(projector).to_have_text(
                f"step {evals[0]}: the first embedding (none at or before step {step})"
            )


def nbviz_positions(run: Any) -> list[int]:
    """Every step the scrubber moves over (what the report stores, all of them here)."""
    from nbviz.widgets.run_index import RunIndex

    return [int(s) for s in RunIndex(run).positions()]


def test_a_box_selection_says_in_the_gallery_why_it_has_no_samples(
    offline: Offline, report_file: Path
) -> None:
    page = offline.open(report_file)
    open_tab(page, "predictions")
    view = page.locator(".nbviz-projector")
    expect(view.locator(".nbviz-pj-step")).not_to_have_text("")
    view.locator(".nbviz-pj-mode-box").click()
    stage = view.locator(".nbviz-projector-stage")
    box = stage.bounding_box()
    assert box is not None and box["width"] > 100
    page.mouse.move(box["x"] + 5, box["y"] + 5)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 5, box["y"] + box["height"] - 5, steps=5)
    page.mouse.up()
    gallery = view.locator(".nbviz-pj-gallery")
    expect(gallery).to_contain_text("need a live kernel")
    expect(gallery).not_to_contain_text("Select points")
    offline.page.screenshot(path=str(ARTIFACTS / "report-box-select.png"))


def test_finding_click_moves_the_scrubber_and_opens_its_layer(
    offline: Offline, report_file: Path
) -> None:
    page = offline.open(report_file)
    expect(page.locator(".nbviz-dashboard")).to_have_attribute("data-tab", "overview")
    finding = page.locator(".nbviz-health .nbviz-hr-item[data-layer]:not([data-layer=''])").first
    layer = finding.get_attribute("data-layer")
    where = finding.locator(".nbviz-hr-where").inner_text()
    step = re.search(r"step (\d+)", where)
    assert layer and step, where
    finding.click()
    expect(page.locator(".nbviz-scrubber")).to_have_attribute("data-step", step.group(1))
    # the finding opened the Layers tab on its layer
    expect(page.locator(".nbviz-dashboard")).to_have_attribute("data-tab", "layers")
    detail = page.locator(".nbviz-layer-browser .nbviz-lb-detail")
    expect(detail).to_contain_text(layer)
    expect(detail.locator(".nbviz-lb-chartbox").first).to_be_visible()
    expect(page.locator(".nbviz-layer-browser .nbviz-lb-step")).to_contain_text(
        f"step {step.group(1)}"
    )
