"""Bounded reads: what a view needs of a long run, at a cost that does not grow with it.

Every query here reads at most about ``max_points`` rows (plus one row per
scalar or per run of steps), whatever the run's length, from the summaries the
writer keeps (:mod:`nbviz.store.summaries`) and from index seeks:

- :meth:`~SummaryQueries.scalar_summary` / :meth:`~SummaryQueries.stats_summary`:
  one series over a step range, as its rows when at most ``max_points`` fall in
  it, else as min/max/mean buckets of the finest resolution that fits;
- :meth:`~SummaryQueries.scalar_points`: the points a chart draws of one scalar
  over a step range (a zoom's read), as numpy arrays without a frame;
- :meth:`~SummaryQueries.scalar_outline`: one scalar for an analysis of its shape,
  its first and last rows as logged and bucket means and peaks between them;
- :meth:`~SummaryQueries.first_nonfinite`: a scalar's first NaN/Inf, by one seek;
- :meth:`~SummaryQueries.scalars_at`: each scalar's latest value at a step;
- :meth:`~SummaryQueries.histogram_before`: a layer's latest histogram at a step;
- :meth:`~SummaryQueries.recorded_steps`: the steps a source has rows at, from
  runs of steps (a run every k steps is one row).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from nbviz.store.chunk_queries import ChunkQueries, ScalarPoints
from nbviz.store.columns import floats, frame, int_array, ints, nan, table_columns
from nbviz.store.encoding import counts_array
from nbviz.store.errors import StoredValueError
from nbviz.store.query import close_matches
from nbviz.store.tables import LEVEL_WIDTHS, SIGNALS
from nbviz.store.window_sql import BUCKET_POINTS, rows_sql

__all__ = ["ScalarPoints", "SeriesSummary", "SummaryQueries", "STAT_FIELDS"]

#: The statistics a summary of a layer series holds (min of ``min``, max of ``max``
#: and of ``norm``, the sum of ``nonfinite``, the mean of the others).
STAT_FIELDS = ("mean", "std", "min", "max", "norm", "zero_frac", "rel", "nonfinite")
_TOP = len(LEVEL_WIDTHS) - 1
# stat_buckets is read by series: without this SQLite's planner prefers the primary key
# (level, bucket, sid), which reads every series' buckets of the level in the range
_STAT_BUCKETS = "stat_buckets INDEXED BY stat_buckets_by_series"
_SCALAR_BUCKET_COLUMNS = (
    "first_step, last_step, n, n_finite, total, min, min_step, max, max_step, last, "
    "bad_first, bad_last, bad_kind"
)
_SCALAR_BUCKET_NAMES = tuple(c.strip() for c in _SCALAR_BUCKET_COLUMNS.split(","))
_SCALAR_BUCKET_KINDS = "iiiiffififiii"


class SeriesSummary(NamedTuple):
    """One series over a step range, as rows or as buckets.

    ``width`` is the steps per bucket, 0 when ``frame`` holds the rows
    themselves; ``total`` the rows of the series in the range; ``lo``/``hi``
    the range (inclusive).
    """

    width: int
    total: int
    lo: int
    hi: int
    frame: pd.DataFrame


def _stat_bucket_frame(rows: list[tuple]) -> pd.DataFrame:
    """Stat buckets ``(last_step, n, mean_total, mean_n, std_total, std_n, min, max, norm,
    zero_total, zero_n, rel_total, rel_n, nonfinite)`` as a summary frame, column by
    column (a long run's zoom reads hundreds of buckets: no Python work per row)."""
    cols = list(zip(*rows)) if rows else [()] * 14
    step, n = int_array(cols[0]), ints(cols[1])
    num = [floats(c) for c in cols[2:]]

    def mean(total: np.ndarray, count: np.ndarray) -> np.ndarray:
        ok = count > 0
        return np.divide(total, count, out=np.full(len(total), np.nan), where=ok)

    mt, mn, st, sn, lo, hi, norm, zt, zn, rt, rn, nf = num
    values = (mean(mt, mn), mean(st, sn), lo, hi, norm, mean(zt, zn), mean(rt, rn), nf)
    return pd.DataFrame({"step": step, "n": n, **dict(zip(STAT_FIELDS, values))})


def _level(lo: int, hi: int, max_points: int) -> int:
    """The finest level whose buckets over ``lo..hi`` number at most ``max_points``."""
    for level, width in enumerate(LEVEL_WIDTHS):
        if hi // width - lo // width + 1 <= max_points:
            return level
    return _TOP


def _check_points(value: Any, what: str = "max_points", least: int = 2) -> int:
    """``value`` as an int, checked to be an integer >= ``least`` (``what``: its name)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an integer >= {least}, got {value!r}")
    if value < least:
        raise ValueError(f"{what} must be an integer >= {least}, got {value!r}")
    return int(value)


class SummaryQueries(ChunkQueries):
    """Reads whose cost is bounded whatever the run's length (see the module docstring)."""

    # -- steps -----------------------------------------------------------------------

    def recorded_steps(self, source: str) -> np.ndarray:
        """Sorted steps ``source`` has rows at (int64): ``"scalars"`` (any scalar),
        ``"stats:<signal>"`` (any layer's statistics) or ``"histograms:<signal>"``.

        Read from the runs of steps the writer keeps: one row per arithmetic run.
        """
        kind, _, signal = source.partition(":")
        if source != "scalars" and (kind not in ("stats", "histograms") or signal not in SIGNALS):
            raise ValueError(
                f"recorded_steps: unknown source {source!r}; give 'scalars', "
                "'stats:<signal>' or 'histograms:<signal>' with a signal of "
                f"{', '.join(SIGNALS)}"
            )
        rows = self._q(
            "SELECT start, stride, count FROM step_runs WHERE source = ? ORDER BY start", (source,)
        )
        if not rows:
            return np.zeros(0, dtype=np.int64)
        starts, strides, counts = (int_array(col) for col in zip(*rows))
        if (counts < 1).any() or (counts > 1 << 40).any():
            raise StoredValueError(f"a run of steps of {source!r} counts {counts.min()}")
        if len(rows) == 1 and strides[0] > 0:
            return np.arange(starts[0], starts[0] + strides[0] * counts[0], strides[0])
        if len(rows) <= 64 and (strides > 0).all():  # a few runs: an arange each
            steps = np.concatenate(
                [
                    np.arange(a, a + b * c, b, dtype=np.int64)
                    for a, b, c in zip(starts, strides, counts)
                ]
            )
            return steps if (np.diff(steps) > 0).all() else np.unique(steps)
        offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(
            np.cumsum(counts) - counts, counts
        )
        steps = np.repeat(starts, counts) + np.repeat(strides, counts) * offsets
        if len(rows) > 1 and not (np.diff(steps) > 0).all():
            steps = np.unique(steps)
        return steps

    # -- scalars ---------------------------------------------------------------------

    def scalars_at(self, step: int) -> pd.DataFrame:
        """Each scalar's latest value at or before ``step``: ``[name, step, value]`` by name.

        One index seek per scalar; scalars first logged after ``step`` are left out.
        """
        rows = []
        for name in self.scalar_names():
            row = self._row(
                "SELECT step, value FROM scalars WHERE name = ? AND step <= ? "
                "ORDER BY step DESC LIMIT 1",
                (name, int(step)),
            )
            if row is not None:
                rows.append((name, *row))
        return frame(rows, ("name", "step", "value"), "sif")

    def scalar_counts(self) -> dict[str, int]:
        """Rows logged of each scalar, by name: one seek per scalar in its coarsest summary."""
        return {
            name: int(
                self._one(
                    "SELECT coalesce(sum(n), 0) FROM scalar_buckets WHERE name = ? AND level = ?",
                    (name, _TOP),
                )
            )
            for name in self.scalar_names()
        }

    def scalar_summary(
        self,
        name: str,
        max_points: int = 2000,
        step_range: tuple[int, int] | None = None,
        *,
        edges: bool = False,
    ) -> SeriesSummary:
        """One scalar over ``step_range`` (default: all of it) in at most ``max_points`` rows.

        ``width == 0``: ``frame`` is ``[step, value]``, every row in the range.
        Else one row per bucket of ``width`` steps: ``first_step, last_step, n,
        n_finite, total, min, min_step, max, max_step, last`` (finite values only
        in ``total``/``min``/``max``) and ``bad_first, bad_last, bad_kind`` (the
        first and last non-finite step and the first one's kind: 0 NaN, 1 +Inf,
        -1 -Inf; NULL: none). ``edges``: rows also include the one before and the
        one after the range (so a zoomed line runs to the window's borders).
        """
        max_points = _check_points(max_points)
        if step_range is None:
            step_range = self._scalar_bounds(name)
        lo, hi = int(step_range[0]), int(step_range[1])
        level = _level(lo, hi, max_points)
        width = LEVEL_WIDTHS[level]
        # a scalar has one row per step: a range of at most max_points steps is read as rows
        rows = (
            []
            if hi - lo < max_points
            else self._q(
                f"SELECT {_SCALAR_BUCKET_COLUMNS} FROM scalar_buckets WHERE name = ? "
                "AND level = ? AND bucket BETWEEN ? AND ? ORDER BY bucket",
                (name, level, lo // width, hi // width),
            )
        )
        buckets = table_columns(rows, _SCALAR_BUCKET_KINDS)
        estimate = int(buckets[2].sum())  # NULL counts skipped
        if estimate <= max_points:
            found = self._window_rows(name, lo, hi, max_points, edges)
            if found is not None:
                total, steps, values = found
                table = pd.DataFrame({"step": steps, "value": values}, copy=False)
                return SeriesSummary(0, total, lo, hi, table)
        table = pd.DataFrame(dict(zip(_SCALAR_BUCKET_NAMES, buckets)), copy=False)
        return SeriesSummary(width, estimate, lo, hi, table)

    def scalar_points(
        self,
        name: str,
        max_points: int = 2000,
        step_range: tuple[int, int] | None = None,
        *,
        edges: bool = False,
    ) -> ScalarPoints:
        """The points a chart draws of one scalar over ``step_range`` (default: all of it).

        Every row when at most ``max_points`` fall in the range (``edges``: also
        the one before and the one after it), else each bucket's minimum and
        maximum at the steps they were reached, of the finest summary level with
        at most ``max_points`` buckets, and a NaN at its first non-finite step.
        The points ``scalar_summary`` holds, as ``summary_points`` draws them,
        read from the scalar's packed chunks (:mod:`nbviz.store.chunk_queries`): what
        a zoom reads, a handful of rows whatever the run's length. A run of schema 7
        or older read as it is: the rows and buckets themselves, as two columns.
        """
        max_points = _check_points(max_points)
        if step_range is None:
            step_range = self._scalar_bounds(name)
        lo, hi = int(step_range[0]), int(step_range[1])
        level = _level(lo, hi, max_points)
        if lo <= hi and self._holds("scalar_chunks"):
            return self._chunk_points(name, max_points, level, lo, hi, edges)
        width = LEVEL_WIDTHS[level]  # a run of schema 7 or older read as it is; an empty range
        buckets = (name, level, lo // width, hi // width)
        total = None
        if hi - lo >= max_points:
            total = int(
                self._one(
                    "SELECT coalesce(sum(n), 0) FROM scalar_buckets WHERE name = ? "
                    "AND level = ? AND bucket BETWEEN ? AND ?",
                    buckets,
                )
            )
        if total is None or total <= max_points:
            found = self._window_rows(name, lo, hi, max_points, edges)
            if found is not None:
                return ScalarPoints(found[0], 0, found[1], found[2])
        steps, values = table_columns(self._q(BUCKET_POINTS, buckets), "if")
        return ScalarPoints(
            int(total or 0), width, np.asarray(steps, np.int64), np.asarray(values, np.float64)
        )

    def _window_rows(
        self, name: str, lo: int, hi: int, max_points: int, edges: bool
    ) -> tuple[int, np.ndarray, np.ndarray] | None:
        """``(rows in lo..hi, steps, values)`` of a scalar, with the rows before and after the
        range when ``edges``, in one statement; None when more than ``max_points`` fall in it."""
        raw = self._q(*rows_sql(name, lo, hi, max_points + 1, edges))
        steps, values = (np.asarray(c) for c in table_columns(raw, "if"))
        steps, values = steps.astype(np.int64, copy=False), values.astype(np.float64, copy=False)
        if len(steps) > 1 and not (np.diff(steps) > 0).all():
            order = np.argsort(steps, kind="stable")
            steps, values = steps[order], values[order]
        inside = int(np.count_nonzero((steps >= lo) & (steps <= hi)))
        if inside > max_points:
            return None
        if not len(raw):
            self._check_scalar(name)
        return inside, steps, values

    def _scalar_bounds(self, name: str) -> tuple[int, int]:
        """A scalar's first and last step ((0, -1) when it has no rows)."""
        bounds = self._row(
            "SELECT min(first_step), max(last_step) FROM scalar_buckets "
            "WHERE name = ? AND level = ?",
            (name, _TOP),
        )
        if bounds is None or bounds[0] is None:
            self._check_scalar(name)
            return 0, -1
        return int(bounds[0]), int(bounds[1])

    def scalar_outline(self, name: str, max_points: int = 2048, ends: int = 512) -> pd.DataFrame:
        """One scalar in at most about ``max_points + 2 * ends`` rows, for an analysis of its shape.

        Every row when it has at most ``max_points``. Else its first and last
        ``ends`` rows as logged (``ends`` at most ``max_points // 2``) and, between
        them, one row per bucket of the finest summary level that fits
        ``max_points``: ``value`` the mean of its finite values, ``peak`` the
        largest at ``peak_step``, ``step`` its last step (buckets without a finite
        value are left out). Columns ``step, value, peak, peak_step, n`` (``n``:
        the rows a row stands for, 1 for a row as logged), sorted by step; a
        logged row keeps NaN/Inf.
        """
        # the head and the tail stay apart: at most half of max_points each
        ends = min(_check_points(ends, "ends", 1), _check_points(max_points) // 2)
        summary = self.scalar_summary(name, max_points)
        if summary.width == 0:
            rows = summary.frame
            return pd.DataFrame(
                {
                    "step": rows["step"].to_numpy(dtype=np.int64),
                    "value": rows["value"].to_numpy(dtype=np.float64),
                    "peak": rows["value"].to_numpy(dtype=np.float64),
                    "peak_step": rows["step"].to_numpy(dtype=np.int64),
                    "n": np.ones(len(rows), dtype=np.int64),
                }
            )
        head = self._q(
            "SELECT step, value FROM scalars WHERE name = ? ORDER BY step LIMIT ?", (name, ends)
        )
        tail = self._q(
            "SELECT step, value FROM scalars WHERE name = ? ORDER BY step DESC LIMIT ?",
            (name, ends),
        )[::-1]
        b = summary.frame
        n_finite = b["n_finite"].to_numpy(dtype=np.float64, na_value=0.0)
        inside = (
            (b["first_step"].to_numpy(dtype=np.float64, na_value=np.nan) > head[-1][0])
            & (b["last_step"].to_numpy(dtype=np.float64, na_value=np.nan) < tail[0][0])
            & (n_finite > 0)
        )
        b = b[inside]
        with np.errstate(invalid="ignore", divide="ignore"):
            means = b["total"].to_numpy(dtype=np.float64, na_value=np.nan) / n_finite[inside]
        logged = frame(head + tail, ("step", "value"), "if")
        steps = logged["step"].to_numpy(dtype=np.int64)
        values = logged["value"].to_numpy(dtype=np.float64)
        return pd.DataFrame(
            {
                "step": np.concatenate(
                    [steps[: len(head)], b["last_step"].to_numpy(np.int64), steps[len(head) :]]
                ),
                "value": np.concatenate([values[: len(head)], means, values[len(head) :]]),
                "peak": np.concatenate(
                    [values[: len(head)], b["max"].to_numpy(np.float64), values[len(head) :]]
                ),
                "peak_step": np.concatenate(
                    [steps[: len(head)], b["max_step"].to_numpy(np.int64), steps[len(head) :]]
                ),
                "n": np.concatenate(
                    [
                        np.ones(len(head), dtype=np.int64),
                        b["n"].to_numpy(np.int64),
                        np.ones(len(tail), dtype=np.int64),
                    ]
                ),
            }
        )

    def first_nonfinite(self, name: str) -> tuple[int, float] | None:
        """``(step, value)`` of a scalar's first NaN/Inf, or None: two index seeks.

        Read from its coarsest summary (the first non-finite step of each bucket),
        then the row at that step.
        """
        if name not in self.scalar_names():
            raise ValueError(
                f"no scalar named {name!r}; {close_matches(name, self.scalar_names())}"
            )
        step = self._one(
            "SELECT min(bad_first) FROM scalar_buckets WHERE name = ? AND level = ?", (name, _TOP)
        )
        if step is None:
            return None
        value = self._one("SELECT value FROM scalars WHERE name = ? AND step = ?", (name, step))
        return int(step), nan(value)

    # -- layer statistics ------------------------------------------------------------

    def stats_summary(
        self,
        signal: str,
        layer: str,
        max_points: int = 1000,
        step_range: tuple[int, int] | None = None,
    ) -> SeriesSummary:
        """One layer's statistics of ``signal`` over ``step_range`` in at most ``max_points`` rows.

        ``frame`` columns: ``step`` (a bucket's last step), ``n`` (rows in it) and
        :data:`STAT_FIELDS`; with ``width == 0`` each row is one recorded step.
        """
        self._check_signal(signal)
        max_points = _check_points(max_points)
        sid = self._sid(layer, signal)
        if sid is None:
            raise self._unknown_layer("layer_stats", layer, signal)
        bounds = self._row(
            f"SELECT min(first_step), max(last_step), sum(n) FROM {_STAT_BUCKETS} "
            "WHERE sid = ? AND level = ?",
            (sid, _TOP),
        )
        lo, hi = step_range if step_range is not None else bounds[:2]
        if lo is None:
            return SeriesSummary(0, 0, 0, -1, self._stat_frame([]))
        lo, hi = int(lo), int(hi)
        level = _level(lo, hi, max_points)
        width = LEVEL_WIDTHS[level]
        rows = self._q(
            "SELECT last_step, n, mean_total, mean_n, std_total, std_n, min, max, norm, "
            f"zero_total, zero_n, rel_total, rel_n, nonfinite FROM {_STAT_BUCKETS} "
            "WHERE sid = ? AND level = ? AND bucket BETWEEN ? AND ? ORDER BY bucket",
            (sid, level, lo // width, hi // width),
        )
        estimate = sum(int(r[1]) for r in rows if type(r[1]) is int)
        if estimate <= max_points:
            raw = self._q(
                "SELECT step, 1, mean, std, min, max, norm, zero_frac, rel, nonfinite "
                "FROM layer_stats WHERE sid = ? AND step BETWEEN ? AND ? ORDER BY step LIMIT ?",
                (sid, lo, hi, max_points + 1),
            )
            if len(raw) <= max_points:
                return SeriesSummary(0, len(raw), lo, hi, self._stat_frame(raw))
        return SeriesSummary(width, estimate, lo, hi, _stat_bucket_frame(rows))

    @staticmethod
    def _stat_frame(rows: list[tuple]) -> pd.DataFrame:
        out = frame(rows, ("step", "n", *STAT_FIELDS), "iiffffffff")
        out["nonfinite"] = floats(out["nonfinite"].to_numpy(dtype=np.float64, na_value=np.nan))
        return out

    # -- histograms ------------------------------------------------------------------

    def histogram_before(
        self, layer: str, signal: str, step: int
    ) -> tuple[int, np.ndarray, np.ndarray] | None:
        """``(step, edges, counts)`` of the latest histogram at or before ``step``, or None.

        One index seek, however many histograms the layer has. The uniform bins
        the views draw: a histogram logged with other bins is re-binned here
        (``run.histogram`` returns those bins as logged).
        """
        self._check_signal(signal)
        sid = self._sid(layer, signal)
        if sid is None:
            return None
        row = self._row(
            "SELECT step, lo, hi, counts, bins FROM histograms WHERE sid = ? AND step <= ? "
            "ORDER BY step DESC LIMIT 1",
            (sid, int(step)),
        )
        if row is None:
            return None
        at, lo, hi, blob, bins = row
        counts = counts_array(blob, bins)
        return int(at), np.linspace(nan(lo), nan(hi), len(counts) + 1), counts
