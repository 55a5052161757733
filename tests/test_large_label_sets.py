"""Label sets too large for a matrix: sparse counting, and the ConfusionMatrix's lists.

A class index of 100,000 (a vocabulary, a fine-grained label space) costs what
the samples cost: the counts are kept per pair and per class that occur, and
the view ranks the most confused pairs and the classes by their errors, each
row opening onto its samples as a matrix cell does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score

import nbviz
from nbviz.analysis import metrics
from nbviz.widgets.confusion import MAX_MATRIX_CLASSES
from nbviz.widgets.confusion_lists import LIST_ROWS


def frame_of(labels, preds, loss=None) -> pd.DataFrame:
    labels, preds = np.asarray(labels), np.asarray(preds)
    loss = np.linspace(1.0, 0.1, len(labels)) if loss is None else np.asarray(loss)
    return pd.DataFrame(
        {"id": np.arange(len(labels)), "label": labels, "pred": preds, "loss": loss}
    )


def random_frame(n_samples: int, n_classes: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, n_samples)
    p = np.where(rng.random(n_samples) < 0.6, y, rng.integers(0, n_classes, n_samples))
    return frame_of(y, p, rng.random(n_samples))


def test_pairs_and_class_counts_equal_the_dense_matrix() -> None:
    frame = random_frame(600, 12)
    dense = metrics.confusion_matrix(frame, 12)
    pairs = metrics.confusion_pairs(frame)
    assert (pairs["count"] > 0).all() and pairs["count"].sum() == len(frame)
    rebuilt = np.zeros((12, 12), dtype=np.int64)
    rebuilt[pairs["true"], pairs["pred"]] = pairs["count"]
    np.testing.assert_array_equal(rebuilt, dense)
    counts = metrics.class_counts(frame).set_index("class")
    np.testing.assert_array_equal(counts["support"].reindex(range(12)), dense.sum(axis=1))
    np.testing.assert_array_equal(counts["predicted"].reindex(range(12)), dense.sum(axis=0))
    np.testing.assert_array_equal(counts["correct"].reindex(range(12)), np.diag(dense))
    top = metrics.top_confusions(frame, 10)
    expected = metrics.most_confused(dense, 10)
    pd.testing.assert_frame_equal(top[list(expected.columns)], expected)


def test_summary_over_the_classes_present_equals_scikit_learn() -> None:
    frame = random_frame(800, 30_000, seed=3)
    y, p = frame["label"].to_numpy(), frame["pred"].to_numpy()
    s = metrics.present_summary(frame)
    assert s.n == 800
    assert s.accuracy == pytest.approx(accuracy_score(y, p))
    assert s.macro_f1 == pytest.approx(f1_score(y, p, average="macro", zero_division=0))
    assert s.weighted_f1 == pytest.approx(f1_score(y, p, average="weighted", zero_division=0))


def test_classes_are_ranked_by_errors_with_what_they_are_mistaken_for() -> None:
    # class 7: 4 samples, 3 wrong (twice as 70_000); class 5: 2 of 2 wrong; class 9: right
    y = [7, 7, 7, 7, 5, 5, 9, 9]
    p = [70_000, 70_000, 3, 7, 6, 4, 9, 9]
    table = metrics.class_errors(frame_of(y, p), class_names=None)
    assert table["class"].tolist() == [7, 5, 9]
    assert table["errors"].tolist() == [3, 2, 0]
    assert table["support"].tolist() == [4, 2, 2]
    assert table["error_rate"].tolist() == pytest.approx([0.75, 1.0, 0.0])
    assert table["top_pred"].tolist() == [70_000, 4, -1]
    assert table["top_count"].tolist() == [2, 1, 0]
    assert table["top_pred_name"].tolist() == ["70000", "4", ""]


def test_a_class_row_stands_for_the_class_errors_highest_loss_first() -> None:
    frame = frame_of([4, 4, 4, 1], [4, 2, 9, 4], loss=[0.1, 0.5, 0.9, 2.0])
    assert metrics.cell_ids(frame, 4, metrics.ANY_OTHER).tolist() == [2, 1]
    assert metrics.cell_ids(frame, 4, 4).tolist() == [0]


def test_negative_classes_are_refused_naming_the_class() -> None:
    with pytest.raises(ValueError, match="class -3 is negative"):
        metrics.confusion_pairs(frame_of([1, -3], [1, 1]))


def large_run(path: Path, n_classes: int, n_samples: int = 3000, split: str = "val") -> nbviz.Run:
    run = nbviz.Run(path)
    rng = np.random.default_rng(1)
    y = rng.integers(0, n_classes, n_samples)
    y[:60] = 17  # a frequent class, often read as 42
    p = np.where(rng.random(n_samples) < 0.5, y, rng.integers(0, n_classes, n_samples))
    p[:40] = 42
    y[-1] = n_classes - 1
    run.log_predictions(10, p, y, split=split)
    run.flush()
    return run


@pytest.mark.parametrize("n_classes", [20_000, 100_000])
def test_a_large_label_space_lists_pairs_and_classes_instead_of_a_matrix(
    tmp_path: Path, n_classes: int
) -> None:
    run = large_run(tmp_path / "run", n_classes)
    frame = run.predictions(10, "val")
    cm = nbviz.ConfusionMatrix(run, live=False)
    assert cm.mode == "pairs" and cm.matrix == {} and cm.class_table == []
    assert cm.class_names == []  # names travel in the rows, not as a list of every class
    assert cm.confused[0] == {
        "true": 17,
        "pred": 42,
        "count": 40,
        "rate": pytest.approx(40 / int((frame.label == 17).sum())),
        "true_name": "17",
        "pred_name": "42",
    }
    assert len(cm.confused) == LIST_ROWS and len(cm.class_errors) == LIST_ROWS
    counts = [r["count"] for r in cm.confused]
    assert counts == sorted(counts, reverse=True)
    assert cm.class_errors[0]["class"] == 17 and cm.class_errors[0]["top_pred"] == 42
    assert cm.scores["accuracy"] == pytest.approx(float((frame.label == frame.pred).mean()))
    assert cm.scores["classes"] == len(np.union1d(frame.label, frame.pred))
    assert cm.scores["errors"] == int((frame.label != frame.pred).sum())
    # a pair selects its cell; a class selects its errors: the same contract as a cell
    ids = cm.select(17, 42)
    cell = frame[(frame.label == 17) & (frame.pred == 42)]
    assert sorted(ids) == sorted(cell.id.tolist()) and cm.gallery.ids == ids
    cm.selected = [17, -1]
    wrong = frame[(frame.label == 17) & (frame.pred != 17)]
    assert sorted(cm.selected_ids) == sorted(wrong.id.tolist())
    assert cm.gallery.ids == cm.selected_ids
    cm.close()
    run.close()


def test_a_small_label_set_keeps_the_matrix(demo_run) -> None:
    cm = nbviz.ConfusionMatrix(demo_run, live=False)
    assert cm.mode == "matrix" and cm.matrix and len(cm.class_names) == 10
    assert cm.class_errors == []
    cm.close()


def test_the_list_mode_starts_past_the_matrix_limit(tmp_path: Path) -> None:
    at_limit = large_run(tmp_path / "a", MAX_MATRIX_CLASSES, n_samples=500)
    past = large_run(tmp_path / "b", MAX_MATRIX_CLASSES + 1, n_samples=500)
    for run, mode in ((at_limit, "matrix"), (past, "pairs")):
        cm = nbviz.ConfusionMatrix(run, live=False)
        assert cm.mode == mode
        cm.close()
        run.close()
