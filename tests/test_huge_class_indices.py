"""Class indices up to 2**31 - 1 without class names: the class checks and the
projector's points cost what the samples cost and keep every class exact."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import nbviz
from nbviz.analysis.checks.class_balance import check_imbalance, check_unlearned
from nbviz.widgets.base import array_from_payload

BIG = 2**31 - 1
RARE = 5_000_000
ABSENT = 4_000_000


def _labels(counts: dict[int, int]) -> np.ndarray:
    return np.concatenate([np.full(n, c, dtype=np.int64) for c, n in counts.items()])


@pytest.fixture()
def run(tmp_path: Path):
    """A training split where BIG has 40 samples and RARE 2; ABSENT is only in "val",
    and never predicted right there, at two evaluations."""
    train = _labels({0: 40, BIG: 40, RARE: 2})
    val = _labels({0: 20, BIG: 20, ABSENT: 12})
    with nbviz.Run(tmp_path / "run") as run:
        for step in (1, 2):
            run.log_predictions(step, train, train, split="train")
            wrong = np.where(val == ABSENT, 0, val)
            run.log_predictions(step, wrong, val, split="val")
        yield run


def test_the_class_checks_count_the_classes_that_occur(run) -> None:
    tracemalloc.start()
    try:
        imbalance = check_imbalance(run)
        unlearned = check_unlearned(run)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20  # a dense count up to class 5,000,000 alone is 40 MB
    (finding,) = imbalance
    ev = finding.evidence
    assert ev["missing"] == [ABSENT] and ev["small"] == [RARE] and ev["ratio"] == 20.0
    assert ev["counts"] == {"0": 40, str(RARE): 2, str(BIG): 40}  # JSON: keys are text
    assert f"'{ABSENT}' has no train samples" in finding.message
    assert f"the largest class '0' has 20x the train samples of the smallest, '{RARE}'" in (
        finding.message
    )
    assert [(f.evidence["split"], f.evidence["class"]) for f in unlearned] == [("val", ABSENT)]
    assert unlearned[0].evidence["support"] == 12 and unlearned[0].evidence["best_recall"] == 0.0


def test_every_view_and_the_diagnosis_build_on_a_class_index_of_2_31_minus_1(run) -> None:
    run.log_embeddings(2, np.random.default_rng(0).normal(size=(52, 3)))
    run.flush()
    tracemalloc.start()
    try:
        checks = run.diagnose()["check"].tolist()
        nbviz.Dashboard(run, live=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "class_imbalance" in checks and "unlearned_classes" in checks
    assert peak < 64 * 2**20


@pytest.mark.parametrize("top", [254, 255, 65_534, 65_535, 100_000, BIG])
def test_the_projector_sends_every_class_index_exactly(tmp_path: Path, top: int) -> None:
    with nbviz.Run(tmp_path / "run") as run:
        run.log_predictions(0, np.array([top, 1, 0, top]), [0, 1, top, top])
        run.log_embeddings(0, np.random.default_rng(0).normal(size=(4, 3)))
        run.flush()
        points = nbviz.EmbeddingProjector(run, method="pca").points
    label = array_from_payload(points["label"])
    pred = array_from_payload(points["pred"])
    assert label.tolist() == [0, 1, top, top] and pred.tolist() == [top, 1, 0, top]
    assert points["n_classes"] == top + 1 and points["missing"] > top
