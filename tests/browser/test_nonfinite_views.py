"""A run that hit NaN at step 7, in a real JupyterLab: every view draws the non-finite
state as such (its own red, with counts) and says so in words; never a norm of 0,
a dead unit, class 0 or an empty plot without a reason."""

from __future__ import annotations

import re
from pathlib import Path

from notebook_page import ARTIFACTS
from playwright.sync_api import expect

# the dead map's colour for a unit that saw NaN/inf (js/lib/nonfinite.js)
NONFINITE_RGB = [232, 17, 79]


def shot(view, name: str) -> Path:
    """Screenshot one view as tests/browser/_artifacts/<name>.png."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    view.screenshot(path=str(path))
    return path


# a red stderr box under a cell (e.g. a NaN that could not go out as JSON)
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'

PIXEL = """(canvas, [fx, fy]) => {
  const ctx = canvas.getContext("2d");
  const x = Math.floor(canvas.width * fx), y = Math.floor(canvas.height * fy);
  return Array.from(ctx.getImageData(x, y, 1, 1).data.slice(0, 3));
}"""


def test_a_nan_run_reads_as_nonfinite_in_every_view(nb, nan_run_path: Path) -> None:
    nb.run(
        "nan.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(nan_run_path)!r})\n"
            "lb = nbviz.LayerBrowser(run, selected_layer='act1'); lb",
            "cm = nbviz.ConfusionMatrix(run, step=10); cm",
            "pj = nbviz.EmbeddingProjector(run, step=10, method='umap'); pj",
            "h = nbviz.Histograms(run, signal='gradients', layer='fc2.weight'); h",
            "lc = nbviz.LossCurves(run); lc",
        ],
        ready=".nbviz-layer-browser .nbviz-lb-row",
    )
    page = nb.page
    page.set_viewport_size({"width": 1280, "height": 2600})  # each view whole on screenshots
    expect(page.locator(STDERR)).to_have_count(0)

    # LayerBrowser at step 14: every layer non-finite, counted, never a norm of 0
    lb = page.locator(".nbviz-layer-browser")
    expect(lb.locator(".nbviz-lb-nonfinite-note")).to_have_text(
        re.compile(r"non-finite values \(NaN/inf\) at this step in 5 of 5 layers")
    )
    fc2 = lb.locator('.nbviz-lb-row[data-layer="fc2"]')
    expect(fc2.locator(".nbviz-lb-value").nth(1)).to_have_text("non-finite (1,024)")  # not 0
    expect(fc2.locator(".nbviz-lb-value").nth(0)).to_have_text("non-finite (1,024)")
    # the detail charts mark where and say since when
    chart = lb.locator('.nbviz-lb-chartbox[data-signal="activation"][data-layer="act1"]').first
    expect(chart.locator(".nbviz-lb-chart-nonfinite")).to_contain_text(
        "non-finite values (NaN/inf) at 8 of 15 captures (from step 7; up to 1,024 in one)"
    )
    grad = lb.locator('.nbviz-lb-chartbox[data-signal="gradient"][data-layer="act1"]')
    expect(grad.locator(".nbviz-lb-chart-nonfinite")).to_contain_text("from step 7")
    # the histograms at the step: every value NaN, said under empty bars
    hist = lb.locator('.nbviz-lb-histbox[data-signal="activation"]')
    expect(hist.locator(".nbviz-lb-hist-nonfinite")).to_have_text(
        "1,024 non-finite (NaN/inf), not in the bars"
    )
    # the dead map: NaN cells in their own colour and a legend with the count, not "dead"
    dead = lb.locator("canvas.nbviz-lb-dead")
    expect(dead).to_have_attribute("data-nonfinite-cells", re.compile(r"^[1-9]"))
    expect(lb.locator(".nbviz-lb-dead-nonfinite")).to_contain_text(
        "non-finite (NaN/inf): 225 of 480 cells, from step 7; not dead"
    )
    assert dead.evaluate(PIXEL, [0.97, 0.5]) == NONFINITE_RGB  # the last capture's column
    assert dead.evaluate(PIXEL, [0.02, 0.5]) != NONFINITE_RGB  # the first one's: finite
    shot(lb, "nan-layer-browser")

    # ConfusionMatrix at step 10: no "everything is class 0"
    cm = page.locator(".nbviz-confusion").first
    expect(cm.locator(".nbviz-cm-nonfinite")).to_have_text(
        "200 of 200 samples had non-finite logits (NaN or inf) at step 10: no predicted "
        "class, so they are not in the matrix or the scores."
    )
    expect(cm.locator(".nbviz-cm-scores")).to_contain_text("over the 0 samples with finite logits")
    expect(cm.locator(".nbviz-cm-scores")).not_to_contain_text("accuracy 0.")
    shot(cm, "nan-confusion")

    # EmbeddingProjector at step 10: the words, no stuck bar or stop button
    pj = page.locator(".nbviz-projector")
    expect(pj.locator(".nbviz-pj-message")).to_have_text(
        re.compile(
            r"^All 200 embeddings at step 10 are non-finite \(NaN or inf\): nothing to project"
        )
    )
    expect(pj.locator(".nbviz-pj-stop")).to_be_hidden()
    expect(pj.locator(".nbviz-projector-status")).to_be_hidden()
    assert nb.kernel_eval("pj.progress") == "1.0"
    shot(pj, "nan-projector")

    # Histograms and LossCurves: NaN marked and said, not dropped
    h = page.locator(".nbviz-histograms")
    expect(h.locator(".nbviz-hist-nonfinite-note")).to_contain_text(
        re.compile(r"non-finite values \(NaN/inf\) at \d+ of \d+ histograms \(from step 7")
    )
    expect(h.locator(".nbviz-hist-current .nbviz-hist-nonfinite")).to_have_text("1024 NaN/Inf")
    shot(h, "nan-histograms")
    lc = page.locator('.nbviz-lc-panel[data-stem="loss"]')
    expect(lc.locator(".nbviz-lc-breaks")).to_contain_text("train_loss is NaN from step 7")
    # an evaluation whose every logit is NaN has no accuracy (not that of "all class 0")
    breaks = page.locator(".nbviz-loss-curves .nbviz-lc-breaks")
    expect(breaks.filter(has_text="val_accuracy is NaN from step 10")).to_have_count(1)
    shot(page.locator(".nbviz-loss-curves"), "nan-loss-curves")

    # at step 7 only one unit of act1 was NaN: the value is over the finite ones, with the count
    nb.run_code("lb.step = 7")
    act1 = lb.locator('.nbviz-lb-row[data-layer="act1"]')
    expect(act1.locator(".nbviz-lb-value").nth(0)).to_have_text(re.compile(r"^\d+\.\d%$"))
    expect(act1.locator(".nbviz-lb-nonfinite").nth(0)).to_have_text("\u26a0 32 non-finite")

    # moving to a step before the NaN: the words go away, the finite values come back
    nb.run_code("lb.step = 5; cm.step = 5; pj.step = 5")
    expect(lb.locator(".nbviz-lb-nonfinite-note")).to_be_hidden()
    expect(fc2.locator(".nbviz-lb-value").nth(1)).to_have_text(re.compile(r"^\d"))
    expect(cm.locator(".nbviz-cm-nonfinite")).to_have_count(0)
    expect(cm.locator(".nbviz-cm-scores")).to_contain_text("200 samples")
    expect(pj).to_have_attribute("data-drawn", "200", timeout=60_000)
    expect(pj.locator(".nbviz-pj-message")).to_be_empty()


def test_the_dashboard_of_a_nan_run_says_so_in_each_view(nb, nan_run_path: Path) -> None:
    nb.run(
        "nan-dash.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(nan_run_path)!r})\n"
            "dash = nbviz.Dashboard(run); dash",
        ],
        ready=".nbviz-dash-tab",
    )
    page = nb.page
    page.set_viewport_size({"width": 1280, "height": 3200})
    expect(page.locator(STDERR)).to_have_count(0)
    expect(page.locator(".nbviz-scrub-step")).to_contain_text("step 14")
    page.locator('.nbviz-dash-tab[data-key="predictions"]').click()
    expect(page.locator(".nbviz-cm-nonfinite").first).to_contain_text("200 of 200 samples")
    expect(page.locator(".nbviz-pj-message").first).to_contain_text("All 200 embeddings")
    shot(page.locator(".jp-Notebook"), "nan-dashboard-predictions")
    page.locator('.nbviz-dash-tab[data-key="layers"]').click()
    page.locator(".nbviz-layer-browser .nbviz-lb-row").first.wait_for(timeout=60_000)
    expect(page.locator(".nbviz-lb-nonfinite-note")).to_contain_text("in 5 of 5 layers")
    expect(page.locator(".nbviz-hist-nonfinite-note").first).to_be_visible()
    shot(page.locator(".jp-Notebook"), "nan-dashboard")
    # the first step: nothing non-finite yet, and no view says otherwise
    page.locator(".nbviz-scrub-first").click()
    nb.wait_kernel("dash.layers.step", "0")
    expect(page.locator(".nbviz-lb-nonfinite-note")).to_be_hidden()
