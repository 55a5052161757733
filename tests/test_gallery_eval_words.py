"""The gallery's toolbar names what the evaluation in view recorded: a classifier's
predictions, or the per-sample losses of a model evaluated with ``loss_fn=...``."""

from __future__ import annotations

from pathlib import Path

from training import record_autoencoder

import nbviz
from nbviz.widgets.gallery import SampleGallery


def test_an_evaluation_of_losses_alone_is_called_losses(tmp_path: Path) -> None:
    with nbviz.open_run(record_autoencoder(tmp_path / "ae")) as run:
        gallery = SampleGallery(run, live=False)
        assert run.predicts_classes("val") is False
        assert (gallery.eval_step, gallery.eval_what) == (59, "losses")
        gallery.step = 10  # before the first evaluation: nothing in view
        assert (gallery.eval_step, gallery.eval_what) == (-1, "evaluation")
        gallery.close()


def test_a_classifiers_evaluation_is_called_predictions(demo_run) -> None:
    gallery = SampleGallery(demo_run, live=False)
    assert gallery.eval_step >= 0 and gallery.eval_what == "predictions"
    gallery.close()
