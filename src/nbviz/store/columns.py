"""SQL rows into numpy columns and pandas frames, NULL handled the store's way.

SQLite keeps a NaN REAL as NULL: a float column turns NULL back into NaN, an
int column with NULLs becomes pandas' nullable ``Int64``, and histogram tallies
count NULL as 0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nbviz.store.arrays import from_blob

__all__ = ["floats", "frame", "int64_blob", "ints", "nan", "nz_ints"]


def floats(values: Sequence[Any]) -> np.ndarray:
    """float64 column; SQL NULL (a NaN on the way in) becomes NaN again."""
    return np.array(values, dtype=np.float64)


def ints(values: Sequence[Any]) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """int64 column, or a nullable Int64 one where some values are NULL."""
    try:
        return np.array(values, dtype=np.int64)
    except TypeError:
        return pd.array(list(values), dtype="Int64")


def nz_ints(values: Sequence[Any]) -> np.ndarray:
    """int64 column where NULL counts as 0 (histogram tallies)."""
    return np.array([0 if v is None else v for v in values], dtype=np.int64)


def nan(value: float | None) -> float:
    """A float, NULL read as NaN."""
    return float("nan") if value is None else float(value)


def _column(values: Sequence[Any], kind: str) -> Any:
    if kind == "i":
        return ints(values)
    if kind == "f":
        return floats(values)
    if kind == "j":
        return [None if v is None else json.loads(v) for v in values]
    return list(values)  # text (pandas picks its string dtype), bytes, objects


def frame(rows: list[tuple], columns: Sequence[str], kinds: str) -> pd.DataFrame:
    """A frame of ``rows``; ``kinds`` has a letter per column.

    ``i``: int (nullable where NULL), ``f``: float (NULL -> NaN), ``j``: JSON text
    decoded, ``s``/``o``: as stored (text, bytes).
    """
    cols = list(zip(*rows)) if rows else [() for _ in columns]
    return pd.DataFrame({name: _column(col, k) for name, col, k in zip(columns, cols, kinds)})


def int64_blob(data: bytes) -> np.ndarray:
    """A stored little-endian int64 blob (ids, histogram counts) as a 1-d array."""
    return from_blob(data, "<i8", json.dumps([len(data) // 8]))
