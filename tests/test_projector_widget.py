"""EmbeddingProjector: PCA at once, the chosen method when ready, selection and highlight
round trips, compact binary points, readable messages."""

from __future__ import annotations

import numpy as np
import pytest

import nbviz
from nbviz.analysis import projection as P
from nbviz.widgets.base import array_from_payload, array_trait_payload
from nbviz.widgets.projector import EmbeddingProjector


def classified_run(path, n=400, k=4, steps=(5, 10), nan_rows=()):
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=6.0, size=(k, 8))
    labels = rng.integers(0, k, size=n)
    run = nbviz.Run(path, class_names=[f"c{i}" for i in range(k)])
    for s in steps:
        feats = (centres[labels] + rng.normal(size=(n, 8))).astype(np.float32)
        feats[list(nan_rows)] = np.nan
        logits = np.eye(k, dtype=np.float32)[labels] * 2 + rng.normal(size=(n, k)).astype(
            np.float32
        )
        run.log_predictions(s, logits, labels, ids=np.arange(n) + 100)
        run.log_embeddings(s, feats, ids=np.arange(n) + 100)
    run.log_samples(rng.random((n, 8, 8)), labels, ids=np.arange(n) + 100)
    run.flush()
    return run, labels


def indices(payload):
    return list(np.asarray(array_from_payload(payload["indices"])))


def test_pca_is_on_screen_at_once_and_the_method_replaces_it(tmp_path):
    run, _ = classified_run(tmp_path / "r")
    pj = EmbeddingProjector(run, method="tsne", params={"n_iter": 100}, live=False)
    assert pj.shown_method == "pca" and pj.shown_step == 10
    assert pj.points["n"] == 400 and not pj.points["transition"]
    assert pj.status.startswith("t-SNE")
    assert pj.wait(120)
    assert pj.shown_method == "tsne" and pj.progress == 1.0 and pj.status == ""
    assert pj.points["transition"]  # same points: the browser animates between layouts
    cached = P.cached_layout(run, 10, method="tsne", params={"n_iter": 100})
    assert cached is not None
    # a second view of the same projection computes nothing and shows it at once
    again = EmbeddingProjector(run, method="tsne", params={"n_iter": 100}, live=False)
    assert again.shown_method == "tsne" and again.status == ""
    pj.close()
    again.close()


def test_points_travel_as_about_twelve_bytes_each(tmp_path):
    run, labels = classified_run(tmp_path / "r")
    pj = EmbeddingProjector(run, method="pca", live=False)
    per_point = (
        sum(len(pj.points[k]["data"]) for k in ("xy", "label", "pred", "confidence", "loss"))
        / pj.points["n"]
    )
    assert per_point == 12
    frame = pj.points_frame()
    assert list(frame.id) == list(range(100, 500))
    np.testing.assert_array_equal(frame.label, labels)
    xy = frame[["x", "y"]].to_numpy()
    assert np.abs(xy).max() <= 1.0 and np.abs(xy).max() > 0.8  # normalised into [-1, 1]


def test_a_browser_selection_becomes_ids_and_fills_the_gallery_by_loss(tmp_path):
    run, _ = classified_run(tmp_path / "r")
    pj = EmbeddingProjector(run, method="pca", live=False)
    frame = pj.points_frame()
    pick = np.array([3, 0, 17, 250], dtype=np.uint32)
    pj.picked = {"indices": array_trait_payload(pick)}
    assert pj.selected_ids == sorted(int(i) for i in frame.id.iloc[pick])
    assert indices(pj.selection) == sorted(pick.tolist())
    losses = frame.set_index("id").loss
    shown = pj.gallery.ids
    assert sorted(shown) == pj.selected_ids
    assert list(losses.reindex(shown)) == sorted(losses.reindex(shown), reverse=True)
    # the gallery's sort menu names that order
    assert pj.gallery.sort_by == "loss" and pj.gallery.ordered_ids() == shown
    pj.picked = {"indices": array_trait_payload(np.zeros(0, dtype=np.uint32))}
    assert pj.selected_ids == [] and pj.gallery.ids == []


def test_ids_set_in_python_select_and_highlight_their_points(tmp_path):
    run, _ = classified_run(tmp_path / "r")
    pj = EmbeddingProjector(run, method="pca", live=False)
    pj.selected_ids = [102, 101, 99_999]  # an id not on screen is skipped
    assert indices(pj.selection) == [1, 2]
    pj.highlight_ids = [499, 100]
    assert indices(pj.highlight) == [0, 399]


def test_hovering_a_point_sends_its_sample(tmp_path):
    run, _ = classified_run(tmp_path / "r")
    pj = EmbeddingProjector(run, method="pca", live=False)
    pj.hover_index = 7
    assert pj.hover_sample["id"] == 107 and pj.hover_sample["kind"] == "image"
    assert pj.hover_sample["png"][:4] == b"\x89PNG"


def test_moving_the_step_shows_the_embedding_at_or_before_it(tmp_path):
    run, _ = classified_run(tmp_path / "r")
    pj = EmbeddingProjector(run, method="pca", live=False)
    assert pj.embedding_steps == [5, 10]
    pj.step = 7
    assert pj.shown_step == 5 and pj.points["step"] == 5
    pj.step = 0  # before the first: the first
    assert pj.shown_step == 5
    pj.step = 10
    assert pj.shown_step == 10 and pj.points["transition"]


def test_rows_with_nan_features_are_left_out_and_said(tmp_path):
    run, _ = classified_run(tmp_path / "r", nan_rows=(4, 9))
    pj = EmbeddingProjector(run, method="pca", live=False)
    assert pj.points["n"] == 398
    assert pj.note == "2 of 400 embeddings at step 10 are non-finite (NaN or inf) and not shown"
    assert pj.points["nonfinite"] == 2
    assert 104 not in set(pj.points_frame().id)


def test_all_nan_embeddings_say_so_and_start_no_projection(tmp_path):
    run, _ = classified_run(tmp_path / "r", nan_rows=tuple(range(400)))
    pj = EmbeddingProjector(run, method="umap", live=False)
    assert pj.points["n"] == 0 and pj.points["nonfinite"] == 400
    assert (
        pj.note == "all 400 embeddings at step 10 are non-finite (NaN or inf): nothing to project"
    )
    assert "fitted on" not in pj.note
    assert pj.progress == 1.0 and pj.status == "" and pj._job is None  # nothing left running


def test_a_run_without_embeddings_shows_how_to_record_them(tmp_path):
    run = nbviz.Run(tmp_path / "r")
    pj = EmbeddingProjector(run, live=False)
    assert "run.evaluate(step, model, loader" in pj.empty
    assert pj.points == {}


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"method": "tnse"}, ValueError, "method must be one of"),
        ({"color_by": "class"}, ValueError, "color_by must be one of"),
        ({"layer": "fc9"}, ValueError, "no embeddings of layer 'fc9'"),
        ({"params": {"perplexity": -1}}, ValueError, "perplexity"),
        ({"step": "10"}, TypeError, "step must be an int"),
    ],
)
def test_bad_arguments_are_refused_with_the_offending_value(tmp_path, kwargs, error, text):
    run, _ = classified_run(tmp_path / "r", steps=(5,))
    kwargs = {"method": "tsne", **kwargs}
    with pytest.raises(error, match=text):
        EmbeddingProjector(run, live=False, **kwargs)


def test_changing_method_keeps_seed_and_resolves_the_new_defaults(tmp_path):
    run, _ = classified_run(tmp_path / "r", steps=(5,))
    pj = EmbeddingProjector(run, method="pca", params={"seed": 5}, live=False)
    pj.method = "tsne"
    assert pj.params["seed"] == 5 and pj.params["perplexity"] == 30.0
    pj.close()  # cancels the background job
    assert pj.wait(10)


def test_choosing_the_shown_method_stops_the_background_job(tmp_path):
    run, _ = classified_run(tmp_path / "r")
    pj = EmbeddingProjector(run, method="tsne", params={"n_iter": 2000}, live=False)
    assert pj.progress < 1 and pj.shown_method == "pca"
    job = pj._job
    pj.method = "pca"  # what the view's "stop" button does
    assert job is not None and job.cancel.is_set()
    assert pj.wait(5) and pj.status == "" and pj.progress == 1.0 and pj.shown_method == "pca"


def test_an_unavailable_method_is_said_and_pca_stays(tmp_path, monkeypatch):
    run, _ = classified_run(tmp_path / "r", steps=(5,))
    reason = "UMAP is unavailable: the umap-learn package is not installed (pip install umap-learn)"
    monkeypatch.setattr(
        P, "method_unavailable", lambda method: reason if method == "umap" else None
    )
    pj = EmbeddingProjector(run, method="umap", live=False)
    assert pj.shown_method == "pca" and pj.points["n"] == 400
    assert pj.status == f"{reason}; showing PCA"
    assert pj.wait(1)
