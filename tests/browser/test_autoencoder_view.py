"""A model that is not a classifier in a real JupyterLab: a convolutional autoencoder's
run through the Dashboard, its losses, its reconstructions beside their inputs in the
gallery, and the projector coloured by loss. The console stays clean (the fixture fails
the test on an error)."""

from __future__ import annotations

import re
from pathlib import Path

from notebook_page import ARTIFACTS
from playwright.sync_api import expect
from training import record_autoencoder

IMAGES_DECODED = "els => els.length > 0 && els.every(i => i.complete && i.naturalWidth > 0)"


def test_an_autoencoder_in_the_dashboard_shows_losses_reconstructions_and_projector(
    nb, tmp_path: Path
) -> None:
    run_dir = record_autoencoder(tmp_path / "ae")
    nb.run(
        "autoencoder.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(run_dir)!r})\n"
            "dash = nbviz.Dashboard(run)\n"
            "dash",
        ],
        ready=".nbviz-dashboard",
    )
    page = nb.page
    # tall enough for the whole Predictions tab: each view is screenshot whole, not
    # under the header that sticks while a shorter window scrolls
    page.set_viewport_size({"width": 1280, "height": 2400})
    dash = page.locator(".nbviz-dashboard")
    # the views of classes are out, and the Dashboard says why in one line
    expect(dash.locator(".nbviz-confusion")).to_have_count(0)
    expect(dash.locator(".nbviz-dashboard-notes")).to_contain_text(
        "Not shown: ConfusionMatrix: the predictions have no classes"
    )
    # the losses: the training loss and the evaluations' val_loss
    expect(dash.locator(".nbviz-loss-curves")).to_contain_text("val_loss")
    # the samples by loss and the projector share the Predictions tab
    dash.locator('.nbviz-dash-tab[data-key="predictions"]').click()

    # the gallery: highest loss first, each reconstruction beside its input
    gallery = dash.locator(".nbviz-gallery").first
    cards = gallery.locator(".nbviz-gallery-card")
    expect(cards).to_have_count(24)
    expect(gallery.locator(".nbviz-gallery-sort")).to_have_value("loss")
    hidden = gallery.locator(".nbviz-gallery-sort option[value=confidence]")
    assert hidden.evaluate("o => o.hidden") is True
    first = cards.first
    expect(first.locator("[data-panel=input] img")).to_have_count(1)
    expect(first.locator("[data-panel=output] img")).to_have_count(1)
    assert gallery.locator("[data-panel] img").evaluate_all(IMAGES_DECODED)
    texts = gallery.locator(".nbviz-gallery-loss").all_text_contents()
    losses = [float(t.removeprefix("loss ")) for t in texts]
    assert len(losses) == 24 and losses == sorted(losses, reverse=True)
    top = nb.kernel_eval("float(run.predictions(59)['loss'].max())")
    assert losses[0] == float(f"{float(top):.4g}") or abs(losses[0] - float(top)) < 1e-3
    assert first.get_attribute("data-id") == nb.kernel_eval(
        "int(run.predictions(59).sort_values('loss', ascending=False).id.iloc[0])"
    )
    # a card opens its detail: input and reconstruction at full size, no class table
    first.click()
    detail = gallery.locator(".nbviz-gallery-detail")
    expect(detail.locator("[data-panel=output] img.nbviz-gallery-big")).to_have_count(1)
    expect(detail.locator("[data-panel=input] img.nbviz-gallery-big")).to_have_count(1)
    expect(detail.locator(".nbviz-gallery-topk-box")).to_have_count(0)
    expect(detail).to_contain_text(re.compile(r"loss\s*0\.\d+"))
    gallery.screenshot(path=str(ARTIFACTS / "autoencoder-gallery.png"))

    # the projector: the 16-d codes, coloured by loss, no class colourings offered
    pj = dash.locator(".nbviz-projector")
    expect(pj).to_have_attribute("data-drawn", "449", timeout=60_000)
    expect(pj.locator(".nbviz-pj-color")).to_have_value("loss")
    for mode in ("label", "prediction", "correct", "confidence"):
        option = pj.locator(f".nbviz-pj-color option[value={mode}]")
        assert option.evaluate("o => o.hidden") is True, mode
    expect(pj.locator(".nbviz-projector-legend")).to_contain_text("loss 0")
    expect(pj.locator(".nbviz-projector-legend")).to_contain_text(re.compile(r"loss 0\.\d+\+"))
    pj.scroll_into_view_if_needed()
    pj.locator(".nbviz-pj-mode-box").click()
    stage = pj.locator(".nbviz-projector-stage")
    box = stage.bounding_box()
    assert box is not None and box["width"] > 200
    page.mouse.move(box["x"] + 2, box["y"] + 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=4)
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] - 2, steps=4)
    page.mouse.up()
    # a box over the whole stage takes every point: none is drawn outside it
    nb.wait_kernel("len(dash.projector.selected_ids)", "449", timeout=60)
    chosen = pj.locator(".nbviz-pj-gallery .nbviz-gallery-card")
    expect(chosen.first.locator("[data-panel=output] img")).to_have_count(1)
    pj.screenshot(path=str(ARTIFACTS / "autoencoder-projector.png"))
    nb.screenshot("autoencoder-dashboard")
    dash.locator('.nbviz-dash-tab[data-key="overview"]').click()
    expect(dash.locator(".nbviz-loss-curves .nbviz-lc-canvas").first).to_be_visible()
    nb.screenshot("autoencoder-dashboard-overview")


def test_embeddings_logged_without_predictions_are_in_the_dashboards_projector(
    nb, tmp_path: Path
) -> None:
    run_dir = tmp_path / "emb"
    nb.run(
        "embeddings.ipynb",
        [
            "import nbviz\n"
            "from nbviz.demo import load_digits\n"
            "data = load_digits()\n"
            f"run = nbviz.Run({str(run_dir)!r}, class_names=[str(d) for d in range(10)])\n"
            "run.log_samples(data.x_val, data.y_val)\n"
            "run.log_embeddings(0, data.x_val.reshape(len(data.x_val), -1))\n"
            "run.flush()\n"
            "dash = nbviz.Dashboard(run)\n"
            "dash",
        ],
        ready=".nbviz-dashboard",
    )
    pj = nb.page.locator(".nbviz-dashboard .nbviz-projector")
    expect(pj).to_have_attribute("data-drawn", "449", timeout=60_000)
    expect(pj.locator(".nbviz-pj-color")).to_have_value("label")
    expect(pj.locator(".nbviz-projector-legend > span")).to_have_count(10)
    # no predictions: nothing to colour by prediction, confidence or loss
    for mode in ("prediction", "correct", "confidence"):
        option = pj.locator(f".nbviz-pj-color option[value={mode}]")
        assert option.evaluate("o => o.hidden") is True, mode
    pj.scroll_into_view_if_needed()
    pj.screenshot(path=str(ARTIFACTS / "embeddings-without-predictions.png"))
