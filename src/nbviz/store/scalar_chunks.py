"""Scalars packed in blocks, so that a zoom reads a handful of rows whatever the run's length.

Two tables (schema 8), kept by the writer thread in the transaction that wrote the
rows they pack, so a reader sees them as of the same commit as the rows (a zoom reads
them in two statements: past ``max_points`` after a commit between them, the buckets
read first stand for the window). They are derived data: a chunk that does not decode
is packed again whole from its table, steps outside int64 (kept as REAL) are left out,
and a failure for one scalar leaves its chunks as they were and the others up to date
(the writer says so once, with a RunFileWarning; the rows themselves are stored):

- ``scalar_chunks``: a scalar's rows as logged, one row per :data:`CHUNK_STEPS`
  steps (``chunk = step // CHUNK_STEPS``): ``points`` is :data:`POINT_DTYPE`
  records, each step's offset from the chunk's first step (uint16) and its
  value (float64, NaN and +-Inf as logged), little-endian, packed, sorted by step.
- ``scalar_bucket_chunks``: the ``scalar_buckets`` of one level packed
  :data:`BUCKETS_PER_CHUNK` to a row (``chunk = bucket // BUCKETS_PER_CHUNK``):
  ``buckets`` is :data:`BUCKET_DTYPE` records (a missing minimum or maximum is
  NaN, a missing step -1), sorted by bucket.

A chunk kept up to date holds no row its table does not hold: only the steps (or
buckets) a commit touched are read back from that table and put in place of the
chunk's own, so a row written again (``run.log(..., overwrite=True)``), a step
logged out of order and a run still being written are packed as the table has
them, and the work per commit follows what it wrote, not the run's length: one
statement reads what a commit needs of a scalar's chunks and tables, and the changed
chunks of every scalar are written together. A chunk left empty is deleted.

What they cost: 10 bytes per logged step and about 3.7 per step for the buckets
of all levels (one record of 56 bytes per 16 steps, a sixteenth of that per level
above), per scalar logged every step; a scalar logged every 1000 steps has a bucket
of its own per value at the finer levels (about 285 bytes per value in all). A run
written before schema 8 has them built when a writer migrates it
(:func:`rebuild_chunks`); read-only, such a run is read from its rows.
Never pickled: numpy ``tobytes``/``frombuffer`` with the explicit dtypes below.
"""

from __future__ import annotations

import math
import sqlite3
import struct
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from operator import itemgetter
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
_MAX_ROWS = 1 << 53  # a scalar's rows: one per step, steps in 0..2**53 - 1
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
    """The :data:`BUCKET_DTYPE` records of buckets ``first..last`` from ``BUCKET_CHUNKS_SQL``;
    StoredValueError when a bucket counts rows no run holds (below 0 or above 2**53), so
    that their sum is exact."""
    rec = _records([b for (b,) in blobs], BUCKET_DTYPE, "bucket")
    at = rec["bucket"]
    rec = rec[(at >= first) & (at <= last)]
    n = rec["n"]
    if len(n) and (
        n.min() < 0 or n.max() > _MAX_ROWS or float(n.sum(dtype=np.float64)) > _MAX_ROWS
    ):
        bad = int(n.min()) if n.min() < 0 else int(n.max())
        raise StoredValueError(
            f"a stored bucket chunk counts {bad} rows in a bucket (or more than 2**53 in "
            "all), not 0..2**53"
        )
    return rec


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

_INT64 = (-(1 << 63), (1 << 63) - 1)
#: What a commit reads of one scalar, by kind of row (the first column): 0, the old
#: step chunks of chunks ?..? ; 1, its rows of steps ?..? ; 2, its old bucket chunks of
#: a level over chunks ?..? ; 3, its buckets of a level over buckets ?..? . One statement
#: joins the parts a scalar needs (UNION ALL), so a commit reads each scalar once.
_READ_PARTS = (
    "SELECT 0, -1, chunk, points, NULL, NULL, NULL, NULL, NULL FROM scalar_chunks "
    "WHERE name = ?1 AND chunk BETWEEN ? AND ?",
    "SELECT 1, -1, step, value, NULL, NULL, NULL, NULL, NULL FROM scalars "
    "WHERE name = ?1 AND step BETWEEN ? AND ?",
    "SELECT 2, level, chunk, buckets, NULL, NULL, NULL, NULL, NULL FROM scalar_bucket_chunks "
    "WHERE name = ?1 AND level = ? AND chunk BETWEEN ? AND ?",
    "SELECT 3, level, bucket, n, min, min_step, max, max_step, bad_first FROM scalar_buckets "
    "WHERE name = ?1 AND level = ? AND bucket BETWEEN ? AND ?",
)
_READ_PIECES = 40  # pieces per statement (two SELECTs each; SQLite allows 500 in one)
_REBUILD_IDS = 4096  # finest buckets packed at a time when a run is migrated
_WRITE_ROWS = 150  # rows per multi-row INSERT of chunks (within any SQLite's bind limit)


def _float(v: Any) -> float:
    return float(v) if type(v) in (int, float) else np.nan  # NULL: a NaN as SQLite keeps it


def _int(v: Any) -> int:
    return v if type(v) is int else -1


class _Piece:
    """Chunks ``c0..c1`` of one kind (``level`` -1: the steps, else buckets of that level),
    whose records with keys (steps or buckets) in ``k0..k1`` are read again from their table."""

    __slots__ = ("level", "c0", "c1", "k0", "k1")

    def __init__(self, level: int, c0: int, c1: int, k0: int, k1: int) -> None:
        self.level, self.c0, self.c1, self.k0, self.k1 = level, c0, c1, k0, k1

    @property
    def per(self) -> int:
        return CHUNK_STEPS if self.level < 0 else BUCKETS_PER_CHUNK

    def parts(self) -> list[tuple[str, tuple[int, ...]]]:
        """The ``_READ_PARTS`` that read the piece: its old chunks and its fresh records."""
        if self.level < 0:
            return [(_READ_PARTS[0], (self.c0, self.c1)), (_READ_PARTS[1], (self.k0, self.k1))]
        return [
            (_READ_PARTS[2], (self.level, self.c0, self.c1)),
            (_READ_PARTS[3], (self.level, self.k0, self.k1)),
        ]


def _pieces(level: int, keys: list[int], per: int, width: int) -> list[_Piece]:
    """Sorted ``keys`` (finest buckets for the steps, else buckets of ``level``) as pieces of
    consecutive chunks, each key standing for ``width`` keys of its chunks."""
    out: list[_Piece] = []
    for k in keys:
        c = k * width // per
        if out and c <= out[-1].c1 + 1:
            out[-1].c1, out[-1].k1 = c, k * width + width - 1
        else:
            out.append(_Piece(level, c, c, k * width, k * width + width - 1))
    return out


def _read(
    conn: sqlite3.Connection, name: str, pieces: list[_Piece]
) -> tuple[dict[tuple[int, int], Any], dict[int, list[tuple]]]:
    """The old chunks of ``pieces`` by ``(level, chunk)`` and their fresh rows by level:
    one statement for up to :data:`_READ_PIECES` pieces."""
    old: dict[tuple[int, int], Any] = {}
    fresh: dict[int, list[tuple]] = {}
    for at in range(0, len(pieces), _READ_PIECES):
        sql, params = [], [name]
        for piece in pieces[at : at + _READ_PIECES]:
            for part, args in piece.parts():
                sql.append(part)
                params.extend(args)
        for row in conn.execute(" UNION ALL ".join(sql), params).fetchall():
            if row[0] in (0, 2):
                old[(row[1], row[2])] = row[3]
            else:  # kept whole: the key at [2], then the step's value or the bucket's fields
                fresh.setdefault(row[1], []).append(row)
    return old, fresh


_key_of = itemgetter(2)  # of a row of _READ_PARTS
_POINT = struct.Struct("<Hd")  # POINT_DTYPE, one record
_BUCKET = struct.Struct("<qqdqdqq")  # BUCKET_DTYPE, one record
assert _POINT.size == POINT_DTYPE.itemsize and _BUCKET.size == BUCKET_DTYPE.itemsize


def _key(blob: bytes, level: int, chunk: int, i: int) -> int:
    """The key (step or bucket) of record ``i`` of a stored chunk."""
    if level < 0:
        return chunk * CHUNK_STEPS + struct.unpack_from("<H", blob, i * _POINT.size)[0]
    return struct.unpack_from("<q", blob, i * _BUCKET.size)[0]


def _where(blob: Any, level: int, chunk: int, lo: int, hi: int) -> tuple[int, int] | None:
    """``(first, end)``: the records of a stored chunk whose keys lie in ``lo..hi``; None
    when the chunk is not one the writer made (not whole records, its first or last key
    outside the chunk, or, where ``lo..hi`` falls among them, keys out of order), to be
    packed again whole from its table."""
    size, per = (_POINT.size, CHUNK_STEPS) if level < 0 else (_BUCKET.size, BUCKETS_PER_CHUNK)
    if not isinstance(blob, bytes) or len(blob) % size:
        return None
    n = len(blob) // size
    if not n:
        return 0, 0
    first, last = _key(blob, level, chunk, 0), _key(blob, level, chunk, n - 1)
    if not chunk * per <= first <= last < (chunk + 1) * per or (n > 1 and first == last):
        return None
    if last < lo:  # the common case: steps logged after the chunk's last
        return n, n
    if first > hi:
        return 0, 0
    if n > 1:
        rec = np.frombuffer(blob, POINT_DTYPE if level < 0 else BUCKET_DTYPE)
        keys = rec["offset"].astype(np.int64) + chunk * per if level < 0 else rec["bucket"]
        if (keys[1:] <= keys[:-1]).any():
            return None
        return int(np.searchsorted(keys, lo)), int(np.searchsorted(keys, hi, side="right"))
    return 0, 1


def _pack(level: int, chunk: int, rows: list[tuple]) -> bytes:
    """Rows read from ``scalars`` (steps) or ``scalar_buckets`` as a chunk's records."""
    if level < 0:
        base = chunk * CHUNK_STEPS
        if len(rows) < 16:
            return b"".join(_POINT.pack(r[2] - base, _float(r[3])) for r in rows)
        rec = np.empty(len(rows), POINT_DTYPE)
        rec["offset"] = [r[2] - base for r in rows]
        rec["value"] = [r[3] if type(r[3]) is float else _float(r[3]) for r in rows]
        return rec.tobytes()
    return b"".join(
        _BUCKET.pack(
            b, n if type(n) is int else 0, _float(mn), _int(ms), _float(mx), _int(xs), _int(bf)
        )
        for _, _, b, n, mn, ms, mx, xs, bf in rows
    )


def _repack(conn: sqlite3.Connection, name: str, pieces: list[_Piece], out: _Writes) -> None:
    """Put in ``out`` the chunks of ``pieces`` as the tables now hold them: each chunk's
    old records outside the piece's keys, the table's inside them (bytes put together:
    a commit that adds steps after a chunk's last appends to it). A chunk that does not
    decode is packed again whole from its table: chunks are derived data."""
    old, fresh = _read(conn, name, pieces)
    where: dict[tuple[int, int], tuple[int, int] | None] = {}
    again: list[_Piece] = []
    for piece in pieces:
        for c in range(piece.c0, piece.c1 + 1):
            if (piece.level, c) in old:
                at = _where(old[(piece.level, c)], piece.level, c, piece.k0, piece.k1)
                if at is None and piece not in again:
                    again.append(piece)
                where[(piece.level, c)] = at
    if again:  # a damaged chunk: its whole span is read again
        for piece in again:
            per = piece.per
            for c in range(piece.c0, piece.c1 + 1):
                if (piece.level, c) in where and where[(piece.level, c)] is None:
                    piece.k0, piece.k1 = min(piece.k0, c * per), max(piece.k1, c * per + per - 1)
        for level, rows in _read(conn, name, again)[1].items():
            fresh.setdefault(level, []).extend(rows)
        for piece in again:
            for c in range(piece.c0, piece.c1 + 1):
                if where.get((piece.level, c)) is not None:
                    at = _where(old[(piece.level, c)], piece.level, c, piece.k0, piece.k1)
                    where[(piece.level, c)] = at
    for piece in pieces:
        k0, k1, per, level = piece.k0, piece.k1, piece.per, piece.level
        # a step the table keeps as REAL (not a whole number within int64) is left out
        rows = [r for r in fresh.get(level, ()) if type(r[2]) is int and k0 <= r[2] <= k1]
        if again:  # read twice: once each
            rows = list({r[2]: r for r in rows}.values())
        rows.sort(key=_key_of)  # as read, in the tables' key order: a pass that checks it
        keys = [r[2] for r in rows]
        size = _POINT.size if level < 0 else _BUCKET.size
        for c in range(piece.c0, piece.c1 + 1):
            part = rows
            if piece.c0 < piece.c1:
                part = rows[bisect_left(keys, c * per) : bisect_left(keys, (c + 1) * per)]
            new = _pack(level, c, part)
            blob = old.get((level, c))
            at = where.get((level, c))
            if at is not None:
                new = b"".join((blob[: at[0] * size], new, blob[at[1] * size :]))
            out.put(name, level, c, blob, new, len(new) // size)


class _Writes:
    """The chunks a commit changes, written together at the end (multi-row statements:
    each statement is a moment the writer thread lets go of Python's lock)."""

    def __init__(self) -> None:
        self.steps: list[tuple] = []
        self.buckets: list[tuple] = []
        self.gone_steps: list[tuple] = []
        self.gone_buckets: list[tuple] = []

    def put(self, name: str, level: int, chunk: int, old: Any, new: bytes, n: int) -> None:
        if new == old:
            return
        if not n:
            if old is not None:
                if level < 0:
                    self.gone_steps.append((name, chunk))
                else:
                    self.gone_buckets.append((name, level, chunk))
        elif level < 0:
            self.steps.append((name, chunk, n, new))
        else:
            self.buckets.append((name, level, chunk, n, new))

    def write(self, conn: sqlite3.Connection) -> None:
        for table, columns, rows in (
            ("scalar_chunks", "name, chunk, n, points", self.steps),
            ("scalar_bucket_chunks", "name, level, chunk, n, buckets", self.buckets),
        ):
            width = columns.count(",") + 1
            one = "(" + ", ".join("?" * width) + ")"
            for at in range(0, len(rows), _WRITE_ROWS):
                part = rows[at : at + _WRITE_ROWS]
                conn.execute(
                    f"INSERT OR REPLACE INTO {table}({columns}) VALUES "
                    + ", ".join([one] * len(part)),
                    [v for row in part for v in row],
                )
        conn.executemany("DELETE FROM scalar_chunks WHERE name = ? AND chunk = ?", self.gone_steps)
        conn.executemany(
            "DELETE FROM scalar_bucket_chunks WHERE name = ? AND level = ? AND chunk = ?",
            self.gone_buckets,
        )


def _finest_ids(ids: Iterable[Any]) -> list[int]:
    """The finest buckets (``step // 16``) whose steps fit int64, as ints, sorted: a whole
    float step is stored as an integer (the column's affinity), and so is its bucket."""
    lo, hi = _INT64[0] // _FINEST, _INT64[1] // _FINEST
    out = set()
    for i in ids:
        if type(i) is float and math.isfinite(i) and i == int(i):
            i = int(i)
        if type(i) is int and lo <= i <= hi:
            out.add(i)
    return sorted(out)


def refresh_chunks(
    conn: sqlite3.Connection, finest: Mapping[str, Iterable[int]]
) -> list[tuple[str, Exception]]:
    """Bring the chunks of each scalar up to date with its finest buckets ``finest`` touched
    (``step // 16``; after ``scalar_buckets`` is brought up to date). Returns the scalars
    whose chunks could not be, with why: a failure for one never stops the others."""
    problems: list[tuple[str, Exception]] = []
    out = _Writes()
    for name, ids in finest.items():
        if not isinstance(name, str):
            continue
        try:
            keys = _finest_ids(ids)
            if not keys:
                continue
            pieces = _pieces(-1, keys, CHUNK_STEPS, _FINEST)
            for level in range(len(LEVEL_WIDTHS)):
                if level:
                    keys = sorted({i // _FAN for i in keys})
                pieces += _pieces(level, keys, BUCKETS_PER_CHUNK, 1)
            _repack(conn, name, pieces, out)
        except Exception as exc:  # noqa: BLE001 - derived data: said, and the others go on
            problems.append((name, exc))
    try:
        out.write(conn)
    except Exception as exc:  # noqa: BLE001 - derived data: said by the caller
        names = sorted({r[0] for r in out.steps + out.buckets})
        problems.extend((n, exc) for n in names or ["?"])
    return problems


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
        ids = sorted(r[0] for r in finest)
        for at in range(0, len(ids), _REBUILD_IDS):  # a bounded part of a long run at a time
            problems = refresh_chunks(conn, {name: ids[at : at + _REBUILD_IDS]})
            if problems:
                raise problems[0][1]
