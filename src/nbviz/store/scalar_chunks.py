"""Scalars packed in blocks, so that a zoom reads a handful of rows whatever the run's length.

Two tables (schema 8), kept by the writer thread in the transaction that wrote the
rows they pack (a reader never sees one without the other):

- ``scalar_chunks``: a scalar's rows as logged, one row per :data:`CHUNK_STEPS`
  steps (``chunk = step // CHUNK_STEPS``): ``points`` is :data:`POINT_DTYPE`
  records, each step's offset from the chunk's first step (uint16) and its
  value (float64, NaN and +-Inf as logged), little-endian, packed, sorted by step.
- ``scalar_bucket_chunks``: the ``scalar_buckets`` of one level packed
  :data:`BUCKETS_PER_CHUNK` to a row (``chunk = bucket // BUCKETS_PER_CHUNK``):
  ``buckets`` is :data:`BUCKET_DTYPE` records (a missing minimum or maximum is
  NaN, a missing step -1), sorted by bucket.

A chunk holds no row that the table it packs does not hold: only the steps (or
buckets) a commit touched are read back from that table and put in place of the
chunk's own, so a row written again (``run.log(..., overwrite=True)``), a step
logged out of order and a run still being written are packed as the table has
them, and the work per commit follows what it wrote, not the run's length. A
chunk left empty is deleted.

What they cost: 10 bytes per logged step and about 3.7 per step for the buckets
of all levels (one record of 56 bytes per 16 steps, a sixteenth of that per level
above), per scalar. A run written before schema 8 has them built when a writer
migrates it (:func:`rebuild_chunks`); read-only, such a run is read from its rows.
Never pickled: numpy ``tobytes``/``frombuffer`` with the explicit dtypes below.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from nbviz.store.errors import StoredValueError
from nbviz.store.tables import LEVEL_WIDTHS

__all__ = [
    "BUCKETS_PER_CHUNK",
    "BUCKET_DTYPE",
    "CHUNK_STEPS",
    "POINT_DTYPE",
    "bucket_points",
    "bucket_records",
    "rebuild_chunks",
    "refresh_chunks",
    "step_points",
]

#: Steps per ``scalar_chunks`` row (an offset in a chunk fits uint16): 1,280 bytes when
#: every step is logged, so that three rows share a 4 kB page.
CHUNK_STEPS = 128
#: Buckets of one level per ``scalar_bucket_chunks`` row.
BUCKETS_PER_CHUNK = 64
#: One logged step: its offset from the chunk's first step and its value.
POINT_DTYPE = np.dtype([("offset", "<u2"), ("value", "<f8")])
#: One bucket of ``scalar_buckets``: what a chart draws of it and the rows it stands for.
BUCKET_DTYPE = np.dtype(
    [
        ("bucket", "<i8"),
        ("n", "<i8"),
        ("min", "<f8"),
        ("min_step", "<i8"),
        ("max", "<f8"),
        ("max_step", "<i8"),
        ("bad_first", "<i8"),
    ]
)
_FAN = LEVEL_WIDTHS[1] // LEVEL_WIDTHS[0]  # buckets of one level in a bucket of the next
_FINEST = LEVEL_WIDTHS[0]
assert CHUNK_STEPS % _FINEST == 0 and CHUNK_STEPS <= 1 << 16

# -- reading ------------------------------------------------------------------------------

#: A scalar's chunks over chunks ?2..?3, with the nearest chunk before and after them
#: (the rows beside a window), in one statement.
STEP_CHUNKS_SQL = (
    "SELECT * FROM (SELECT chunk, points FROM scalar_chunks WHERE name = ?1 AND chunk < ?2 "
    "ORDER BY chunk DESC LIMIT 1) "
    "UNION ALL SELECT * FROM (SELECT chunk, points FROM scalar_chunks WHERE name = ?1 "
    "AND chunk BETWEEN ?2 AND ?3 ORDER BY chunk) "
    "UNION ALL SELECT * FROM (SELECT chunk, points FROM scalar_chunks WHERE name = ?1 "
    "AND chunk > ?3 ORDER BY chunk LIMIT 1)"
)
#: A scalar's bucket chunks of level ?2 over chunks ?3..?4.
BUCKET_CHUNKS_SQL = (
    "SELECT buckets FROM scalar_bucket_chunks WHERE name = ?1 AND level = ?2 "
    "AND chunk BETWEEN ?3 AND ?4 ORDER BY chunk"
)


def _records(blobs: list[Any], dtype: np.dtype, what: str) -> np.ndarray:
    """Stored chunks' records, in order, as one array (the bytes joined: no copy per field)."""
    for blob in blobs:
        if not isinstance(blob, bytes) or len(blob) % dtype.itemsize:
            size = len(blob) if isinstance(blob, bytes) else "?"
            raise StoredValueError(
                f"a stored {what} chunk is {type(blob).__name__} of {size} bytes, not whole "
                f"{dtype.itemsize}-byte records"
            )
    return np.frombuffer(b"".join(blobs), dtype=dtype)


def step_points(
    rows: list[tuple], lo: int, hi: int, edges: bool
) -> tuple[int, np.ndarray, np.ndarray]:
    """``(rows in lo..hi, steps int64, values float64)`` from ``STEP_CHUNKS_SQL``'s rows:
    the steps in ``lo..hi``, with ``edges`` also the one before and the one after."""
    if not rows:
        return 0, np.zeros(0, np.int64), np.zeros(0, np.float64)
    chunks, blobs = zip(*rows)
    if any(type(c) is not int for c in chunks):
        bad = next(c for c in chunks if type(c) is not int)
        raise StoredValueError(f"a stored scalar chunk is numbered {bad!r}, not an integer")
    rec = _records(list(blobs), POINT_DTYPE, "scalar")
    sizes = [len(b) // POINT_DTYPE.itemsize for b in blobs]
    s = rec["offset"].astype(np.int64) + np.repeat(np.array(chunks, np.int64) * CHUNK_STEPS, sizes)
    v = rec["value"].astype(np.float64)
    if len(s) > 1 and not (np.diff(s) > 0).all():  # only a file changed by something else
        s, at = np.unique(s, return_index=True)
        v = v[at]
    first, end = np.searchsorted(s, lo), np.searchsorted(s, hi, side="right")
    inside = int(end - first)
    if edges:
        first, end = max(first - 1, 0), min(end + 1, len(s))
    return inside, s[first:end], v[first:end]


def bucket_records(blobs: list[tuple], first: int, last: int) -> np.ndarray:
    """The :data:`BUCKET_DTYPE` records of buckets ``first..last`` from ``BUCKET_CHUNKS_SQL``."""
    rec = _records([b for (b,) in blobs], BUCKET_DTYPE, "bucket")
    at = rec["bucket"]
    return rec[(at >= first) & (at <= last)]


def bucket_points(rec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What a chart draws of buckets: each one's minimum and maximum at the steps they were
    reached (one point where they share a step), and a NaN at its first non-finite step,
    sorted by step: the points of ``window_sql.BUCKET_POINTS``, rule for rule."""
    mins, maxs = rec["min"], rec["max"]
    has_min = ~np.isnan(mins)
    has_max = ~np.isnan(maxs) & (rec["max_step"] != rec["min_step"])
    bad = rec["bad_first"] >= 0
    steps = np.concatenate(
        [rec["min_step"][has_min], rec["max_step"][has_max], rec["bad_first"][bad]]
    )
    values = np.concatenate([mins[has_min], maxs[has_max], np.full(int(bad.sum()), np.nan)])
    order = np.argsort(steps, kind="stable")
    return steps[order].astype(np.int64, copy=False), values[order].astype(np.float64, copy=False)


# -- writing ------------------------------------------------------------------------------


def _float(v: Any) -> float:
    return float(v) if type(v) in (int, float) else np.nan  # NULL: a NaN as SQLite keeps it


def _int(v: Any) -> int:
    return v if type(v) is int else -1


def _groups(ids: Iterable[int], per: int) -> dict[int, tuple[int, int]]:
    """Ids grouped by ``id // per``: each group's smallest and largest id."""
    out: dict[int, tuple[int, int]] = {}
    for i in ids:
        g = i // per
        lo, hi = out.get(g, (i, i))
        out[g] = (min(lo, i), max(hi, i))
    return out


def _put(
    conn: sqlite3.Connection,
    table: str,
    key: dict[str, Any],
    column: str,
    old: Any,
    new: np.ndarray,
    field: str,
    span: tuple[int, int],
) -> None:
    """Store ``new`` (records whose ``field`` lies in ``span``) in place of the ones of
    ``old`` there, as the row ``key`` of ``table``; delete the row when nothing is left."""
    blob, n = new.tobytes(), len(new)
    if old is not None:  # the records before span, the new ones, the records after it
        at = _records([old], new.dtype, table)[field]
        size = new.dtype.itemsize
        first, end = np.searchsorted(at, span[0]), np.searchsorted(at, span[1], side="right")
        blob = b"".join((old[: first * size], blob, old[end * size :]))
        n += len(at) - int(end - first)
    if not n:
        where = " AND ".join(f"{k} = ?" for k in key)
        conn.execute(f"DELETE FROM {table} WHERE {where}", tuple(key.values()))
        return
    conn.execute(
        f"INSERT OR REPLACE INTO {table}({', '.join(key)}, n, {column}) "
        f"VALUES ({', '.join('?' * (len(key) + 2))})",
        (*key.values(), n, blob),
    )


def _refresh_steps(conn: sqlite3.Connection, name: str, chunk: int, lo: int, hi: int) -> None:
    base = chunk * CHUNK_STEPS
    old = conn.execute(
        "SELECT points FROM scalar_chunks WHERE name = ? AND chunk = ?", (name, chunk)
    ).fetchone()
    rows = conn.execute(
        "SELECT step, value FROM scalars WHERE name = ? AND step BETWEEN ? AND ? ORDER BY step",
        (name, lo, hi),
    ).fetchall()
    rows = [r for r in rows if type(r[0]) is int]
    new = np.empty(len(rows), POINT_DTYPE)
    if rows:
        new["offset"] = [s - base for s, _ in rows]
        new["value"] = [_float(v) for _, v in rows]
    key = {"name": name, "chunk": chunk}
    _put(
        conn, "scalar_chunks", key, "points", old and old[0], new, "offset", (lo - base, hi - base)
    )


def _refresh_buckets(
    conn: sqlite3.Connection, name: str, level: int, chunk: int, lo: int, hi: int
) -> None:
    old = conn.execute(
        "SELECT buckets FROM scalar_bucket_chunks WHERE name = ? AND level = ? AND chunk = ?",
        (name, level, chunk),
    ).fetchone()
    rows = conn.execute(
        "SELECT bucket, n, min, min_step, max, max_step, bad_first FROM scalar_buckets "
        "WHERE name = ? AND level = ? AND bucket BETWEEN ? AND ? ORDER BY bucket",
        (name, level, lo, hi),
    ).fetchall()
    new = np.array(
        [
            (b, n, _float(mn), _int(ms), _float(mx), _int(xs), _int(bf))
            for b, n, mn, ms, mx, xs, bf in rows
        ],
        dtype=BUCKET_DTYPE,
    )
    key = {"name": name, "level": level, "chunk": chunk}
    _put(conn, "scalar_bucket_chunks", key, "buckets", old and old[0], new, "bucket", (lo, hi))


def refresh_chunks(conn: sqlite3.Connection, finest: Mapping[str, Iterable[int]]) -> None:
    """Bring the chunks of each scalar up to date with its finest buckets ``finest`` touched
    (``step // 16``; after ``scalar_buckets`` is brought up to date)."""
    for name, ids in finest.items():
        if not isinstance(name, str):
            continue
        # a whole float step is stored as an integer (the column's affinity): its bucket too
        ids = {int(i) for i in ids if type(i) in (int, float) and math.isfinite(i)}
        per = CHUNK_STEPS // _FINEST
        for chunk, (lo, hi) in _groups(ids, per).items():
            _refresh_steps(conn, name, chunk, lo * _FINEST, hi * _FINEST + _FINEST - 1)
        for level in range(len(LEVEL_WIDTHS)):
            if level:
                ids = {i // _FAN for i in ids}
            for chunk, (lo, hi) in _groups(ids, BUCKETS_PER_CHUNK).items():
                _refresh_buckets(conn, name, level, chunk, lo, hi)


def rebuild_chunks(conn: sqlite3.Connection) -> None:
    """Pack every scalar's rows and buckets anew (a run migrated from schema 7)."""
    conn.execute("DELETE FROM scalar_chunks")
    conn.execute("DELETE FROM scalar_bucket_chunks")
    names = [r[0] for r in conn.execute("SELECT DISTINCT name FROM scalars").fetchall()]
    for name in names:
        if not isinstance(name, str):
            continue
        finest = conn.execute(
            f"SELECT DISTINCT CASE WHEN step >= 0 THEN step / {_FINEST} "
            f"ELSE (step + 1) / {_FINEST} - 1 END FROM scalars WHERE name = ? "
            "AND typeof(step) = 'integer'",
            (name,),
        ).fetchall()
        refresh_chunks(conn, {name: {r[0] for r in finest}})
