"""A class the model gets wrong is a data warning once the model has learned the task;
before that (no better than always answering the most common class) it is worth knowing
only: an untrained model answers a few classes, whichever they are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import nbviz


def _evaluate(path: Path, predicted: np.ndarray, labels: np.ndarray) -> nbviz.Run:
    run = nbviz.Run(path)
    logits = torch.nn.functional.one_hot(torch.as_tensor(predicted), 3).float() * 4
    run.log_predictions(10, logits, torch.as_tensor(labels))
    run.flush()
    return run


def test_a_class_missed_by_a_model_at_chance_is_info_and_says_why(tmp_path: Path) -> None:
    labels = np.repeat([0, 1, 2], [60, 50, 40])
    rng = np.random.default_rng(0)
    # an untrained model: it answers 1 or 2 at random, never 0 (33% accuracy; 40% majority)
    predicted = rng.choice([1, 2], size=len(labels))
    run = _evaluate(tmp_path / "r", predicted, labels)
    row = run.diagnose().set_index("check").loc["class_error_imbalance"]
    assert row["severity"] == "info"
    assert "within 5 points of always answering the most common class" in row["message"]
    assert run.triage()["cause"].iloc[0] == "healthy"
    run.close()


def test_a_class_missed_by_a_model_that_learned_the_rest_is_a_warning(tmp_path: Path) -> None:
    labels = np.repeat([0, 1, 2], [60, 50, 40])
    predicted = labels.copy()
    predicted[labels == 2] = 1  # classes 0 and 1 learned, every 2 taken for a 1
    run = _evaluate(tmp_path / "r", predicted, labels)
    row = run.diagnose().set_index("check").loc["class_error_imbalance"]
    assert row["severity"] == "warning"
    assert "not learned the task" not in row["message"]
    run.close()
