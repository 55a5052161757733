"""Summaries the writer keeps as a run is written, so that views read a bounded amount.

Three kinds, all brought up to date in the writer thread inside the transaction
that wrote the rows they summarise (so a reader sees them as of the same commit as
the rows). They are derived data: a failure to bring one source's or one scalar's
up to date never stops the others, nor loses a row; the writer says it once, with a
RunFileWarning, and that source's summaries stay as they were:

- **buckets**: every scalar (``scalar_buckets``) and every layer statistics series
  (``stat_buckets``) summarised in buckets of 16, 256, 4096, 65536 and 1048576
  steps (:data:`~nbviz.store.tables.LEVEL_WIDTHS`): count, finite count and sum
  (the mean), min and max (for scalars with the step each was reached at), the
  last value, and the first and last non-finite step. Only the buckets that the
  new rows fall in are recomputed: the finest from the rows themselves, each
  coarser one from the 16 buckets below it, so the work per commit does not
  grow with the run and a bucket always holds its rows (a step written again
  replaces its old value in the sums). Layer statistics, written at every step
  of a run captured at ``every=1``, take a cheaper way when a commit's rows all
  lie above every earlier row (training moving forward): each level's buckets
  add the new rows to what they hold, work in proportion to the new rows (the
  sums then equal a recomputation's to rounding in their last bits);
- **chunks** (``scalar_chunks``, ``scalar_bucket_chunks``): every scalar's rows and
  its buckets packed in blocks, for zooms (:mod:`nbviz.store.scalar_chunks`);
- **step runs** (``step_runs``): the steps each source has rows at (``scalars``,
  ``stats:<signal>``, ``histograms:<signal>``) as arithmetic runs
  ``(start, stride, count)``; a run recorded every k steps is one row.

The SQL of the buckets and step runs runs in SQLite's C code, without Python's
global lock; packing the chunks is Python work on the few rows a commit touched, read
with one statement per scalar and written together.
"""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbviz.store.scalar_chunks import refresh_chunks
from nbviz.store.tables import LEVEL_WIDTHS

__all__ = ["StepRuns", "Touched", "refresh", "rebuild_all"]

_FAN = 16  # buckets of one level in a bucket of the next
_UNREAD = object()  # Touched.stats_floor before it is read
_FIN = "CASE WHEN abs({0}) < 1e999 THEN {0} END"  # the value if finite, else NULL


def _floor_div(expr: str, by: int) -> str:
    """SQL for ``expr // by`` as Python floors it (SQLite's ``/`` truncates: step -1 is in
    bucket -1, not 0)."""
    return f"(({expr} - ({expr} < 0) * {by - 1}) / {by})"


_DIV = _floor_div("{0}", _FAN)  # ``{0} // 16``

_SCALAR_COLUMNS = (
    "name, level, bucket, first_step, last_step, n, n_finite, total, min, min_step, "
    "max, max_step, last, bad_first, bad_last, bad_kind"
)

_SCALAR_LEVEL0 = f"""
INSERT OR REPLACE INTO scalar_buckets({_SCALAR_COLUMNS})
SELECT :name, 0, g.b, g.first, g.last, g.n, g.nf, g.total, g.mn,
  (SELECT step FROM scalars WHERE name = :name AND step BETWEEN g.first AND g.last
     AND value = g.mn ORDER BY step LIMIT 1),
  g.mx,
  (SELECT step FROM scalars WHERE name = :name AND step BETWEEN g.first AND g.last
     AND value = g.mx ORDER BY step LIMIT 1),
  (SELECT value FROM scalars WHERE name = :name AND step = g.last),
  g.bf, g.bl,
  (SELECT CASE WHEN value IS NULL THEN 0 WHEN value > 0 THEN 1 ELSE -1 END
     FROM scalars WHERE name = :name AND step = g.bf)
FROM (SELECT {_DIV.format("step")} AS b, min(step) AS first, max(step) AS last, count(*) AS n,
        count(f) AS nf, sum(f) AS total, min(f) AS mn, max(f) AS mx,
        min(CASE WHEN f IS NULL THEN step END) AS bf,
        max(CASE WHEN f IS NULL THEN step END) AS bl
      FROM (SELECT step, {_FIN.format("value")} AS f FROM scalars
            WHERE name = :name AND step BETWEEN :lo AND :hi)
      GROUP BY b) AS g
"""

_CHILDREN = (
    "FROM scalar_buckets WHERE name = :name AND level = :below "
    f"AND bucket BETWEEN g.b * {_FAN} AND g.b * {_FAN} + {_FAN - 1}"
)

_SCALAR_LEVEL = f"""
INSERT OR REPLACE INTO scalar_buckets({_SCALAR_COLUMNS})
SELECT :name, :level, g.b, g.first, g.last, g.n, g.nf, g.total, g.mn,
  (SELECT min_step {_CHILDREN} AND min = g.mn ORDER BY bucket LIMIT 1),
  g.mx,
  (SELECT max_step {_CHILDREN} AND max = g.mx ORDER BY bucket LIMIT 1),
  (SELECT last FROM scalar_buckets WHERE name = :name AND level = :below AND bucket = g.lb),
  g.bf, g.bl,
  (SELECT bad_kind {_CHILDREN} AND bad_first = g.bf LIMIT 1)
FROM (SELECT {_DIV.format("bucket")} AS b, min(first_step) AS first, max(last_step) AS last,
        sum(n) AS n, sum(n_finite) AS nf, sum(total) AS total, min(min) AS mn,
        max(max) AS mx, max(bucket) AS lb, min(bad_first) AS bf, max(bad_last) AS bl
      FROM scalar_buckets WHERE name = :name AND level = :below AND bucket BETWEEN :lo AND :hi
      GROUP BY b) AS g
"""

#: A statistics bucket's columns after (level, bucket, sid), from its rows ...
_FROM_ROWS = f"""min(step), max(step), count(*),
  sum({_FIN.format("mean")}), count({_FIN.format("mean")}),
  sum({_FIN.format("std")}), count({_FIN.format("std")}),
  min(min), max(max), max(norm),
  sum({_FIN.format("zero_frac")}), count({_FIN.format("zero_frac")}),
  sum({_FIN.format("rel")}), count({_FIN.format("rel")}),
  sum(nonfinite)"""
#: ... and from finer buckets
_FROM_BUCKETS = """min(first_step), max(last_step), sum(n),
  sum(mean_total), sum(mean_n), sum(std_total), sum(std_n), min(min), max(max), max(norm),
  sum(zero_total), sum(zero_n), sum(rel_total), sum(rel_n), sum(nonfinite)"""

_STAT_LEVEL0 = f"""
INSERT OR REPLACE INTO stat_buckets
SELECT 0, {_DIV.format("step")}, sid, {_FROM_ROWS}
FROM layer_stats WHERE step BETWEEN :lo AND :hi GROUP BY {_DIV.format("step")}, sid
"""

_STAT_LEVEL = f"""
INSERT OR REPLACE INTO stat_buckets
SELECT :level, {_DIV.format("bucket")}, sid, {_FROM_BUCKETS}
FROM stat_buckets WHERE level = :below AND bucket BETWEEN :lo AND :hi
GROUP BY {_DIV.format("bucket")}, sid
"""

# -- adding new rows to the statistics buckets (see _merge_stats)

_STAT_NEW_DDL = """CREATE TEMP TABLE IF NOT EXISTS stat_new(
    bucket INTEGER, sid INTEGER, first_step INTEGER, last_step INTEGER, n INTEGER,
    mean_total REAL, mean_n INTEGER, std_total REAL, std_n INTEGER, min REAL, max REAL,
    norm REAL, zero_total REAL, zero_n INTEGER, rel_total REAL, rel_n INTEGER,
    nonfinite INTEGER)"""

#: The new rows (those above ``:floor``; every row, for a file that had none) in finest
#: buckets of their own.
_STAT_NEW, _STAT_ALL = (
    f"""
INSERT INTO temp.stat_new
SELECT {_DIV.format("step")} AS b, sid, {_FROM_ROWS}
FROM layer_stats WHERE {where} GROUP BY b, sid
"""
    for where in ("step > :floor", "true")
)


def _nullable_sum(column: str) -> str:
    """``column`` plus the new rows' value, NULL only where both are (as ``sum()`` gives)."""
    return (
        f"{column} = CASE WHEN excluded.{column} IS NULL THEN {column} "
        f"WHEN {column} IS NULL THEN excluded.{column} ELSE {column} + excluded.{column} END"
    )


def _nullable_extreme(column: str, fn: str) -> str:
    """The smaller (``fn='min'``) or larger of ``column`` and the new rows' value,
    ignoring a NULL on either side (as the aggregate does)."""
    return f"{column} = coalesce({fn}({column}, excluded.{column}), {column}, excluded.{column})"


_MERGE_SET = ", ".join(
    [
        "first_step = min(first_step, excluded.first_step)",
        "last_step = max(last_step, excluded.last_step)",
        "n = n + excluded.n",
        *(_nullable_sum(c) for c in ("mean_total", "mean_n", "std_total", "std_n")),
        _nullable_extreme("min", "min"),
        _nullable_extreme("max", "max"),
        _nullable_extreme("norm", "max"),
        *(_nullable_sum(c) for c in ("zero_total", "zero_n", "rel_total", "rel_n", "nonfinite")),
    ]
)


#: Per level, add ``temp.stat_new`` to its ``stat_buckets`` (``_FAN ** level`` finest
#: buckets in one of the level's; WHERE true: an upsert's SELECT needs a WHERE to parse).
_STAT_MERGE = tuple(
    f"""
INSERT INTO stat_buckets
SELECT {level}, {_floor_div("bucket", _FAN**level)} AS b, sid, {_FROM_BUCKETS}
FROM temp.stat_new WHERE true GROUP BY b, sid
ON CONFLICT(level, bucket, sid) DO UPDATE SET {_MERGE_SET}
"""
    for level in range(len(LEVEL_WIDTHS))
)


def _ranges(ids: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted ids as inclusive ``(first, last)`` runs of consecutive ids."""
    out: list[tuple[int, int]] = []
    for i in sorted(set(ids)):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def _step(v: Any) -> int | float | None:
    """A step as an INTEGER column stores it: an int (a bool, or a whole float within
    int64, made one), a float otherwise; None for what SQLite refuses as a step."""
    if type(v) is int:
        return v if -(1 << 63) <= v < 1 << 63 else None
    if type(v) is bool:
        return int(v)
    if type(v) is float and math.isfinite(v):
        return int(v) if v == int(v) and -(2.0**63) <= v < 2.0**63 else v
    return None


@dataclass
class Touched:
    """What one batch of writes touched: finest buckets, and steps per source."""

    scalars: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    stats: set[int] = field(default_factory=set)
    steps: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    #: The largest step ``layer_stats`` held before the batch's rows (None when empty),
    #: read by :meth:`read_stats_floor`; ``_UNREAD`` until then.
    stats_floor: Any = _UNREAD
    stats_low: int | None = None  # the smallest step among the batch's statistics rows
    stats_whole: bool = True  # every one of those steps an integer

    def read_stats_floor(self, conn: sqlite3.Connection) -> None:
        """Note the largest step ``layer_stats`` holds: call it before the batch's first
        statistics row is inserted, inside the write transaction (``BEGIN IMMEDIATE``,
        so that no other writer's rows come between the read and the inserts)."""
        if self.stats_floor is not _UNREAD:
            return
        try:
            self.stats_floor = conn.execute("SELECT max(step) FROM layer_stats").fetchone()[0]
        except sqlite3.Error:
            pass  # left unread: the buckets are recomputed, as before this read existed

    def appends_stats(self) -> bool:
        """Whether every statistics row of the batch lies above all rows before it: then
        each bucket they fall in takes them as an addition (no row was replaced)."""
        floor, low = self.stats_floor, self.stats_low
        if floor is _UNREAD or low is None or not self.stats_whole:
            return False
        return floor is None or (type(floor) is int and low > floor)

    def note(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        """Record the rows of ``table`` about to be written (in Writer.insert's order).

        Each row on its own: one whose step SQLite will refuse (none, not a number, beyond
        int64) is left out here and reported when it is inserted; the rows after it count.
        """
        if table == "scalars":
            for row in rows:
                name, step = row[0], row[1]
                if type(step) is not int:
                    step = _step(step)
                    if step is None:
                        continue
                if isinstance(name, str):
                    self.scalars[name].add(step // _FAN)
                self.steps["scalars"].add(step)
        elif table in ("layer_stats", "histograms"):
            label = "stats" if table == "layer_stats" else "histograms"
            for row in rows:
                step, signal = row[0], row[2]
                if type(step) is not int:
                    step = _step(step)
                    if step is None:
                        continue
                if label == "stats":
                    self.stats.add(step // _FAN)
                    if type(step) is not int:
                        self.stats_whole = False
                    elif self.stats_low is None or step < self.stats_low:
                        self.stats_low = step
                self.steps[f"{label}:{signal}"].add(step)

    def __bool__(self) -> bool:
        return bool(self.scalars or self.stats or self.steps)


def _up_levels(conn: sqlite3.Connection, sql: str, finest: Iterable[int], **key: Any) -> None:
    ids = set(finest)
    for level in range(1, len(LEVEL_WIDTHS)):
        ids = {i // _FAN for i in ids}
        for lo, hi in _ranges(ids):
            below = (lo * _FAN, hi * _FAN + _FAN - 1)
            conn.execute(
                sql, {**key, "level": level, "below": level - 1, "lo": below[0], "hi": below[1]}
            )


#: What could not be brought up to date, and why: ``(what, error)``.
Problems = list[tuple[str, Exception]]


def refresh_buckets(conn: sqlite3.Connection, touched: Touched) -> Problems:
    """Recompute the buckets that ``touched`` falls in, finest first; a failure for one
    scalar never stops the others (returned, with why)."""
    problems: Problems = []
    for name, buckets in touched.scalars.items():
        if not isinstance(name, str):
            continue
        try:
            for lo, hi in _ranges(buckets):
                conn.execute(
                    _SCALAR_LEVEL0, {"name": name, "lo": lo * _FAN, "hi": hi * _FAN + _FAN - 1}
                )
            _up_levels(conn, _SCALAR_LEVEL, buckets, name=name)
        except Exception as exc:  # noqa: BLE001 - derived data: said, and the others go on
            problems.append((f"the buckets of scalar {name!r}", exc))
    if not touched.stats:
        return problems
    try:
        if touched.appends_stats():
            try:
                _merge_stats(conn, touched.stats_floor)
                return problems
            except sqlite3.Error:
                pass  # recomputed below, which also mends a merge left half done
        _recompute_stats(conn, touched.stats)
    except Exception as exc:  # noqa: BLE001
        problems.append(("the buckets of the layer statistics", exc))
    return problems


def _recompute_stats(conn: sqlite3.Connection, finest: set[int]) -> None:
    """The statistics buckets ``finest`` falls in, each from its rows or its 16 children."""
    for lo, hi in _ranges(finest):
        conn.execute(_STAT_LEVEL0, {"lo": lo * _FAN, "hi": hi * _FAN + _FAN - 1})
    _up_levels(conn, _STAT_LEVEL, finest)


def _merge_stats(conn: sqlite3.Connection, floor: int | None) -> None:
    """Add the statistics rows above ``floor`` (every row when None), all of them new, to
    the buckets of each level: the rows are read once, into finest buckets of their own,
    which each level adds up and merges into what it holds. Work in proportion to the
    new rows, where recomputing reads every row of each finest bucket touched."""
    conn.execute(_STAT_NEW_DDL)
    conn.execute("DELETE FROM temp.stat_new")
    if floor is None:
        conn.execute(_STAT_ALL)
    else:
        conn.execute(_STAT_NEW, {"floor": floor})
    for sql in _STAT_MERGE:
        conn.execute(sql)


class StepRuns:
    """The last run of steps of each source, kept in memory by the writer thread."""

    def __init__(self) -> None:
        self._last: dict[str, list[int] | None] = {}

    def clear(self) -> None:
        """Forget what is cached (a transaction was rolled back)."""
        self._last.clear()

    def forget(self, source: str) -> None:
        """Forget what is cached of ``source`` (its rows of ``step_runs`` are read again)."""
        self._last.pop(source, None)

    def _load(self, conn: sqlite3.Connection, source: str) -> list[int] | None:
        if source not in self._last:
            row = conn.execute(
                "SELECT start, stride, count FROM step_runs WHERE source = ? "
                "ORDER BY start DESC LIMIT 1",
                (source,),
            ).fetchone()
            self._last[source] = None if row is None else [int(v) for v in row]
        return self._last[source]

    def add(self, conn: sqlite3.Connection, source: str, steps: Iterable[int]) -> None:
        """Record that ``source`` has rows at ``steps``."""
        last = self._load(conn, source)
        changed: dict[int, list[int]] = {}
        apart: list[int] = []
        for s in sorted(set(steps)):
            if last is not None:
                start, stride, count = last
                end = start + stride * (count - 1)
                if s <= end:
                    if s < start or (s - start) % stride:
                        apart.append(s)  # written out of order: a run of its own
                    continue
                if count == 1:
                    last[1], last[2] = s - start, 2
                elif s == end + stride:
                    last[2] += 1
                else:
                    last = [s, 1, 1]
            else:
                last = [s, 1, 1]
            changed[last[0]] = last
        self._last[source] = last
        conn.executemany(
            "INSERT OR REPLACE INTO step_runs(source, start, stride, count) VALUES (?, ?, ?, ?)",
            [(source, *run) for run in changed.values()],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO step_runs(source, start, stride, count) VALUES (?, ?, 1, 1)",
            [(source, s) for s in apart],
        )


def refresh(conn: sqlite3.Connection, touched: Touched, runs: StepRuns) -> Problems:
    """Bring every summary up to date with the rows ``touched`` describes: the step runs,
    the buckets, then the chunks packed from the buckets. Summaries are derived data: a
    failure for one source or scalar never stops the others, and is returned with why
    (the rows themselves are written by then)."""
    problems: Problems = []
    for source, steps in touched.steps.items():
        good = [s for s in steps if type(s) is int]
        if good:
            try:
                runs.add(conn, source, good)
            except Exception as exc:  # noqa: BLE001 - derived data: said, the others go on
                runs.forget(source)
                problems.append((f"the step runs of {source!r}", exc))
    problems += refresh_buckets(conn, touched)
    problems += [
        (f"the packed chunks of scalar {name!r}", exc)
        for name, exc in refresh_chunks(conn, touched.scalars)
    ]
    return problems


def rebuild_all(conn: sqlite3.Connection) -> None:
    """Compute every summary from the stored rows (a run migrated from schema 2)."""
    conn.execute("DELETE FROM scalar_buckets")
    conn.execute("DELETE FROM stat_buckets")
    conn.execute("DELETE FROM step_runs")
    touched = Touched()
    for (name,) in conn.execute("SELECT DISTINCT name FROM scalars").fetchall():
        first, last = conn.execute(
            "SELECT min(step), max(step) FROM scalars WHERE name = ?", (name,)
        ).fetchone()
        touched.scalars[name] = set(range(first // _FAN, last // _FAN + 1))
    first, last = conn.execute("SELECT min(step), max(step) FROM layer_stats").fetchone()
    if first is not None:
        touched.stats = set(range(first // _FAN, last // _FAN + 1))
    problems = refresh_buckets(conn, touched)
    if problems:
        raise problems[0][1]
    runs = StepRuns()
    sources = [
        ("scalars", "SELECT DISTINCT step FROM scalars ORDER BY step", ()),
        *(
            (
                f"{label}:{signal}",
                f"SELECT DISTINCT t.step FROM {table} t JOIN series s ON s.id = t.sid "
                "WHERE s.signal = ? ORDER BY t.step",
                (signal,),
            )
            for label, table in (("stats", "layer_stats"), ("histograms", "histograms"))
            for (signal,) in conn.execute("SELECT DISTINCT signal FROM series").fetchall()
        ),
    ]
    for source, sql, params in sources:
        steps = [r[0] for r in conn.execute(sql, params).fetchall() if type(r[0]) is int]
        if steps:
            runs.add(conn, source, steps)
