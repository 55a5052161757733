"""Training dynamics per sample: how each sample's prediction moved over the evaluations.

Read from the predictions logged for a split at several steps (feed it with
``run.evaluate(step, model, train_loader, split="train")`` once per epoch, the
loader unshuffled or yielding ids, or ``run.log_predictions(step, logits,
labels, ids=..., split="train")`` with the ids of the training batches). Per
sample, over the evaluations that saw it:

- ``confidence``: the mean probability of its labelled class, and
  ``variability`` its standard deviation (Swayamdipta et al. 2020, "Dataset
  Cartography": easy samples are confident and stable, ambiguous ones
  variable, mislabelled ones confidently wrong and stable);
- ``correctness``: the fraction of evaluations that predicted its label;
- ``aum``: the area under the margin (Pleiss et al. 2020), the mean of the
  labelled class's logit minus the largest other logit. A sample the network
  learns from its features has a growing positive margin; one whose label
  contradicts its features is pulled toward the class it looks like and keeps
  a negative one. The margin is taken from the stored probabilities
  (``log p_label - log max_other p``, the same difference of logits),
  which are float16: probabilities under 1e-7 count as 1e-7, so margins are
  bounded by about +-16;
- ``mislabel_score``: ``1 / (1 + exp(aum))``, in (0, 1), higher for more
  likely mislabelled samples (0.5 at a zero margin). It ranks exactly as AUM
  does. Without stored probabilities (predictions given as classes only) it
  is ``1 - correctness``;
- ``late_correctness`` and ``late_other``: correctness and the mean largest
  probability of another class over the later half of the evaluations;
  ``predicted``: the class predicted at the last evaluation.

Cost: one read of each evaluation's predictions and probabilities, and
accumulators of a few numbers per sample (no samples x evaluations matrix).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["COLUMNS", "PROB_FLOOR", "sample_dynamics"]

COLUMNS = (
    "id",
    "label",
    "confidence",
    "variability",
    "correctness",
    "aum",
    "mislabel_score",
    "evaluations",
    "late_correctness",
    "late_other",
    "predicted",
)
#: Probabilities below this count as it (float16 storage cannot tell them apart).
PROB_FLOOR = 1e-7
_SUMS = ("p", "p2", "correct", "margin", "n", "n_margin", "late_correct", "late_other", "n_late")


def _empty() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype=np.float64) for c in COLUMNS})
    return frame.astype({"id": np.int64, "label": np.int64, "evaluations": np.int64})


def _one_evaluation(run: Any, step: int, split: str) -> pd.DataFrame:
    """id, label, pred, p (labelled class), margin, other (largest other class) at one step."""
    preds = run.predictions(step, split=split)
    ids = preds["id"].to_numpy(dtype=np.int64)
    labels = preds["label"].to_numpy(dtype=np.int64)
    out = pd.DataFrame({"id": ids, "label": labels, "pred": preds["pred"].to_numpy(np.int64)})
    stored = run.probabilities(step, split=split)
    if stored is not None:
        pids, probs = stored
        probs = np.asarray(probs, dtype=np.float64)
        order = pd.Index(pids).get_indexer(ids)
        ok = (order >= 0) & (labels >= 0) & (labels < probs.shape[1])
        p = np.full(len(ids), np.nan)
        other = np.full(len(ids), np.nan)
        rows = probs[order[ok]]
        lab = labels[ok]
        p[ok] = rows[np.arange(len(lab)), lab]
        masked = rows.copy()
        masked[np.arange(len(lab)), lab] = -np.inf
        other[ok] = masked.max(axis=1) if probs.shape[1] > 1 else np.nan
        out["p"] = p
        out["other"] = other
        with np.errstate(divide="ignore", invalid="ignore"):
            out["margin"] = np.log(np.maximum(p, PROB_FLOOR)) - np.log(
                np.maximum(other, PROB_FLOOR)
            )
    else:
        loss = preds["loss"].to_numpy(dtype=np.float64)
        out["p"] = np.exp(-loss)  # cross-entropy per sample: -log p(label)
        out["other"] = np.nan
        out["margin"] = np.nan
    return out


def sample_dynamics(run: Any, split: str = "train") -> pd.DataFrame:
    """Per-sample training dynamics of ``split`` (see the module docstring), by id.

    Raises ValueError naming what to log when the split has no predictions.
    """
    if not isinstance(split, str) or not split:
        raise TypeError(f"sample_dynamics: split must be a non-empty string, got {split!r}")
    steps = [int(s) for s in run.prediction_steps(split)]
    if not steps:
        have = ", ".join(repr(s) for s in run.splits()) or "none"
        raise ValueError(
            f"sample_dynamics: no predictions for split {split!r} (splits with predictions: "
            f"{have}); evaluate the training set once per epoch, e.g. "
            f"run.evaluate(step, model, train_loader, split={split!r}) with an unshuffled "
            "loader, or run.log_predictions(step, logits, labels, ids=batch_ids, "
            f"split={split!r})"
        )
    if not run.predicts_classes(split):
        raise ValueError(
            f"sample_dynamics: the {split!r} predictions have no classes (a model evaluated "
            "by its loss, loss_fn=...); training dynamics read a classifier's confidence in "
            "each sample's class"
        )
    late_from = len(steps) // 2
    ids = np.zeros(0, dtype=np.int64)
    acc = {k: np.zeros(0) for k in _SUMS}
    labels = np.zeros(0, dtype=np.int64)
    last_pred = np.zeros(0, dtype=np.int64)
    for k, step in enumerate(steps):
        ev = _one_evaluation(run, step, split)
        if ev.empty:
            continue
        ev = ev.drop_duplicates("id", keep="last")
        new = np.setdiff1d(ev["id"].to_numpy(), ids)
        if len(new):
            union = np.union1d(ids, new)
            where = np.searchsorted(union, ids)
            for key in _SUMS:
                grown = np.zeros(len(union))
                grown[where] = acc[key]
                acc[key] = grown
            grown_l = np.full(len(union), -1, dtype=np.int64)
            grown_l[where] = labels
            grown_p = np.full(len(union), -1, dtype=np.int64)
            grown_p[where] = last_pred
            ids, labels, last_pred = union, grown_l, grown_p
        pos = np.searchsorted(ids, ev["id"].to_numpy())
        p = ev["p"].to_numpy(dtype=np.float64)
        has_p = np.isfinite(p)
        margin = ev["margin"].to_numpy(dtype=np.float64)
        has_m = np.isfinite(margin)
        correct = (ev["pred"].to_numpy() == ev["label"].to_numpy()).astype(np.float64)
        np.add.at(acc["n"], pos, 1.0)
        np.add.at(acc["correct"], pos, correct)
        np.add.at(acc["p"], pos[has_p], p[has_p])
        np.add.at(acc["p2"], pos[has_p], p[has_p] ** 2)
        np.add.at(acc["margin"], pos[has_m], margin[has_m])
        np.add.at(acc["n_margin"], pos[has_m], 1.0)
        if k >= late_from:
            other = np.nan_to_num(ev["other"].to_numpy(dtype=np.float64), nan=0.0)
            np.add.at(acc["n_late"], pos, 1.0)
            np.add.at(acc["late_correct"], pos, correct)
            np.add.at(acc["late_other"], pos, other)
        labels[pos] = ev["label"].to_numpy()
        last_pred[pos] = ev["pred"].to_numpy()
    if len(ids) == 0:
        return _empty()
    n = np.maximum(acc["n"], 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = acc["p"] / n
        variability = np.sqrt(np.maximum(acc["p2"] / n - confidence**2, 0.0))
        aum = np.where(acc["n_margin"] > 0, acc["margin"] / acc["n_margin"], np.nan)
        late_n = np.where(acc["n_late"] > 0, acc["n_late"], np.nan)
        late_correct = acc["late_correct"] / late_n
        late_other = acc["late_other"] / late_n
    correctness = acc["correct"] / n
    score = np.where(np.isfinite(aum), 1.0 / (1.0 + np.exp(np.clip(aum, -50, 50))), 1 - correctness)
    frame = pd.DataFrame(
        {
            "id": ids,
            "label": labels,
            "confidence": confidence,
            "variability": variability,
            "correctness": correctness,
            "aum": aum,
            "mislabel_score": score,
            "evaluations": acc["n"].astype(np.int64),
            "late_correctness": late_correct,
            "late_other": late_other,
            "predicted": last_pred,
        },
        columns=list(COLUMNS),
    )
    frame.attrs["split"] = split
    frame.attrs["steps"] = steps
    return frame
