"""SQL rows into numpy columns and pandas frames, NULL handled the store's way.

SQLite keeps a NaN REAL as NULL: a float column turns NULL back into NaN, an
int column with NULLs becomes pandas' nullable ``Int64``, and histogram tallies
count NULL as 0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import chain, islice
from typing import Any

import numpy as np
import pandas as pd

from nbviz.store.arrays import from_blob
from nbviz.store.connection import MAX_STEP
from nbviz.store.errors import StoredValueError

__all__ = [
    "floats",
    "frame",
    "int64_blob",
    "int_array",
    "ints",
    "json_value",
    "nan",
    "nz_ints",
    "table_columns",
]


def json_value(text: Any) -> Any:
    """Stored JSON text decoded; StoredValueError when it is not JSON text."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        shown = repr(text) if len(repr(text)) < 60 else repr(text)[:57] + "..."
        raise StoredValueError(f"{shown} is not JSON text ({exc})") from None


def int_array(values: Any) -> np.ndarray:
    """An int64 array of stored steps, ids or counts, each in ``0..2**53 - 1`` (what nbviz
    writes); StoredValueError for anything else, so that a crafted -3 or 2**62 is
    refused where it is read instead of reaching a view as a step it cannot show."""
    values = list(values)
    if not set(map(type, values)) <= {int}:
        bad = next(v for v in values if type(v) is not int)
        raise StoredValueError(f"a stored step or id is {bad!r}, not an integer")
    try:
        out = np.array(values, dtype=np.int64)
    except OverflowError as exc:
        raise StoredValueError(f"a stored integer does not fit int64 ({exc})") from None
    if out.size and (out.min() < 0 or out.max() > MAX_STEP):
        bad = int(out.min()) if out.min() < 0 else int(out.max())
        raise StoredValueError(
            f"a stored step or id is {bad}, outside 0..2**53 - 1 (nbviz writes none there)"
        )
    return out


def _numbers(values: Sequence[Any], kinds: frozenset[type], what: str) -> None:
    """StoredValueError unless every value is None or of one of ``kinds`` (a C-speed check)."""
    if not set(map(type, values)) <= kinds:
        bad = next(v for v in values if v is not None and type(v) not in kinds)
        kind = "not a whole number" if what == "integer" and isinstance(bad, float) else ""
        raise StoredValueError(f"a stored {what} is {bad!r}, {kind or 'not a number'}")


_INT = frozenset({int, type(None)})
_NUMBER = frozenset({int, float, type(None)})


def floats(values: Sequence[Any]) -> np.ndarray:
    """float64 column; SQL NULL (a NaN on the way in) becomes NaN again."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        _numbers(values, _NUMBER, "number")
        raise


def ints(values: Sequence[Any]) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """int64 column, or a nullable Int64 one where some values are NULL."""
    _numbers(values, _INT, "integer")
    try:
        return np.array(values, dtype=np.int64)
    except TypeError:
        return pd.array(list(values), dtype="Int64")
    except OverflowError as exc:
        raise StoredValueError(f"a stored integer does not fit int64 ({exc})") from None


def nz_ints(values: Sequence[Any]) -> np.ndarray:
    """int64 column where NULL counts as 0 (histogram tallies)."""
    _numbers(values, _INT, "count")
    return np.array([0 if v is None else v for v in values], dtype=np.int64)


def nan(value: float | None) -> float:
    """A float, NULL read as NaN."""
    if value is None:
        return float("nan")
    if type(value) not in (int, float):
        raise StoredValueError(f"a stored number is {value!r}")
    return float(value)


def _column(values: Sequence[Any], kind: str) -> Any:
    if kind == "i":
        return ints(values)
    if kind == "f":
        return floats(values)
    if kind == "j":
        return [None if v is None else json_value(v) for v in values]
    return list(values)  # text (pandas picks its string dtype), bytes, objects


# integers a float64 holds exactly: a column of them is read through one float64 array
_EXACT = float(2**53)
# fewer rows than this are converted column by column (as quick)
_MANY = 32
# the types a column of each kind may hold to be read in one pass; any other
# (text, bytes: float64 would parse '7' as 7.0 and 'nan' as NaN) is left to the
# column's own reading, which decides as it does for a few rows
_ONE_PASS = {"i": _INT, "f": _NUMBER}


def _numeric_columns(rows: list[tuple], kinds: str) -> list[Any] | None:
    """The columns of ``rows`` (ints and floats only) through one float64 array, or None.

    One C pass over the rows instead of a Python pass per column: the cost of a
    long read is SQLite's, not the conversion's. The result is what the column
    by column reading gives; None (read column by column) where a column holds
    a value of another type (a damaged file: text, bytes, a float in an int
    column) or an integer past 2**53.
    """
    n, width = len(rows), len(kinds)
    for j, kind in enumerate(kinds):
        # C-speed type test of column j, read in place from the rows
        if not set(map(type, islice(chain.from_iterable(rows), j, None, width))) <= _ONE_PASS[kind]:
            return None
    try:
        flat = np.fromiter(chain.from_iterable(rows), np.float64, n * width)
    except (TypeError, ValueError):  # rows of another width than kinds
        return None
    table = flat.reshape(n, width)
    out: list[Any] = []
    for j, kind in enumerate(kinds):
        col = np.ascontiguousarray(table[:, j])
        if kind == "f":
            out.append(col)
            continue
        null = np.isnan(col)
        known = np.where(null, 0.0, col)
        if (np.abs(known) > _EXACT).any():
            return None
        whole = known.astype(np.int64)
        out.append(pd.arrays.IntegerArray(whole, null) if null.any() else whole)
    return out


def frame(rows: list[tuple], columns: Sequence[str], kinds: str) -> pd.DataFrame:
    """A frame of ``rows``; ``kinds`` has a letter per column.

    ``i``: int (nullable where NULL), ``f``: float (NULL -> NaN), ``j``: JSON text
    decoded, ``s``/``o``: as stored (text, bytes). Many rows of ints and floats
    are converted in one pass, to what column by column gives at any row count:
    an int column holding text raises StoredValueError, even text such as '7' or
    'nan' (SQLite keeps text as text in a column without numeric affinity, and
    'nan' in any column).
    """
    return pd.DataFrame(dict(zip(columns, table_columns(rows, kinds))), copy=False)


def table_columns(rows: list[tuple], kinds: str) -> list[Any]:
    """The columns of ``rows`` as :func:`frame` makes them (``kinds``: a letter per column)."""
    if len(rows) >= _MANY and set(kinds) <= set(_ONE_PASS):
        fast = _numeric_columns(rows, kinds)
        if fast is not None:
            return fast
    cols = list(zip(*rows)) if rows else [() for _ in kinds]
    return [_column(col, k) for col, k in zip(cols, kinds)]


def int64_blob(data: bytes) -> np.ndarray:
    """A stored little-endian int64 blob (ids, histogram counts) as a 1-d array."""
    return from_blob(data, "<i8", json.dumps([len(data) // 8]))
