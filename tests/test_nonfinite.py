"""NaN and inf are recorded and shown as non-finite: never as class 0, a norm of 0, a
dead unit or a blank. The run hits NaN at step 7 (``training.nan_run``)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import nbviz
from nbviz.analysis import metrics
from nbviz.store.predictions import NONFINITE_PRED
from nbviz.widgets.wire import array_from_payload


@pytest.fixture()
def nan_run(nan_run_path):
    run = nbviz.open_run(nan_run_path)
    yield run
    run.close()


# ----------------------------------------------------------------- recording


def test_nonfinite_logits_are_recorded_as_no_class_without_a_warning(tmp_path):
    logits = np.array(
        [
            [np.nan, 1.0, 2.0],  # NaN
            [np.inf, 0.0, 0.0],  # +inf
            [-np.inf, -np.inf, -np.inf],  # no class is possible
            [1.0, 2.0, -np.inf],  # a masked class: finite probabilities
            [0.0, 5.0, 1.0],
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with nbviz.Run(tmp_path / "r") as run:
            run.log_predictions(0, logits, [0, 1, 2, 1, 1])
            run.flush()
            preds = run.predictions(0)
            _, probs = run.probabilities(0)
    assert preds["pred"].tolist() == [NONFINITE_PRED] * 3 + [1, 1]
    assert preds["confidence"][:3].isna().all() and preds["loss"][:3].isna().all()
    assert np.isfinite(preds["loss"][3:]).all() and preds["confidence"][3] == pytest.approx(
        1 / (1 + np.exp(-1))
    )
    assert np.isnan(probs[:3].astype(np.float64)).all() and np.isfinite(probs[3:]).all()


def test_a_user_cannot_log_the_nonfinite_sentinel_as_a_class(tmp_path):
    with nbviz.Run(tmp_path / "r") as run:
        with pytest.raises(ValueError, match="predicted classes must be class indices >= 0"):
            run.log_predictions(0, np.array([NONFINITE_PRED, 1]), [0, 1])


def test_evaluate_records_a_nan_model_as_nonfinite_predictions(nan_run):
    before, after = nan_run.predictions(5), nan_run.predictions(10)
    assert (before["pred"] >= 0).all()
    assert (after["pred"] == NONFINITE_PRED).all() and len(after) == 200
    assert after["loss"].isna().all() and after["confidence"].isna().all()
    acc = nan_run.scalars("val_accuracy").set_index("step")["value"]
    assert np.isfinite(acc[5]) and np.isnan(acc[10])  # not the share of class 0


def test_scores_are_over_the_samples_with_finite_logits_and_count_the_others():
    frame = pd.DataFrame(
        {"id": range(6), "label": [0, 1, 1, 0, 1, 0], "pred": [0, 1, 0, -1, -1, -1]}
    )
    s = metrics.summary(frame, 2)
    assert (s.n, s.nonfinite) == (3, 3) and s.accuracy == pytest.approx(2 / 3)
    assert metrics.confusion_matrix(frame, 2).tolist() == [[1, 0], [1, 1]]
    assert metrics.nonfinite_count(frame) == 3
    assert metrics.class_metrics(frame, 2)["support"].tolist() == [1, 2]


# -------------------------------------------------------------------- probes


def test_a_layer_with_nothing_finite_has_a_nan_norm_and_the_count(nan_run):
    grads = nan_run.stats("gradient", steps=[8]).set_index("layer")
    assert grads["norm"].isna().all()  # not 0: there was nothing finite to measure
    assert grads.loc["fc2.weight", "nonfinite"] == 1024
    assert grads.loc["fc2", "nonfinite"] == grads.loc["fc2", "count"]
    healthy = nan_run.stats("gradient", steps=[6])
    assert (healthy["nonfinite"] == 0).all() and (healthy["norm"] > 0).all()
    # partly non-finite: the statistics are over the finite values, beside the count
    act = nan_run.stats("activation", steps=[7]).set_index("layer")
    assert act.loc["fc1", "nonfinite"] == 32 and np.isfinite(act.loc["fc1", "norm"])


def test_units_that_saw_nan_are_nonfinite_not_dead(nan_run):
    steps, zero = nan_run.unit_stats("act1", "zero_frac")
    at = {int(s): i for i, s in enumerate(steps)}
    assert np.isfinite(zero[at[6]]).all()
    assert np.isnan(zero[at[7]][0]) and np.isfinite(zero[at[7]][1:]).all()  # unit 0 only
    assert np.isnan(zero[at[8]]).all()
    assert not (zero[at[8]] == 1.0).any()  # nothing reads as "zero on the whole batch"


def test_the_diagnosis_still_names_the_first_nonfinite_step_and_layer(nan_run):
    findings = nan_run.diagnose()
    first = findings[findings["check"] == "nonfinite"].iloc[0]
    assert (first["layer"], first["step"]) == ("fc1", 7)
    # a NaN gradient is not a vanishing one
    assert not (findings["check"] == "vanishing_gradients").any()


# --------------------------------------------------------------------- views


def test_layer_browser_counts_the_nonfinite_values_behind_each_value(nan_run):
    lb = nbviz.LayerBrowser(nan_run, live=False)
    assert lb.step == 14
    bad = lb.nonfinite_at_step()
    assert bad["grad_norm"]["fc2"] == 1024 and bad["update_ratio"]["fc3"] == 160
    assert np.isnan(lb.values_at_step()["grad_norm"]["fc2"])  # not 0
    lb.step = 5
    assert lb.nonfinite_at_step() == {"zero_frac": {}, "grad_norm": {}, "update_ratio": {}}
    lb.step = 6  # the weight is read as the step ends: after the NaN was put in
    assert lb.nonfinite_at_step()["update_ratio"] == {"fc1": 1}
    lb.step = 7
    assert lb.nonfinite_at_step()["zero_frac"]["act1"] == 32
    assert np.isfinite(lb.values_at_step()["zero_frac"]["act1"])
    lb.selected_layer = "act1"
    series = {(s["signal"], s["layer"]): s for s in lb.detail["series"]}
    counts = array_from_payload(series[("activation", "act1")]["nonfinite"])
    assert counts[:7].sum() == 0 and counts[7] == 32 and (counts[8:] == 1024).all()
    lb.close()


def test_confusion_matrix_counts_nonfinite_predictions_apart(nan_run):
    cm = nbviz.ConfusionMatrix(nan_run, step=10, live=False)
    assert cm.scores["nonfinite"] == 200 and cm.scores["n"] == 0
    assert cm.scores["accuracy"] is None  # no score, not 0.135 for "everything is class 0"
    counts = array_from_payload(cm.matrix["counts"])
    assert counts.sum() == 0
    cm.step = 5
    assert cm.scores["nonfinite"] == 0 and cm.scores["n"] == 200
    cm.close()


def test_projector_of_all_nan_embeddings_says_so_and_stops(nan_run):
    pj = nbviz.EmbeddingProjector(nan_run, step=10, method="umap", live=False)
    assert pj.points["n"] == 0 and pj.points["nonfinite"] == 200
    assert (
        pj.note == "all 200 embeddings at step 10 are non-finite (NaN or inf): nothing to project"
    )
    assert pj.progress == 1.0 and pj.status == "" and pj._job is None  # no bar, no stop button
    pj.close()
    pj = nbviz.EmbeddingProjector(nan_run, step=5, method="pca", live=False)
    assert pj.points["n"] == 200 and pj.points["nonfinite"] == 0 and pj.note == ""
    pj.close()


def test_a_nan_prediction_reads_non_finite_in_the_gallery(nan_run):
    g = nbviz.SampleGallery(nan_run, ids=[0, 1], step=10, live=False)
    item = g.items[0]
    assert (item["pred"], item["pred_name"]) == (NONFINITE_PRED, "non-finite")
    assert item["loss"] is None and item["confidence"] is None  # no NaN in JSON
    g.close()


def _json_state(widget) -> None:
    """Every synced value but binary buffers goes out as strict JSON (no NaN)."""
    state = {k: v for k, v in widget.get_state().items() if not isinstance(v, bytes | memoryview)}
    json.dumps(state, allow_nan=False, default=lambda o: "<binary>")


def test_no_view_of_a_nan_run_sends_nan_as_json(nan_run):
    views = [
        nbviz.LayerBrowser(nan_run, selected_layer="act1", live=False),
        nbviz.ConfusionMatrix(nan_run, step=10, live=False),
        nbviz.EmbeddingProjector(nan_run, step=10, method="pca", live=False),
        nbviz.Histograms(nan_run, signal="gradients", layer="fc2.weight", live=False),
        nbviz.LossCurves(nan_run, live=False),
    ]
    views.append(views[1].gallery)
    views[1].select(0, 0)
    for view in views:
        _json_state(view)
    for view in views[:5]:
        view.close()
