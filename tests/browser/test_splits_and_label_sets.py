"""The ConfusionMatrix in a real browser on runs the "val" split does not describe: a
run evaluated on "test" and "train" switches splits from the view's menu (in
JupyterLab and in the offline report), and a label space of 20,000 classes is
shown as ranked pairs and classes whose rows open onto their samples."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from notebook_page import ARTIFACTS, screenshot
from playwright.sync_api import expect
from test_report_offline import Offline

# a run evaluated only on "test" (40 samples) and "train" (60), at steps 5 and 10,
# with 8x8 images so that the gallery has thumbnails
TWO_SPLITS = """import numpy as np, nbviz
rng = np.random.default_rng(0)
run = nbviz.Run(RUN_DIR, class_names=['cat', 'dog', '<b>bird</b>', 'fish'])
for split, n in (('test', 40), ('train', 60)):
    labels = rng.integers(0, 4, n)
    run.log_samples(rng.random((n, 8, 8)).astype(np.float32), labels, split=split)
    for step in (5, 10):
        logits = rng.normal(size=(n, 4)).astype(np.float32)
        logits[np.arange(n), labels] += step / 5
        run.log_predictions(step, logits, labels, split=split)
run.flush()
"""

# 3,000 samples over a label space of 20,000 classes with no names: class 17 is
# often read as 42, the rest are right half the time
LARGE = """import numpy as np, nbviz
rng = np.random.default_rng(1)
n, k = 3000, 20_000
labels = rng.integers(0, k, n); labels[:60] = 17; labels[-1] = k - 1
preds = np.where(rng.random(n) < 0.5, labels, rng.integers(0, k, n)); preds[:40] = 42
run = nbviz.Run(RUN_DIR)
run.log_samples(rng.random((n, 8, 8)).astype(np.float32), labels)
run.log_predictions(3, preds, labels)
run.flush()
"""


def test_the_split_menu_switches_the_matrix_and_its_samples(nb, tmp_path: Path) -> None:
    view = nb.run(
        "splits.ipynb",
        [
            f"RUN_DIR = {str(tmp_path / 'two')!r}\n" + TWO_SPLITS,
            "cm = nbviz.ConfusionMatrix(run)\ncm",
        ],
        ready=".nbviz-confusion",
    )
    menu = view.locator("select.nbviz-split").first  # the gallery below has its own, hidden
    expect(menu).to_be_visible()
    expect(menu).to_have_value("test")
    expect(menu.locator("option")).to_have_text(["test", "train"])
    expect(view.locator(".nbviz-cm-scores")).to_contain_text("40 samples")

    menu.select_option("train")
    nb.wait_kernel("cm.split", "'train'")
    expect(view.locator(".nbviz-cm-scores")).to_contain_text("60 samples")
    expect(view.locator(".nbviz-cm-step")).to_contain_text("evaluation of step 10")

    # a click on a cell of the train matrix shows train samples
    canvas = view.locator("canvas.nbviz-cm-canvas")
    box = canvas.bounding_box()
    assert box is not None
    cell = box["width"] / 4
    canvas.click(position={"x": 1.5 * cell, "y": 1.5 * cell})
    nb.wait_kernel("cm.selected", "[1, 1]")
    n = int(nb.kernel_eval("len(cm.selected_ids)"))
    assert n > 0 and nb.kernel_eval("cm.gallery.split") == "'train'"
    cards = view.locator(".nbviz-gallery-card")
    expect(cards).to_have_count(min(n, 24))
    expect(cards.first).to_have_attribute("data-id", nb.kernel_eval("cm.selected_ids[0]"))
    assert nb.page.evaluate(
        "() => [...document.querySelectorAll('.nbviz-confusion img.nbviz-gallery-thumb')]"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    # the class name with HTML in it stays text
    expect(view.locator("b", has_text="bird")).to_have_count(0)
    expect(view.locator(".nbviz-cm-rowlabel").nth(2)).to_have_text("<b>bird</b>")
    nb.screenshot("confusion-split-menu")
    view.first.screenshot(path=str(ARTIFACTS / "confusion-split-menu-view.png"))

    # back to test: the selection stays, its samples are test samples
    menu.select_option("test")
    nb.wait_kernel("cm.split", "'test'")
    expect(view.locator(".nbviz-cm-scores")).to_contain_text("40 samples")
    assert nb.kernel_eval("cm.selected") == "[1, 1]"
    m = int(nb.kernel_eval("len(cm.selected_ids)"))
    expect(cards).to_have_count(min(m, 24))


def test_a_large_label_set_lists_pairs_whose_rows_open_their_samples(nb, tmp_path: Path) -> None:
    view = nb.run(
        "large.ipynb",
        [f"RUN_DIR = {str(tmp_path / 'large')!r}\n" + LARGE, "cm = nbviz.ConfusionMatrix(run)\ncm"],
        ready=".nbviz-confusion",
    )
    expect(view.locator(".nbviz-cm-pairs")).to_be_visible()
    assert nb.kernel_eval("cm.mode") == "'pairs'"
    expect(view.locator("canvas.nbviz-cm-canvas")).to_be_hidden()
    expect(view.locator(".nbviz-cm-normalize")).to_be_hidden()
    expect(view.locator(".nbviz-cm-caption")).to_contain_text(
        re.compile(r"[\d,]+ classes occur: too many for a matrix")
    )
    pairs = view.locator(".nbviz-cm-pairs tbody tr")
    expect(pairs).to_have_count(50)
    expect(pairs.first).to_have_attribute("data-true", "17")
    expect(pairs.first).to_have_attribute("data-pred", "42")
    expect(pairs.first.locator("td").nth(2)).to_have_text("40")
    classes = view.locator(".nbviz-cm-class-errors tbody tr")
    expect(classes).to_have_count(50)
    expect(classes.first).to_have_attribute("data-class", "17")

    # a pair opens its samples in the gallery, as a cell of the matrix does
    pairs.first.click()
    nb.wait_kernel("cm.selected", "[17, 42]")
    assert nb.kernel_eval("len(cm.selected_ids)") == "40"
    cards = view.locator(".nbviz-gallery-card")
    expect(cards).to_have_count(24)
    expect(cards.first).to_have_attribute("data-id", nb.kernel_eval("cm.selected_ids[0]"))
    expect(view.locator(".nbviz-gallery-page")).to_have_text("page 1 of 2")
    # classes logged without logits have no confidence or loss: the card says so
    expect(cards.first.locator(".nbviz-gallery-num")).to_have_text("conf - \u00b7 loss -")
    expect(pairs.first).to_have_class(re.compile("nbviz-active"))
    nb.screenshot("confusion-large-label-set")
    view.first.screenshot(path=str(ARTIFACTS / "confusion-large-label-set-view.png"))

    # a class opens its errors, whatever they were predicted as
    classes.nth(1).click()
    chosen = int(classes.nth(1).get_attribute("data-class") or -2)
    nb.wait_kernel("cm.selected", f"[{chosen}, -1]")
    frame = "run.predictions(3)"
    wrong = f"(({frame}.label == {chosen}) & ({frame}.pred != {chosen})).sum()"
    errors = int(nb.kernel_eval(f"int({wrong})"))
    assert int(nb.kernel_eval("len(cm.selected_ids)")) == errors > 0
    expect(cards).to_have_count(min(errors, 24))

    # sorting the pairs by true class is done in the view
    view.locator('.nbviz-cm-pairs th[data-key="true_name"]').click()
    first_true = pairs.first.get_attribute("data-true")
    trues = [int(pairs.nth(i).get_attribute("data-true") or 0) for i in range(50)]
    assert trues == sorted(trues) and int(first_true or 0) == trues[0]


@pytest.fixture
def offline(new_page: Callable[..., Any]) -> Offline:
    return Offline(new_page(offline=True))


def test_the_offline_report_switches_splits(offline: Offline, tmp_path: Path) -> None:
    import nbviz
    from nbviz.report import write_report

    namespace: dict[str, Any] = {"RUN_DIR": str(tmp_path / "two")}
    exec(TWO_SPLITS, namespace)  # the same run as in the notebook above
    run: nbviz.Run = namespace["run"]
    info = write_report(run, tmp_path / "report.html")
    train = run.predictions(10, "train")
    n22 = int(((train.label == 2) & (train.pred == 2)).sum())
    run.close()
    page = offline.open(Path(info.path))
    page.locator('.nbviz-dash-tab[data-key="predictions"]').click()
    view = page.locator(".nbviz-confusion")
    menu = view.locator("select.nbviz-split").first  # the gallery below has its own, hidden
    expect(menu).to_have_value("test")
    expect(view.locator(".nbviz-cm-scores")).to_contain_text("40 samples")
    menu.select_option("train")
    expect(view.locator(".nbviz-cm-scores")).to_contain_text("60 samples")
    canvas = view.locator("canvas.nbviz-cm-canvas")
    box = canvas.bounding_box()
    assert box is not None
    cell = box["width"] / 4
    canvas.click(position={"x": 2.5 * cell, "y": 2.5 * cell})
    cards = view.locator(".nbviz-gallery-card")
    assert n22 > 0
    expect(cards).to_have_count(min(n22, 24))
    assert page.locator("#nbviz-report-status").is_hidden(), page.locator(
        "#nbviz-report-status"
    ).text_content()
    assert offline.outside == []
    screenshot(page, "report-split-menu")
