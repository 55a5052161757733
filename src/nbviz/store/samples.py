"""Read queries on ``samples`` and ``captures``: the inputs behind the ids, and one
sample's activations through the layers."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from nbviz.store.arrays import from_blob
from nbviz.store.columns import frame, int_array, json_value, nan
from nbviz.store.errors import StoredValueError
from nbviz.store.query import ReaderBase

__all__ = ["SampleQueries"]

_CAPTURE_COLUMNS = ["step", "position", "layer", "type", "shape", "mean", "std", "min", "max"]
_CAPTURE_COLUMNS += ["zero_frac", "nonfinite", "n_units", "note", "units", "maps"]


class SampleQueries(ReaderBase):
    """Stored samples (thumbnails, arrays, text) and per-sample captures."""

    def sample_ids(self, split: str = "val") -> np.ndarray:
        """Sorted ids of the stored samples of a split (int64)."""
        rows = self._q("SELECT id FROM samples WHERE split = ? ORDER BY id", (split,))
        return int_array(r[0] for r in rows)

    def samples(self, ids: Sequence[int] | None = None, split: str = "val") -> pd.DataFrame:
        """Samples ``[id, label, kind, payload, dtype, shape, text]``.

        ``ids=None``: every sample of the split, by id; otherwise those ids in
        the order given (a missing id raises KeyError naming it). ``label`` is
        a nullable Int64 column; ``payload`` holds PNG bytes for images and raw
        array bytes (see :func:`nbviz.store.from_blob`) for arrays.
        """
        columns = ("id", "label", "kind", "payload", "dtype", "shape", "text")
        sql = "SELECT id, label, kind, payload, dtype, shape, text FROM samples WHERE split = ?"
        if ids is None:
            rows = self._q(sql + " ORDER BY id", (split,))
        else:
            wanted = [int(i) for i in ids]
            found = {
                r[0]: r
                for r in self._q(
                    sql + " AND id IN (SELECT value FROM json_each(?))",
                    (split, json.dumps(wanted)),
                )
            }
            missing = [i for i in wanted if i not in found]
            if missing:
                more = f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""
                raise KeyError(
                    f"no {split} samples with ids {missing[:10]}{more}; "
                    f"{len(self.sample_ids(split))} {split} samples are stored"
                )
            rows = [found[i] for i in wanted]
        out = frame(rows, columns, "iisoooo")
        out["label"] = pd.array(list(out["label"]), dtype="Int64")
        return out

    def captured_ids(self, split: str = "val") -> np.ndarray:
        """Sorted ids of the samples with a recorded capture (``run.capture``) in a split."""
        rows = self._q("SELECT DISTINCT id FROM captures WHERE split = ? ORDER BY id", (split,))
        return int_array(r[0] for r in rows)

    def capture_steps(self, id: int, split: str = "val") -> np.ndarray:
        """Sorted steps at which sample ``id`` of ``split`` was captured (int64; may be empty)."""
        rows = self._q(
            "SELECT DISTINCT step FROM captures WHERE split = ? AND id = ? ORDER BY step",
            (split, int(id)),
        )
        return int_array(r[0] for r in rows)

    def captures(self, id: int, split: str = "val", step: int | None = None) -> pd.DataFrame:
        """One sample's recorded activations, one row per layer in forward order.

        Columns: step, position, layer, type, shape (list), mean, std, min, max,
        zero_frac, nonfinite, n_units, note, ``units`` (float32 array of per-unit
        means, or None) and ``maps`` (float32 ``(channels, H, W)`` feature maps of
        a spatial output, or None). ``step=None``: the latest capture of the
        sample; otherwise the latest at or before ``step``. No capture: an empty frame.
        """
        steps = self.capture_steps(id, split)
        if step is not None:
            steps = steps[steps <= int(step)]
        if not len(steps):
            return pd.DataFrame({c: [] for c in _CAPTURE_COLUMNS})
        rows = self._q(
            "SELECT position, layer, type, summary, units, maps, maps_shape FROM captures "
            "WHERE split = ? AND id = ? AND step = ? ORDER BY position",
            (split, int(id), int(steps[-1])),
        )
        out = []
        for position, layer, type_, summary, units, maps, maps_shape in rows:
            info = json_value(summary)
            if not isinstance(info, dict):
                raise StoredValueError(
                    f"a capture's summary is {type(info).__name__}, not an object"
                )
            u = None if units is None else from_blob(units, "<f4", [len(units) // 4]).copy()
            m = None
            if maps is not None:
                m = from_blob(maps, "<f2", maps_shape).astype(np.float32)
            out.append(
                [int(steps[-1]), int(position), layer, type_ or "", list(info.get("shape", []))]
                + [nan(info.get(k)) for k in ("mean", "std", "min", "max", "zero_frac")]
                + [int(info.get("nonfinite", 0)), int(info.get("n_units", 0))]
                + [str(info.get("note", "")), u, m]
            )
        return pd.DataFrame(out, columns=_CAPTURE_COLUMNS)
