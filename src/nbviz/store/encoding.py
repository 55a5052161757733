"""Rows as ``Writer.insert`` takes them, turned into the rows schema 3 stores.

Runs in the writer thread, never on the training thread. Statistics,
histograms and per-unit values name their ``(layer, signal)`` pair by the
integer ``series.id`` (created at its first row), and a histogram's int64
counts are stored in as many bits each as the largest needs: counts of a few
thousand values take 10 to 13 bits, not 64. :func:`counts_array` reads them
back as int64.

A histogram's own bins (``histogram_bins``, schema 6: unequal bins as they were
logged) are two little-endian float64 blobs, written by :func:`bins_blobs` and
read back, checked, by :func:`bins_arrays`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from nbviz.store.errors import StoredValueError
from nbviz.store.tables import STORED

__all__ = [
    "SeriesIds",
    "bins_arrays",
    "bins_blobs",
    "counts_array",
    "counts_check",
    "counts_rows",
    "encode_rows",
    "pack_counts",
    "pack_counts_rows",
]


def _pack_group(counts: np.ndarray, bits: int) -> np.ndarray:
    """Rows of uint64 ``counts`` as ``bits``-bit big-endian fields, one packed row each."""
    n, bins = counts.shape
    as_bits = np.unpackbits(counts.astype(">u8").view(np.uint8).reshape(n, bins, 8), axis=2)
    return np.packbits(as_bits[:, :, 64 - bits :].reshape(n, bins * bits), axis=1)


def _bits(counts: np.ndarray) -> np.ndarray:
    """Bits each row of int64 ``counts`` needs: 64 where a count is negative."""
    # the largest count's bit length, at least 1 (a row of zeros takes one bit each)
    bits = np.array([max(1, t.bit_length()) for t in counts.max(axis=1).tolist()], np.int64)
    return np.where(counts.min(axis=1) < 0, 64, bits)


def pack_counts_rows(blobs: Sequence[Any]) -> list[tuple[bytes, int]]:
    """``(stored bytes, bins)`` of each little-endian int64 histogram counts blob.

    Stored: one byte giving the bits per count (the fewest that hold the
    largest; 64 for a negative count, kept in two's complement), then the
    counts as fields of that many bits, most significant first. Counts of up
    to 1000 take 10 bits, against int64's 64. A blob that is not whole int64s
    is kept as it came (and refused when read). Rows of one bin count are
    packed together, without a Python loop per count.
    """
    out: list[tuple[bytes, int]] = [(b"", 0)] * len(blobs)
    by_bins: dict[int, list[int]] = {}
    datas = [bytes(b) for b in blobs]
    for i, data in enumerate(datas):
        if len(data) % 8 or not data:
            out[i] = (data, len(data) // 8)
        else:
            by_bins.setdefault(len(data) // 8, []).append(i)
    for bins, rows in by_bins.items():
        counts = np.frombuffer(b"".join(datas[i] for i in rows), dtype="<i8").reshape(-1, bins)
        bits = _bits(counts)
        for b in np.unique(bits):
            sel = np.flatnonzero(bits == b)
            packed = _pack_group(counts[sel].view(np.uint64), int(b))
            head = bytes([int(b)])
            for j, row in zip(sel, packed):
                out[rows[j]] = (head + row.tobytes(), bins)
    return out


def pack_counts(blob: Any) -> tuple[bytes, int]:
    """``(stored bytes, bins)`` of one int64 counts blob (see :func:`pack_counts_rows`)."""
    return pack_counts_rows([blob])[0]


def _unpack_group(packed: np.ndarray, bins: int, bits: int) -> np.ndarray:
    """Rows of ``bits``-bit fields (uint8 [n, bytes]) as int64 [n, bins]."""
    n = len(packed)
    fields = np.unpackbits(packed, axis=1, count=bins * bits).reshape(n, bins, bits)
    full = np.zeros((n, bins, 64), dtype=np.uint8)
    full[:, :, 64 - bits :] = fields
    return np.packbits(full, axis=2).view(">u8").reshape(n, bins).astype(np.int64)


def counts_rows(blobs: Sequence[Any], bins: Sequence[Any]) -> list[np.ndarray]:
    """:func:`counts_array` of each row, rows of one layout decoded together."""
    out: list[np.ndarray | None] = [None] * len(blobs)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (blob, n) in enumerate(zip(blobs, bins)):
        counts_check(blob, n)
        if n == 0:
            out[i] = np.zeros(0, dtype=np.int64)
        else:
            groups.setdefault((n, blob[0]), []).append(i)
    for (n, bits), rows in groups.items():
        packed = np.frombuffer(b"".join(blobs[i][1:] for i in rows), dtype=np.uint8)
        matrix = _unpack_group(packed.reshape(len(rows), -1), n, bits)
        matrix.flags.writeable = False
        for j, i in enumerate(rows):
            out[i] = matrix[j]
    return out  # type: ignore[return-value]


def counts_check(blob: Any, bins: Any) -> None:
    """StoredValueError unless ``blob`` holds ``bins`` packed counts (see pack_counts_rows)."""
    if not isinstance(blob, bytes) or type(bins) is not int or bins < 0:
        raise StoredValueError(f"histogram counts of {bins!r} bins in {type(blob).__name__}")
    if bins == 0:
        if blob:
            raise StoredValueError(f"histogram counts of 0 bins hold {len(blob)} bytes")
        return
    bits = blob[0] if blob else 0
    if not 1 <= bits <= 64 or len(blob) != 1 + (bins * bits + 7) // 8:
        raise StoredValueError(f"histogram counts of {bins} bins hold {len(blob)} bytes")


def counts_array(blob: Any, bins: Any) -> np.ndarray:
    """Stored histogram counts as a read-only int64 array; StoredValueError if they do not
    decode (a header or a length that does not fit the bin count)."""
    return counts_rows([blob], [bins])[0]


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
        packed = pack_counts_rows([r[5] for r in rows])
        return [
            (r[0], get(conn, r[1], r[2]), r[3], r[4], p, bins, r[6], r[7], r[8])
            for r, (p, bins) in zip(rows, packed)
        ]
    if table == "histogram_bins":
        return [(r[0], get(conn, r[1], r[2]), r[3], r[4]) for r in rows]
    return [(r[0], get(conn, r[1], r[2]), r[3]) for r in rows]  # unit_stats


def _bins_fault(edges: np.ndarray, counts: np.ndarray) -> str | None:
    """What is wrong with ``(edges, counts)`` as a histogram's bins, or None."""
    if edges.ndim != 1 or counts.ndim != 1 or len(counts) == 0:
        return f"edges of shape {edges.shape} and counts of shape {counts.shape}"
    if len(edges) != len(counts) + 1:
        return f"{len(edges)} edges for {len(counts)} counts (expected n + 1 edges for n counts)"
    if not np.isfinite(edges).all():
        return f"a non-finite edge ({float(edges[~np.isfinite(edges)][0])})"
    drops = np.flatnonzero(np.diff(edges) < 0)
    if len(drops):
        i = int(drops[0])
        before, after = float(edges[i]), float(edges[i + 1])
        return f"edges that decrease (edge {i + 1} is {after} after {before})"
    if not np.isfinite(counts).all() or (counts < 0).any():
        return "a count that is negative or not finite"
    return None


def bins_blobs(edges: Any, counts: Any) -> tuple[bytes, bytes]:
    """``(edges, counts)`` blobs of a ``histogram_bins`` row: n + 1 finite, non-decreasing
    edges and n finite counts >= 0, as little-endian float64; ValueError naming the fault."""
    e = np.asarray(edges, dtype=np.float64)
    c = np.asarray(counts, dtype=np.float64)
    fault = _bins_fault(e, c)
    if fault is not None:
        raise ValueError(f"histogram bins: {fault}")
    return e.astype("<f8").tobytes(), c.astype("<f8").tobytes()


def bins_arrays(edges: Any, counts: Any) -> tuple[np.ndarray, np.ndarray]:
    """A ``histogram_bins`` row's blobs as ``(edges, counts)``: float64 edges, and counts
    as int64 where every count is a whole number (else float64).

    StoredValueError naming the fault where the blobs are not what :func:`bins_blobs`
    writes (lengths that are not n + 1 and n float64 values, a NaN or infinite
    edge, edges that decrease, a negative or non-finite count).
    """
    if not isinstance(edges, bytes) or not isinstance(counts, bytes):
        raise StoredValueError(
            f"edges in {type(edges).__name__} and counts in {type(counts).__name__}, not bytes"
        )
    if len(edges) % 8 or len(counts) % 8 or len(edges) != len(counts) + 8 or not counts:
        raise StoredValueError(
            f"{len(edges)} bytes of edges and {len(counts)} bytes of counts; expected "
            "n + 1 and n little-endian float64 values"
        )
    e = np.frombuffer(edges, dtype="<f8").astype(np.float64)
    c = np.frombuffer(counts, dtype="<f8").astype(np.float64)
    fault = _bins_fault(e, c)
    if fault is not None:
        raise StoredValueError(fault)
    if np.all(c == np.round(c)) and np.all(c < 2**53):
        return e, c.astype(np.int64)
    return e, c
