"""Read queries on ``predictions``, ``probabilities`` and ``outputs``: what the model said
about each sample (its classes, or for other models its outputs beside their targets)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from nbviz.store.arrays import from_blob
from nbviz.store.columns import frame, int64_blob, int_array
from nbviz.store.errors import StoredValueError
from nbviz.store.query import MissingStepError, ReaderBase, describe_steps, skip_scan_sql

__all__ = ["NONFINITE_PRED", "ModelOutputs", "PredictionQueries"]

#: The ``pred`` of a sample whose logits were non-finite (NaN, +inf, or all -inf): no
#: class can be read from them. Its ``loss`` and ``confidence`` are NaN, and its
#: stored probabilities NaN. Views count these samples apart; they are never class 0.
NONFINITE_PRED = -1

_COLUMNS = ("step", "id", "label", "pred", "loss", "confidence")


class ModelOutputs(NamedTuple):
    """What a model that is not a classifier gave at one evaluation (see ``Reader.outputs``)."""

    ids: np.ndarray
    outputs: np.ndarray | None
    targets: np.ndarray | None
    targets_from: str


class PredictionQueries(ReaderBase):
    """Predictions per split and step, and the class probabilities logged with them."""

    def prediction_steps(self, split: str = "val") -> np.ndarray:
        """Sorted steps with predictions for ``split`` (int64)."""
        rows = self._q(
            skip_scan_sql("predictions", "step", where="split = :split"), {"split": split}
        )
        return int_array(r[0] for r in rows)

    def predictions(self, step: int | None = None, split: str = "val") -> pd.DataFrame:
        """Predictions ``[step, id, label, pred, loss, confidence]`` at one step, by id.

        ``pred`` is :data:`NONFINITE_PRED` (-1) where the logits were non-finite
        (then ``loss`` and ``confidence`` are NaN).
        ``step=None``: the latest step with predictions for the split (an empty
        frame when there is none yet).
        """
        if step is None:
            step = self._one("SELECT max(step) FROM predictions WHERE split = ?", (split,))
            if step is None:
                return frame([], _COLUMNS, "iiiiff")
        rows = self._q(
            "SELECT step, id, label, pred, loss, confidence FROM predictions "
            "WHERE split = ? AND step = ? ORDER BY id",
            (split, int(step)),
        )
        if not rows:
            recorded = self.prediction_steps(split)
            if len(recorded) == 0:
                raise ValueError(
                    f"no predictions for split {split!r}; splits with predictions: "
                    f"{', '.join(self.splits()) or 'none yet'}"
                )
            raise MissingStepError(
                f"no {split} predictions at step {step}; {describe_steps(recorded, int(step))}"
            )
        return frame(rows, _COLUMNS, "iiiiff")

    def probabilities(self, step: int, split: str = "val") -> tuple[np.ndarray, np.ndarray] | None:
        """``(ids int64 [n], probs [n, n_classes])`` logged at a step, or None."""
        row = self._row(
            "SELECT ids, probs, dtype, shape FROM probabilities WHERE split = ? AND step = ?",
            (split, int(step)),
        )
        if row is None:
            return None
        return int64_blob(row[0]), from_blob(row[1], row[2], row[3])

    def predicts_classes(self, split: str = "val") -> bool | None:
        """Whether ``split``'s latest evaluation predicted classes (None: no predictions).

        False for a model evaluated with a ``loss_fn`` that is not a classifier (its
        predictions hold a loss per sample and no predicted class).
        """
        row = self._row(
            "SELECT pred FROM predictions WHERE split = ? ORDER BY step DESC LIMIT 1", (split,)
        )
        return None if row is None else row[0] is not None

    def class_splits(self) -> list[str]:
        """Splits whose latest evaluation predicted classes (what class views and checks read)."""
        return [split for split in self.splits() if self.predicts_classes(split)]

    def outputs(self, step: int, split: str = "val") -> ModelOutputs | None:
        """The outputs and targets kept at an evaluation of a model that is not a classifier,
        or None: ``(ids int64 [n], outputs [n, ...] or None, targets [n, ...] or None,
        targets_from)``; ``targets_from`` is ``"inputs"`` for an autoencoder's targets,
        ``"tokens"`` for a language model's per-token arrays (read them with
        ``token_losses``)."""
        row = self._row(
            "SELECT ids, outputs, outputs_dtype, outputs_shape, targets, targets_dtype, "
            "targets_shape, targets_from FROM outputs WHERE split = ? AND step = ?",
            (split, int(step)),
        )
        if row is None:
            return None
        ids = int64_blob(row[0])
        arrays = []
        for blob, dtype, shape in (row[1:4], row[4:7]):
            if blob is None:
                arrays.append(None)
                continue
            arr = from_blob(blob, dtype, shape)
            if arr.ndim == 0 or arr.shape[0] != len(ids):
                raise StoredValueError(
                    f"stored outputs of shape {list(arr.shape)} do not match {len(ids)} ids"
                )
            arrays.append(arr)
        source = row[7] if row[7] in ("inputs", "targets", "tokens") else "targets"
        return ModelOutputs(ids, arrays[0], arrays[1], str(source))
