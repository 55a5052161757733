"""Rows as ``Writer.insert`` takes them, turned into the rows schema 3 stores.

Runs in the writer thread, never on the training thread. Statistics,
histograms and per-unit values name their ``(layer, signal)`` pair by the
integer ``series.id`` (created at its first row), and a histogram's int64
counts are stored at the narrowest width that holds them: most bins of a
histogram of a few thousand values fit in two bytes, a quarter of int64's eight.
:func:`counts_array` reads them back as int64, whatever the width.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from nbviz.store.errors import StoredValueError
from nbviz.store.tables import STORED

__all__ = ["SeriesIds", "counts_array", "encode_rows", "pack_counts"]

_WIDTHS = {1: "u1", 2: "<u2", 4: "<u4", 8: "<i8"}


def pack_counts(blob: Any) -> tuple[bytes, int]:
    """``(stored bytes, bins)`` of little-endian int64 histogram counts.

    Counts that are all in 0..255 take one byte each, in 0..65535 two, in
    0..2**32-1 four; anything else (a negative count, a blob that is not whole
    int64s) is kept as it came.
    """
    data = bytes(blob)
    if len(data) % 8:
        return data, len(data) // 8 or 1  # not int64s: kept, and refused when read
    counts = np.frombuffer(data, dtype="<i8")
    if len(counts) == 0:
        return data, 0
    low, high = int(counts.min()), int(counts.max())
    if low < 0:
        return data, len(counts)
    for width in (1, 2, 4):
        if high < 1 << (8 * width):
            return counts.astype(_WIDTHS[width]).tobytes(), len(counts)
    return data, len(counts)


def counts_array(blob: Any, bins: Any) -> np.ndarray:
    """Stored histogram counts as a read-only int64 array; StoredValueError if they do not
    decode (a width other than 1, 2, 4 or 8 bytes per bin)."""
    if not isinstance(blob, bytes) or type(bins) is not int or bins < 0:
        raise StoredValueError(f"histogram counts of {bins!r} bins in {type(blob).__name__}")
    if bins == 0:
        if blob:
            raise StoredValueError(f"histogram counts of 0 bins hold {len(blob)} bytes")
        return np.zeros(0, dtype=np.int64)
    width, rest = divmod(len(blob), bins)
    if rest or width not in _WIDTHS:
        raise StoredValueError(f"histogram counts of {bins} bins hold {len(blob)} bytes")
    out = np.frombuffer(blob, dtype=_WIDTHS[width])
    if width != 8:
        out = out.astype(np.int64)
        out.flags.writeable = False
    return out


class SeriesIds:
    """``series.id`` of each ``(layer, signal)``, created at first use (writer thread only)."""

    def __init__(self) -> None:
        self._ids: dict[tuple[Any, Any], int] = {}

    def clear(self) -> None:
        """Forget every id (a transaction that created some was rolled back)."""
        self._ids.clear()

    def get(self, conn: sqlite3.Connection, layer: Any, signal: Any) -> int:
        key = (layer, signal)
        sid = self._ids.get(key)
        if sid is None:
            row = conn.execute(
                "SELECT id FROM series WHERE layer = ? AND signal = ?", key
            ).fetchone()
            if row is None:  # a NULL name fails here, as a NOT NULL constraint
                sid = conn.execute("INSERT INTO series(layer, signal) VALUES (?, ?)", key).lastrowid
            else:
                sid = row[0]
            sid = self._ids[key] = int(sid)
        return sid


def encode_rows(
    conn: sqlite3.Connection, ids: SeriesIds, table: str, rows: Sequence[Sequence[Any]]
) -> list[tuple]:
    """``rows`` of ``table`` in :data:`TABLES` order, as stored (:data:`STORED` order)."""
    if table not in STORED:
        return rows  # type: ignore[return-value]
    get = ids.get
    if table == "layer_stats":
        return [(r[0], get(conn, r[1], r[2]), *r[3:]) for r in rows]
    if table == "histograms":
        out = []
        for step, layer, signal, lo, hi, counts, under, over, nonfinite in rows:
            packed, bins = pack_counts(counts)
            out.append(
                (step, get(conn, layer, signal), lo, hi, packed, bins, under, over, nonfinite)
            )
        return out
    return [(r[0], get(conn, r[1], r[2]), r[3]) for r in rows]  # unit_stats
