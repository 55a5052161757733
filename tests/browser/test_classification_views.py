"""The classification views in a real JupyterLab: a click on a confusion cell reaches the
kernel, and the cell's samples appear as thumbnails in the embedded gallery."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import expect


def wait_until(read: Callable[[], str], ok: Callable[[str], bool], timeout: float = 30) -> str:
    """Poll a kernel value until ``ok(value)`` (a JS -> kernel update is async)."""
    deadline = time.monotonic() + timeout
    value = read()
    while not ok(value):
        if time.monotonic() > deadline:
            raise AssertionError(f"kernel value stayed {value!r}")
        time.sleep(0.1)
        value = read()
    return value


def test_confusion_cell_click_selects_and_shows_thumbnails(nb, demo_run_path: Path) -> None:
    nb.write(
        "confusion.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "cm = nbviz.ConfusionMatrix(run)\n"
            "pair = cm.confused[0]; t, p = pair['true'], pair['pred']\n"
            "cm",
        ],
    )
    nb.open("confusion.ipynb")
    nb.run_all()
    page = nb.page
    view = page.locator(".nbviz-confusion")
    canvas = view.locator("canvas.nbviz-cm-canvas")
    expect(canvas).to_have_count(1)
    expect(view.locator(".nbviz-cm-rowlabel")).to_have_count(10)
    expect(view.locator(".nbviz-cm-collabel")).to_have_count(10)
    expect(view.locator(".nbviz-cm-step")).to_contain_text("evaluation of step 65")
    expect(view.locator(".nbviz-cm-scores")).to_contain_text(re.compile(r"accuracy 0\.\d+"))
    expect(view.locator(".nbviz-cm-table tbody tr")).to_have_count(10)
    # before a selection the gallery asks for a click
    expect(view.locator(".nbviz-gallery")).to_contain_text("Click a cell")

    t, p = int(nb.kernel_eval("t")), int(nb.kernel_eval("p"))
    box = canvas.bounding_box()
    assert box is not None and box["width"] > 100
    cell = box["width"] / 10
    canvas.click(position={"x": (p + 0.5) * cell, "y": (t + 0.5) * cell})
    wait_until(lambda: nb.kernel_eval("cm.selected"), lambda v: v == f"[{t}, {p}]")
    n = int(nb.kernel_eval("len(cm.selected_ids)"))
    assert n == int(nb.kernel_eval("pair['count']")) and n > 0
    thumbs = view.locator(".nbviz-gallery .nbviz-gallery-card img.nbviz-gallery-thumb")
    expect(thumbs).to_have_count(min(n, 24))
    first_id = nb.kernel_eval("cm.selected_ids[0]")
    expect(view.locator(".nbviz-gallery-card").first).to_have_attribute("data-id", first_id)
    expect(view.locator(".nbviz-gallery-card").first).to_contain_text("pred")
    # the images really decoded
    assert page.evaluate(
        "() => [...document.querySelectorAll('img.nbviz-gallery-thumb')]"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )

    # a most-confused pair selects its cell; the table sorts
    view.locator(".nbviz-cm-confused button").nth(1).click()
    second = nb.kernel_eval("[cm.confused[1]['true'], cm.confused[1]['pred']]")
    wait_until(lambda: nb.kernel_eval("cm.selected"), lambda v: v == second)
    view.locator('.nbviz-cm-table th[data-key="f1"]').click()
    f1s = view.locator(".nbviz-cm-table tbody td:nth-child(4)").all_text_contents()
    assert [float(v) for v in f1s] == sorted((float(v) for v in f1s), reverse=True)
    view.locator(".nbviz-cm-normalize").select_option("row")
    wait_until(lambda: nb.kernel_eval("cm.normalize"), lambda v: v == "'row'")

    # a change of step keeps the selection, and the ids follow
    nb.kernel_eval("setattr(cm, 'step', 21)")
    expect(view.locator(".nbviz-cm-step")).to_contain_text("evaluation of step 21")
    assert nb.kernel_eval("cm.selected") == second
    assert nb.kernel_eval("cm.gallery.step") == "21"
    nb.screenshot("confusion-matrix")
    assert nb.console_errors == []


def test_gallery_alone_pages_and_shows_html_names_as_text(nb, tmp_path: Path) -> None:
    nb.write(
        "gallery.ipynb",
        [
            "import numpy as np, nbviz\n"
            f"run = nbviz.Run({str(tmp_path / 'text')!r}, class_names=['<b>spam</b>', 'ham'])\n"
            "texts = [f'message {i} <i>not html</i>' for i in range(30)]\n"
            "labels = np.arange(30) % 2\n"
            "run.log_samples(texts, labels)\n"
            "logits = np.zeros((30, 2), np.float32)\n"
            "logits[np.arange(30), (np.arange(30) // 3) % 2] = 2\n"
            "run.log_predictions(5, logits, labels); run.flush()\n"
            "g = nbviz.SampleGallery(run, page_size=12, sort_by='loss')\n"
            "g",
        ],
    )
    nb.open("gallery.ipynb")
    nb.run_all()
    page = nb.page
    view = page.locator(".nbviz-gallery")
    cards = view.locator(".nbviz-gallery-card")
    expect(cards).to_have_count(12)
    expect(view.locator(".nbviz-gallery-page")).to_have_text("page 1 of 3")
    expect(cards.first.locator("pre.nbviz-gallery-text")).to_contain_text("<i>not html</i>")
    expect(view.locator("b")).to_have_count(0)  # class names and texts stay text
    expect(view.get_by_text("<b>spam</b>").first).to_be_visible()
    view.locator(".nbviz-gallery-next").click()
    wait_until(lambda: nb.kernel_eval("g.page"), lambda v: v == "1")
    expect(view.locator(".nbviz-gallery-page")).to_have_text("page 2 of 3")
    assert nb.console_errors == []
