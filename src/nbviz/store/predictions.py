"""Read queries on ``predictions`` and ``probabilities``: what the model said about each sample."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nbviz.store.arrays import from_blob
from nbviz.store.columns import frame, int64_blob, int_array
from nbviz.store.query import MissingStepError, ReaderBase, describe_steps, skip_scan_sql

__all__ = ["PredictionQueries"]

_COLUMNS = ("step", "id", "label", "pred", "loss", "confidence")


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
