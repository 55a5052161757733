"""The Dashboard of a run recorded by NbvizCallback in transformers.Trainer, in a real browser."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the Trainer test's model and data

import test_integration_transformers as hf  # noqa: E402


@pytest.fixture(scope="module")
def trainer_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT trained by transformers.Trainer (accumulation 2), recorded by the callback."""
    return hf.train_tiny_bert(tmp_path_factory.mktemp("hf"))["tmp"] / "run"


def test_dashboard_of_a_trainer_run_shows_layers_losses_and_the_confusion_matrix(
    nb, trainer_run: Path
) -> None:
    nb.run(
        "trainer.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(trainer_run)!r})\n"
            "dash = nbviz.Dashboard(run)\n"
            "dash"
        ],
    )
    page = nb.page
    losses = page.locator('.nbviz-lc-panel[data-stem="loss"]')
    expect(losses.locator("canvas")).to_have_count(1)
    expect(losses.locator(".nbviz-lc-readout")).to_have_text(re.compile(r"^step 24: "))
    losses.scroll_into_view_if_needed()
    nb.screenshot("trainer-dashboard-losses")
    page.locator('.nbviz-dash-tab[data-key="layers"]').click()
    layers = page.locator(".nbviz-layer-browser")
    expect(layers.locator(".nbviz-lb-row", has_text="classifier").first).to_be_visible()
    nb.screenshot("trainer-dashboard-layers")
    page.locator('.nbviz-dash-tab[data-key="predictions"]').click()
    confusion = page.locator(".nbviz-confusion")
    expect(confusion.locator("canvas.nbviz-cm-canvas")).to_have_count(1)
    expect(confusion.locator(".nbviz-cm-rowlabel")).to_have_text(["negative", "positive"])
    expect(confusion.locator(".nbviz-cm-step")).to_contain_text("evaluation of step 24")
    confusion.scroll_into_view_if_needed()
    nb.screenshot("trainer-dashboard-confusion")
    assert nb.kernel_eval("sorted(dash.views)") == (
        "['confusion', 'health', 'histograms', 'layers', 'loss_curves', 'projector']"
    )
