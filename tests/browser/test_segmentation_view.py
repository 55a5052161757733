"""A segmentation model in a real JupyterLab: evaluated with no loss_fn, its samples
open by loss with each input beside its label map and the model's, and the Dashboard
says in a line why the class views are out. The console stays clean."""

from __future__ import annotations

from pathlib import Path

from notebook_page import ARTIFACTS
from playwright.sync_api import expect
from training import record_segmentation

IMAGES_DECODED = "els => els.length > 0 && els.every(i => i.complete && i.naturalWidth > 0)"


def test_a_segmentation_run_shows_pixel_maps_by_loss(nb, tmp_path: Path) -> None:
    run_dir = record_segmentation(tmp_path / "seg")
    nb.run(
        "segmentation.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(run_dir)!r})\n"
            "dash = nbviz.Dashboard(run)\n"
            "dash",
        ],
        ready=".nbviz-dashboard",
    )
    dash = nb.page.locator(".nbviz-dashboard")
    notes = dash.locator(".nbviz-dashboard-notes")
    expect(notes).to_contain_text("a class per position")
    expect(notes).to_contain_text("predictions but no embeddings")
    expect(dash.locator(".nbviz-loss-curves")).to_contain_text("val_loss")
    dash.locator('.nbviz-dash-tab[data-key="predictions"]').click()
    gallery = dash.locator(".nbviz-gallery").first
    cards = gallery.locator(".nbviz-gallery-card")
    expect(cards).to_have_count(24)
    first = cards.first
    for panel in ("input", "target", "output"):
        expect(first.locator(f"[data-panel={panel}] img")).to_have_count(1)
    assert gallery.locator("[data-panel] img").evaluate_all(IMAGES_DECODED)
    texts = gallery.locator(".nbviz-gallery-loss").all_text_contents()
    losses = [float(t.removeprefix("loss ")) for t in texts]
    assert losses == sorted(losses, reverse=True)
    top = float(nb.kernel_eval("float(run.predictions(59)['loss'].max())"))
    assert abs(losses[0] - top) < 1e-3 * max(1.0, top)
    gallery.screenshot(path=str(ARTIFACTS / "segmentation-gallery.png"))
