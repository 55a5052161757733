"""The views of a model that is not a classifier: losses, reconstructions, targets.

Real runs: a convolutional autoencoder trained on the digits and evaluated with a
per-sample MSE (``training.record_autoencoder``), a regression MLP, a per-pixel
model. The gallery sorts by loss and puts each reconstruction beside its input,
the projector colours by loss and target value and offers no classes, and the
Dashboard leaves the views of classes out, saying why.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn
from training import record_autoencoder

import nbviz
from nbviz.demo import load_digits
from nbviz.widgets.dashboard import Dashboard
from nbviz.widgets.gallery import SampleGallery
from nbviz.widgets.projector import EmbeddingProjector
from nbviz.widgets.wire import array_from_payload


@pytest.fixture(scope="module")
def autoencoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_autoencoder(tmp_path_factory.mktemp("ae") / "run")


@pytest.fixture(scope="module")
def regression(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLP predicting each digit image's mean brightness, evaluated once."""
    data = load_digits()
    x = torch.from_numpy(data.x_val).reshape(-1, 64)
    y = x.mean(dim=1, keepdim=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 1))
    path = tmp_path_factory.mktemp("reg") / "run"
    with nbviz.Run(path) as run:
        run.evaluate(5, model, [(x, y)], loss_fn=nn.MSELoss(reduction="none"))
    return path


def _png(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)))


def test_the_gallery_sorts_an_autoencoder_by_loss_with_each_reconstruction_beside_its_input(
    autoencoder: Path,
) -> None:
    run = nbviz.open_run(autoencoder)
    gallery = SampleGallery(run, sort_by="loss", live=False)
    frame = run.predictions(59).set_index("id")
    losses = frame["loss"].reindex(gallery.ordered_ids()).to_numpy()
    assert np.all(np.diff(losses) <= 0) and len(losses) == 449
    assert gallery.sort_choices == ["given", "loss"]  # no confidence without classes
    card = gallery.items[0]
    assert card["kind"] == "image" and card["evaluated"] and "pred" not in card
    assert card["loss"] == pytest.approx(losses[0])
    [panel] = card["outputs"]  # an autoencoder's target is its input: not shown twice
    assert panel["name"] == "output" and panel["kind"] == "image"
    kept = run.outputs(59)
    k = int(np.nonzero(kept.ids == card["id"])[0][0])
    target, output = kept.targets[k, 0], kept.outputs[k, 0]
    lo, hi = target.min(), target.max()  # the input's grey scale
    expected = np.clip(np.rint((output - lo) * 255 / (hi - lo)), 0, 255)
    shown = _png(panel["png"])
    assert shown.shape == (8, 8)
    np.testing.assert_allclose(shown, expected, atol=1)
    detail = gallery.show(card["id"])
    assert detail["outputs"][0]["name"] == "output" and detail["top_k"] == []
    assert detail["loss"] == pytest.approx(losses[0]) and "pred" not in detail
    gallery.close()
    run.close()


def test_the_gallery_shows_a_regressions_target_beside_its_predicted_value(
    regression: Path,
) -> None:
    with nbviz.open_run(regression) as run:
        gallery = SampleGallery(run, ids=[3, 1], live=False)
        kept = run.outputs(5)
        for card in gallery.items:
            target, output = card["outputs"]
            assert (target["name"], output["name"]) == ("target", "output")
            assert target["kind"] == output["kind"] == "values" and target["size"] == 1
            i = card["id"]
            assert array_from_payload(target["values"])[0] == pytest.approx(kept.targets[i, 0])
            assert array_from_payload(output["values"])[0] == pytest.approx(kept.outputs[i, 0])
        gallery.close()


def test_a_per_pixel_model_shows_the_true_and_predicted_class_maps(tmp_path: Path) -> None:
    x = torch.from_numpy(load_digits().x_val[:16])
    masks = (x[:, 0] > 0.5).long()
    torch.manual_seed(0)
    model = nn.Conv2d(1, 2, 1)
    with nbviz.Run(tmp_path / "seg") as run:
        run.evaluate(0, model, [(x, masks)], loss_fn=nn.CrossEntropyLoss(reduction="none"))
        run.flush()
        gallery = SampleGallery(run, ids=[0], live=False)
        target, output = gallery.items[0]["outputs"]
        with torch.no_grad():
            predicted = model(x[:1]).argmax(dim=1)[0].numpy()
        gallery.close()
    true_map, pred_map = _png(target["png"]), _png(output["png"])
    assert true_map.shape == pred_map.shape == (8, 8, 3)
    # one colour per class, the same palette in both maps
    ones = masks[0].numpy() == 1
    assert len({tuple(c) for c in true_map[ones]}) == 1
    assert len({tuple(c) for c in true_map[~ones]}) == 1
    same = predicted == masks[0].numpy()
    assert (np.all(true_map == pred_map, axis=-1) == same).all()


def test_the_projector_colours_an_autoencoder_by_loss_and_offers_no_classes(
    autoencoder: Path,
) -> None:
    with nbviz.open_run(autoencoder) as run:
        pj = EmbeddingProjector(run, method="pca", live=False)
        try:
            assert pj.color_by == "loss"  # chosen: there are no classes to colour by
            points = pj.points
            assert points["n"] == 449 and points["n_classes"] == 0
            assert not points["has_predictions"] and not points["has_labels"]
            assert points["has_loss"] and not points["has_target"]
            loss = array_from_payload(points["loss"])
            assert (loss < 255).all() and loss.max() > 200  # spread over the ramp
            pj.color_by = "none"
            pj.step = 19
            assert pj.color_by == "none"  # a colouring chosen stays chosen
        finally:
            pj.close()


def test_the_projector_colours_a_regression_by_its_target_value(regression: Path) -> None:
    with nbviz.open_run(regression) as run:
        run_w = nbviz.Run(regression)
        x = run.samples()
        feats = np.stack([np.frombuffer(p, dtype="<f4") for p in x["payload"]])
        run_w.log_embeddings(5, feats)
        run_w.close()
        pj = EmbeddingProjector(run, method="pca", color_by="target", live=False)
        try:
            kept = run.outputs(5)
            codes = array_from_payload(pj.points["target"])
            assert pj.points["has_target"]
            lo, hi = pj.points["target_range"]
            assert (lo, hi) == pytest.approx((kept.targets.min(), kept.targets.max()))
            order = np.argsort(kept.targets[:, 0])
            assert codes[order[0]] == 0 and codes[order[-1]] == 254
        finally:
            pj.close()


def test_the_dashboard_of_an_autoencoder_leaves_the_views_of_classes_out_saying_why(
    autoencoder: Path,
) -> None:
    with nbviz.open_run(autoencoder) as run:
        dash = Dashboard(run, live=False)
        try:
            assert {"loss_curves", "samples", "projector", "layers"} <= set(dash.views)
            assert "confusion" not in dash.views and "data_map" not in dash.views
            assert dash.samples.sort_by == "loss" and dash.samples.descending
            [why] = [n for n in dash.notes if n.startswith("ConfusionMatrix")]
            assert "no classes" in why and "loss_fn" in why
            shown = dash.pending.splitlines()  # the line under the Dashboard's tabs
            assert f"Not shown: {why}" in shown
            for view in dash.views.values():
                assert not getattr(view, "error", ""), (type(view).__name__, view.error)
        finally:
            dash.close()


def test_the_dashboard_shows_embeddings_logged_without_predictions(tmp_path: Path) -> None:
    data = load_digits()
    with nbviz.Run(tmp_path / "emb") as run:
        run.log_samples(data.x_val, data.y_val)
        run.log_embeddings(0, data.x_val.reshape(len(data.x_val), -1))
        run.flush()
        dash = Dashboard(run, live=False)
        try:
            assert dash.projector is not None and dash.projector.points["n"] == 449
            assert dash.projector.color_by == "label"
        finally:
            dash.close()


def test_a_classifiers_dashboard_keeps_its_confusion_matrix_and_no_loss_gallery(
    demo_run,
) -> None:
    dash = Dashboard(demo_run, live=False)
    try:
        assert dash.confusion is not None and dash.samples is None
        assert not any(n.startswith("SampleGallery") for n in dash.notes)
    finally:
        dash.close()


def test_the_views_of_classes_say_why_they_are_empty_for_an_autoencoder(
    autoencoder: Path,
) -> None:
    from nbviz.widgets.confusion import ConfusionMatrix
    from nbviz.widgets.data_map import DataMap

    with nbviz.open_run(autoencoder) as run:
        matrix = ConfusionMatrix(run, live=False)
        data_map = DataMap(run, split="val", live=False)
        try:
            for view in (matrix, data_map):
                assert "have no classes" in view.empty and "sort_by='loss'" in view.empty
                assert not view.error
        finally:
            matrix.close()
            data_map.close()
        with pytest.raises(ValueError, match="'val' predictions have no classes"):
            run.sample_dynamics("val")
        assert run.class_splits() == [] and run.splits() == ["val"]


def test_a_units_top_samples_of_an_autoencoder_have_no_class_to_show(autoencoder: Path) -> None:
    from nbviz.widgets.unit_explorer import UnitExplorer

    with nbviz.open_run(autoencoder) as run:
        out = UnitExplorer(run).samples("decoder.0", "val", 59, 3)  # the 16-d code's unit 3
    cards = out["most"] + out["least"]
    assert out["n_units"] == 16 and len(cards) == 16
    assert all(c["kind"] == "image" and "pred" not in c and "label" not in c for c in cards)
