"""When scalars were logged: wall-clock times at given steps, and a run's first time.

The views draw a run over wall-clock time or time since it started; they hold a
bounded set of points, so they ask for the times of those steps only: one
index seek per step on the ``(name, step)`` key, whatever the run's length.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np

from nbviz.store.query import ReaderBase

__all__ = ["ScalarTimeQueries"]


class ScalarTimeQueries(ReaderBase):
    """Wall-clock times of scalars, by step."""

    def scalar_times(self, name: str, steps: Sequence[int] | np.ndarray) -> np.ndarray:
        """The wall-clock time (seconds since the epoch) ``name`` was logged at, at each of
        ``steps`` (float64, NaN where it was not logged)."""
        wanted = np.asarray(steps, dtype=np.int64)
        out = np.full(len(wanted), np.nan)
        if len(wanted) == 0:
            return out
        rows = self._q(
            "SELECT step, wall_time FROM scalars WHERE name = ? "
            "AND step IN (SELECT value FROM json_each(?))",
            (name, json.dumps(np.unique(wanted).tolist())),
        )
        times = {int(s): (float(t) if t is not None else math.nan) for s, t in rows}
        for i, s in enumerate(wanted.tolist()):
            out[i] = times.get(s, math.nan)
        return out

    def first_wall_time(self) -> float:
        """The wall-clock time of the run's first logged scalar (NaN when none): one seek
        per scalar name."""
        firsts = []
        for name in self.scalar_names():
            t = self._one(
                "SELECT wall_time FROM scalars WHERE name = ? ORDER BY step LIMIT 1", (name,)
            )
            if t is not None:
                firsts.append(float(t))
        return min(firsts) if firsts else math.nan
