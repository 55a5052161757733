"""ConfusionMatrix and SampleGallery against what the run store holds, and the metrics
against scikit-learn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import traitlets
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support
from training import loss_only_run

import nbviz
from nbviz.analysis import metrics


def expected_ids(run, step: int, true: int, pred: int) -> list[int]:
    """The cell's ids straight from run.predictions: highest loss first, ties by id."""
    frame = run.predictions(step, "val")
    cell = frame[(frame["label"] == true) & (frame["pred"] == pred)]
    cell = cell.assign(key=-cell["loss"]).sort_values(["key", "id"], kind="stable")
    return [int(i) for i in cell["id"]]


def test_selected_ids_match_the_predictions_at_every_step_and_cell(demo_run) -> None:
    cm = nbviz.ConfusionMatrix(demo_run, live=False)
    steps = [int(s) for s in demo_run.prediction_steps("val")]
    assert len(steps) >= 2 and cm.eval_step == steps[-1]
    for step in steps:
        cm.step = step
        frame = demo_run.predictions(step, "val")
        wrong = frame[frame["label"] != frame["pred"]]
        cells = {(int(t), int(p)) for t, p in zip(wrong["label"], wrong["pred"])}
        assert cells  # the demo model errs at every evaluation
        for true, pred in sorted(cells | {(0, 0), (3, 3)})[:12]:
            cm.selected = [true, pred]
            assert cm.selected_ids == expected_ids(demo_run, step, true, pred)
            counts = metrics.confusion_matrix(frame, 10)
            assert len(cm.selected_ids) == counts[true, pred]
            assert cm.gallery.ids == cm.selected_ids
    cm.close()


def test_selection_survives_a_change_of_step_and_its_ids_follow(demo_run) -> None:
    steps = [int(s) for s in demo_run.prediction_steps("val")]
    cm = nbviz.ConfusionMatrix(demo_run, live=False, step=steps[0])
    cm.selected = [8, 1]
    first = list(cm.selected_ids)
    assert first == expected_ids(demo_run, steps[0], 8, 1)
    cm.step = steps[-1] + 1000  # past the last evaluation: the latest one is shown
    assert cm.selected == [8, 1]
    assert cm.eval_step == steps[-1]
    assert cm.selected_ids == expected_ids(demo_run, steps[-1], 8, 1)
    assert cm.gallery.step == steps[-1] and cm.gallery.ids == cm.selected_ids
    # the cards come highest loss first, and the gallery's sort menu says so
    assert cm.gallery.sort_by == "loss" and cm.gallery.descending
    assert cm.gallery.ordered_ids() == cm.selected_ids
    assert [i["id"] for i in cm.gallery.items] == cm.selected_ids[: cm.gallery.page_size]
    cm.step = (steps[0] + steps[1]) // 2  # between two evaluations: the earlier one
    assert cm.eval_step == steps[0] and cm.selected_ids == first
    cm.step = steps[0] - 1  # before any evaluation: nothing, the selection kept
    assert cm.eval_step == -1 and cm.selected == [8, 1] and cm.selected_ids == []
    assert cm.matrix == {}
    cm.close()


def test_view_state_equals_scikit_learn(demo_run) -> None:
    cm = nbviz.ConfusionMatrix(demo_run, live=False)
    frame = demo_run.predictions(cm.eval_step, "val")
    y, p = frame["label"].to_numpy(), frame["pred"].to_numpy()
    labels = np.arange(10)
    prec, rec, f1, support = precision_recall_fscore_support(y, p, labels=labels, zero_division=0)
    table = cm.class_table
    assert [r["name"] for r in table] == demo_run.class_names
    np.testing.assert_allclose([r["precision"] for r in table], prec)
    np.testing.assert_allclose([r["recall"] for r in table], rec)
    np.testing.assert_allclose([r["f1"] for r in table], f1)
    assert [r["support"] for r in table] == support.tolist()
    assert cm.scores["accuracy"] == pytest.approx(accuracy_score(y, p))
    assert cm.scores["macro_f1"] == pytest.approx(f1_score(y, p, average="macro"))
    assert cm.scores["weighted_f1"] == pytest.approx(f1_score(y, p, average="weighted"))
    assert cm.scores["n"] == len(frame)
    # the most-confused pairs are the largest off-diagonal counts, in order
    m = metrics.confusion_matrix(frame, 10)
    off = [(int(m[t, q]), t, q) for t in range(10) for q in range(10) if t != q and m[t, q]]
    top = sorted(off, key=lambda c: (-c[0], c[1], c[2]))[: len(cm.confused)]
    assert [(c["count"], c["true"], c["pred"]) for c in cm.confused] == top
    cm.close()


def test_metrics_equal_scikit_learn_with_classes_never_predicted() -> None:
    rng = np.random.default_rng(0)
    import pandas as pd

    y = rng.integers(0, 6, 300)
    p = np.where(rng.random(300) < 0.6, y, rng.integers(0, 4, 300))  # 4, 5 rarely predicted
    p[p == 5] = 0
    frame = pd.DataFrame({"id": np.arange(300), "label": y, "pred": p, "loss": rng.random(300)})
    table = metrics.class_metrics(frame, 7)  # class 6 never seen at all
    ref = precision_recall_fscore_support(y, p, labels=np.arange(7), zero_division=np.nan)
    for column, expected in zip(("precision", "recall", "f1", "support"), ref):
        np.testing.assert_allclose(table[column].to_numpy(), expected)
    # class 6: never present, never predicted: no score is defined (not 0)
    assert table.loc[6, ["precision", "recall", "f1"]].isna().all()
    assert table["name"].tolist() == [str(i) for i in range(7)]
    s = metrics.summary(frame, 7)
    assert s.accuracy == pytest.approx(accuracy_score(y, p))
    # the macro average over the classes that have an F1: class 6 is left out, not a 0
    assert s.macro_f1 == pytest.approx(f1_score(y, p, labels=np.arange(6), average="macro"))
    assert s.macro_f1 == pytest.approx(table["f1"].mean())  # the table's mean, NaN skipped
    assert s.weighted_f1 == pytest.approx(
        f1_score(y, p, labels=np.arange(7), average="weighted", zero_division=0)
    )


def test_bad_input_is_refused_with_a_message_that_names_it(demo_run) -> None:
    with pytest.raises(ValueError, match=r"split 'test'.*'val'"):
        nbviz.ConfusionMatrix(demo_run, split="test", live=False)
    with pytest.raises(ValueError, match="normalize must be one of"):
        nbviz.ConfusionMatrix(demo_run, normalize="percent", live=False)
    with pytest.raises(TypeError, match="step must be an int"):
        nbviz.ConfusionMatrix(demo_run, step="last", live=False)
    cm = nbviz.ConfusionMatrix(demo_run, live=False)
    with pytest.raises(traitlets.TraitError, match=r"\[true, predicted\]"):
        cm.selected = [1, 2, 3]
    with pytest.raises(traitlets.TraitError, match="outside the 10 classes"):
        cm.selected = [10, 0]
    with pytest.raises(traitlets.TraitError):
        cm.normalize = "percent"
    cm.close()
    with pytest.raises(ValueError, match="sort_by must be one of"):
        nbviz.SampleGallery(demo_run, sort_by="name", live=False)
    with pytest.raises(TypeError, match="ids must be"):
        nbviz.SampleGallery(demo_run, ids="0,1", live=False)
    g = nbviz.SampleGallery(demo_run, ids=[1, 2], live=False)
    with pytest.raises(traitlets.TraitError, match="page_size must be in 1..200"):
        g.page_size = 0
    g.close()


def test_gallery_pages_sorts_and_carries_thumbnails(demo_run) -> None:
    g = nbviz.SampleGallery(demo_run, live=False, sort_by="loss", page_size=10)
    frame = demo_run.predictions(None, "val")
    assert len(g.ids) == len(frame) and g.n_pages == -(-len(frame) // 10)
    losses = [item["loss"] for item in g.items]
    assert losses == sorted(losses, reverse=True) and losses[0] == pytest.approx(frame.loss.max())
    assert all(
        item["kind"] == "image" and item["png"][:8] == b"\x89PNG\r\n\x1a\n" for item in g.items
    )
    g.page = 1
    assert g.items[0]["loss"] <= losses[-1]
    g.sort_by, g.descending = "confidence", False
    assert g.page == 0
    conf = [item["confidence"] for item in g.items]
    assert conf == sorted(conf) and conf[0] == pytest.approx(frame.confidence.min())
    g.page = 10_000  # past the end: the last page
    assert g.page == g.n_pages - 1 and g.items
    g.close()


def test_without_samples_the_gallery_shows_ids_and_labels_and_says_how_to_log(
    tmp_path: Path,
) -> None:
    names = [f"<b>class {i}</b>" for i in range(100)]  # 100 classes, HTML in the names
    run = nbviz.Run(tmp_path / "run", class_names=names)
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 100, 500)
    for step in (10, 20):
        logits = rng.normal(size=(500, 100)).astype(np.float32)
        logits[np.arange(500), labels] += 2.0 + step / 10
        run.log_predictions(step, logits, labels)
    run.flush()
    cm = nbviz.ConfusionMatrix(run, live=False)
    assert cm.class_names == names and len(cm.class_table) == 100
    frame = run.predictions(20, "val")
    true, pred = int(frame.label[0]), int(frame.pred[0])
    ids = cm.select(true, pred)
    assert ids == expected_ids(run, 20, true, pred)
    g = cm.gallery
    assert "run.log_samples" in g.note
    item = g.items[0]
    assert item["kind"] == "" and "png" not in item
    assert item["label_name"] == names[true] and item["pred_name"] == names[pred]
    cm.close()
    run.close()


def test_a_run_without_predictions_says_how_to_record_them(tmp_path: Path) -> None:
    run = loss_only_run(tmp_path / "empty")
    cm = nbviz.ConfusionMatrix(run, live=False)
    assert "run.evaluate" in cm.empty and cm.eval_step == -1
    cm.close()
    run.close()
