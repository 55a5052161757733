"""A scalar's window read from its packed chunks (:mod:`nbviz.store.scalar_chunks`).

What a zoom reads of a run of schema 8: at most about ``max_points / 64`` rows of
bucket chunks and ``(hi - lo) / 128`` rows of step chunks (never more than the
window's rows), whatever the run's length. A run of an older schema read as it is
has no chunks: :meth:`~nbviz.store.summary_queries.SummaryQueries.scalar_points`
reads its rows and buckets instead.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nbviz.store.query import ReaderBase, close_matches
from nbviz.store.scalar_chunks import (
    BUCKET_CHUNKS_SQL,
    BUCKETS_PER_CHUNK,
    CHUNK_STEPS,
    STEP_CHUNKS_SQL,
    bucket_points,
    bucket_records,
    step_points,
)
from nbviz.store.tables import LEVEL_WIDTHS

__all__ = ["ChunkQueries", "ScalarPoints"]


class ScalarPoints(NamedTuple):
    """One scalar's points over a step range (``scalar_points``): ``total`` rows in the range
    (whole buckets when ``width`` > 0, the steps per bucket; 0: rows as logged), ``steps``
    int64, sorted, and ``values`` float64 as logged: +-Inf as +-Inf, NaN as NaN (a bucket's
    points also hold a NaN at its first non-finite step, where a line breaks)."""

    total: int
    width: int
    steps: np.ndarray
    values: np.ndarray


class ChunkQueries(ReaderBase):
    """Windows of a scalar read from its chunks."""

    def _chunk_points(
        self, name: str, max_points: int, level: int, lo: int, hi: int, edges: bool
    ) -> ScalarPoints:
        """``scalar_points`` from the chunks: the steps of ``lo..hi`` when at most
        ``max_points`` fall in it, else the points of its buckets of ``level``."""
        width = LEVEL_WIDTHS[level]
        buckets, total = None, 0
        if hi - lo >= max_points:  # one row per step: a shorter window holds few enough
            first, last = lo // width, hi // width
            blobs = self._q(
                BUCKET_CHUNKS_SQL,
                (name, level, first // BUCKETS_PER_CHUNK, last // BUCKETS_PER_CHUNK),
            )
            buckets = bucket_records(blobs, first, last)
            total = int(buckets["n"].sum())  # at most 2**53 (bucket_records checks)
        if buckets is None or total <= max_points:
            rows = self._q(STEP_CHUNKS_SQL, (name, lo // CHUNK_STEPS, hi // CHUNK_STEPS))
            if not rows:
                self._check_scalar(name)
            inside, steps, values = step_points(rows, lo, hi, edges)
            # a writer may have committed between the two reads: past max_points the
            # buckets read first stand for the window, as that commit left them
            if buckets is None or inside <= max_points:
                return ScalarPoints(inside, 0, steps, values)
        steps, values = bucket_points(buckets)
        return ScalarPoints(total, width, steps, values)

    def _check_scalar(self, name: str) -> None:
        """ValueError naming close matches when no scalar is called ``name``."""
        if name not in self.scalar_names():
            raise ValueError(
                f"no scalar named {name!r}; {close_matches(name, self.scalar_names())}"
            )
