"""The classification views in a real JupyterLab: a click on a confusion cell reaches the
kernel, and the cell's samples appear as thumbnails in the embedded gallery."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect


def test_confusion_cell_click_selects_and_shows_thumbnails(nb, demo_run_path: Path) -> None:
    view = nb.run(
        "confusion.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "cm = nbviz.ConfusionMatrix(run)\n"
            "pair = cm.confused[0]; t, p = pair['true'], pair['pred']\n"
            "cm",
        ],
        ready=".nbviz-confusion",
    )
    page = nb.page
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
    nb.wait_kernel("cm.selected", f"[{t}, {p}]")
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
    # a click on a sample opens its detail: the sample, its top classes, and how to
    # record its activations (the demo records none)
    view.locator(".nbviz-gallery-card").first.click()
    nb.wait_kernel("cm.gallery.detail_id", first_id)
    detail = view.locator(".nbviz-gallery-detail")
    expect(detail).to_have_attribute("data-id", first_id)
    expect(detail.locator("img.nbviz-gallery-big")).to_have_count(1)
    expect(detail.locator(".nbviz-gallery-topk tr")).to_have_count(5)
    expect(detail.locator(".nbviz-gallery-acts-note")).to_contain_text("run.capture(model, sample")

    # a most-confused pair selects its cell; the table sorts
    view.locator(".nbviz-cm-confused button").nth(1).click()
    second = nb.kernel_eval("[cm.confused[1]['true'], cm.confused[1]['pred']]")
    nb.wait_kernel("cm.selected", second)
    view.locator('.nbviz-cm-table th[data-key="f1"]').click()
    f1s = view.locator(".nbviz-cm-table tbody td:nth-child(4)").all_text_contents()
    assert [float(v) for v in f1s] == sorted((float(v) for v in f1s), reverse=True)
    view.locator(".nbviz-cm-normalize").select_option("row")
    nb.wait_kernel("cm.normalize", "'row'")

    # a change of step keeps the selection, and the ids follow
    nb.kernel_eval("setattr(cm, 'step', 21)")
    expect(view.locator(".nbviz-cm-step")).to_contain_text("evaluation of step 21")
    assert nb.kernel_eval("cm.selected") == second
    assert nb.kernel_eval("cm.gallery.step") == "21"
    nb.screenshot("confusion-matrix")


def test_gallery_alone_pages_and_shows_html_names_as_text(nb, tmp_path: Path) -> None:
    view = nb.run(
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
        ready=".nbviz-gallery",
    )
    cards = view.locator(".nbviz-gallery-card")
    expect(cards).to_have_count(12)
    expect(view.locator(".nbviz-gallery-page")).to_have_text("page 1 of 3")
    expect(cards.first.locator("pre.nbviz-gallery-text")).to_contain_text("<i>not html</i>")
    expect(view.locator("b")).to_have_count(0)  # class names and texts stay text
    expect(view.get_by_text("<b>spam</b>").first).to_be_visible()
    view.locator(".nbviz-gallery-next").click()
    nb.wait_kernel("g.page", "1")
    expect(view.locator(".nbviz-gallery-page")).to_have_text("page 2 of 3")


# A small digits run built in the notebook's kernel: evaluated before and after one
# epoch (so two steps compare), per-unit summaries of the second conv block, a class
# name that is HTML, and the activations of the samples of the most-confused cell.
TRAIN = """import numpy as np, torch, nbviz
from torch import nn
from nbviz.demo import digits_cnn, load_digits
torch.manual_seed(0)
data = load_digits()
names = ['<img src=x onerror=alert(1)>'] + [str(i) for i in range(1, 10)]
model = digits_cnn()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
xt, yt = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
xv, yv = torch.from_numpy(data.x_val), torch.from_numpy(data.y_val)
loader = [(xv[i:i + 128], yv[i:i + 128]) for i in range(0, len(yv), 128)]
run = nbviz.Run(RUN_DIR, class_names=names)
run.watch(model, every=10)
run.evaluate(0, model, loader, units_layer='3')
for step, idx in enumerate(torch.randperm(len(yt)).split(64), start=1):
    opt.zero_grad(); nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward(); opt.step()
    run.log(step, train_loss=0.0)
run.evaluate(step, model, loader, units_layer='3')
"""


def test_sample_click_opens_its_detail_and_flips_list_their_samples(nb, tmp_path: Path) -> None:
    dialogs: list[str] = []
    nb.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    view = nb.run(
        "detail.ipynb",
        [
            f"RUN_DIR = {str(tmp_path / 'digits')!r}\n" + TRAIN,
            "cm = nbviz.ConfusionMatrix(run)\n"
            "pair = cm.confused[0]; t, p = pair['true'], pair['pred']\n"
            "cell = cm.select(t, p); cm.selected = []\n"
            "for i in cell[:3]: run.capture(model, xv[i], id=i)\n"
            "cm",
        ],
        timeout_ms=180_000,
        ready=".nbviz-confusion",
    )
    page = nb.page
    canvas = view.locator("canvas.nbviz-cm-canvas")
    expect(canvas).to_have_count(1)
    # the class name with HTML in it is text on both axes and in the table
    expect(view.locator(".nbviz-cm-rowlabel").first).to_have_text("<img src=x onerror=alert(1)>")
    assert page.locator('img[src="x"]').count() == 0

    t, p = int(nb.kernel_eval("t")), int(nb.kernel_eval("p"))
    box = canvas.bounding_box()
    assert box is not None
    cell = box["width"] / 10
    canvas.click(position={"x": (p + 0.5) * cell, "y": (t + 0.5) * cell})
    nb.wait_kernel("cm.selected", f"[{t}, {p}]")
    n = int(nb.kernel_eval("len(cm.selected_ids)"))
    cards = view.locator(".nbviz-gallery .nbviz-gallery-card")
    expect(cards).to_have_count(min(n, 24))

    # a click on the first card (a captured sample) opens its detail
    first = nb.kernel_eval("cm.selected_ids[0]")
    cards.first.click()
    nb.wait_kernel("cm.gallery.detail_id", first)
    detail = view.locator(".nbviz-gallery-detail")
    expect(detail).to_be_visible()
    expect(detail).to_have_attribute("data-id", first)
    expect(detail.locator("img.nbviz-gallery-big")).to_have_count(1)
    expect(detail.locator(".nbviz-gallery-topk tr")).to_have_count(5)
    top = nb.kernel_eval("cm.gallery.detail['top_k'][0]['class']")
    expect(detail.locator(".nbviz-gallery-topk tr").first).to_have_attribute("data-class", top)
    layers = int(nb.kernel_eval("len(cm.gallery.detail['activations']['layers'])"))
    expect(detail.locator(".nbviz-gallery-layer[data-layer]")).to_have_count(layers)
    # feature maps channel by channel: 16 + 16 + 32 + 32 + 32 for the digits CNN's conv part
    expect(detail.locator("canvas.nbviz-gallery-map")).to_have_count(128)
    expect(detail).to_contain_text("units of 3")
    assert page.evaluate(
        "() => [...document.querySelectorAll('img.nbviz-gallery-big')]"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    nb.screenshot("sample-detail")
    detail.locator(".nbviz-gallery-detail-close").click()
    nb.wait_kernel("cm.gallery.detail_id", "-1")
    expect(detail).to_be_hidden()

    # compare with the first evaluation: the flipped samples, one click away
    view.locator(".nbviz-cm-compare").select_option("0")
    nb.wait_kernel("cm.compare_step", "0")
    # the counts arrive with the comparison (the run may still be refreshing the view)
    nb.wait_kernel(
        "{k: v for k, v in cm.compare.items() if k != 'delta'}", lambda v: "'to_right'" in v
    )
    fixed = int(nb.kernel_eval("cm.compare['to_right']"))
    assert fixed > 0
    flip = view.locator('.nbviz-cm-flip[data-flip="to_right"]')
    expect(flip).to_contain_text(f"wrong \u2192 right: {fixed}")
    flip.click()
    nb.wait_kernel("cm.selected_flip", "'to_right'")
    assert nb.kernel_eval("cm.selected") == "[]"
    assert nb.kernel_eval("cm.selected_ids == cm.flipped_ids('to_right')") == "True"
    expect(cards).to_have_count(min(fixed, 24))
    expect(cards.first).to_have_attribute("data-id", nb.kernel_eval("cm.selected_ids[0]"))
    nb.screenshot("confusion-compare")
    assert dialogs == []


def test_layer_browser_lists_the_samples_that_excite_a_unit(nb, tmp_path: Path) -> None:
    view = nb.run(
        "units.ipynb",
        [
            f"RUN_DIR = {str(tmp_path / 'digits')!r}\n" + TRAIN,
            "for i in range(len(yv)): run.capture(model, xv[i], id=i, layers=['3'])\n"
            "lb = nbviz.LayerBrowser(run, selected_layer='3')\nlb",
        ],
        timeout_ms=180_000,
        ready=".nbviz-layer-browser",
    )
    bars = view.locator("canvas.nbviz-lb-unit-bars")
    expect(bars).to_have_count(1)
    expect(view.locator(".nbviz-lb-units")).to_contain_text("choose a unit")
    box = bars.bounding_box()
    assert box is not None
    # 32 units over the bars' width (2 px padding each side): click the middle of unit 5
    x = 2 + (5.5 / 32) * (box["width"] - 4)
    bars.click(position={"x": x, "y": box["height"] / 2})
    nb.wait_kernel("lb.unit", "5")
    most = view.locator('.nbviz-lb-unit-row[data-which="most"] .nbviz-lb-unit-card')
    expect(most).to_have_count(8)
    expected = nb.kernel_eval("[s['id'] for s in lb.unit_samples['most']]")
    got = [most.nth(i).get_attribute("data-id") for i in range(8)]
    assert "[" + ", ".join(got) + "]" == expected
    expect(
        view.locator('.nbviz-lb-unit-row[data-which="least"] .nbviz-lb-unit-card')
    ).to_have_count(8)
    assert nb.page.evaluate(
        "() => [...document.querySelectorAll('.nbviz-lb-unit-card img')]"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    # typing a unit number does the same
    view.locator(".nbviz-lb-unit-input").fill("7")
    view.locator(".nbviz-lb-unit-input").press("Enter")
    nb.wait_kernel("lb.unit", "7")
    # the list follows: wait for unit 7's own samples before clicking one
    first = nb.kernel_eval("lb.unit_samples['most'][0]['id']")
    expect(most.first).to_have_attribute("data-id", first)
    # a click on one of the samples shows its feature maps of the layer, the unit's marked
    most.first.click()
    nb.wait_kernel("lb.map_id", first)
    maps = view.locator(f'.nbviz-lb-sample-maps[data-id="{first}"] canvas.nbviz-lb-map')
    expect(maps).to_have_count(32)
    expect(view.locator("canvas.nbviz-lb-map.nbviz-active")).to_have_attribute("data-channel", "7")
    nb.screenshot("unit-top-samples")
