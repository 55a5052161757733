"""What a run holds, cached for its views: :class:`RunIndex`, extended as the run grows.

Views read a run through one :class:`RunIndex` per run object (shared by every
view of that run in the kernel): the scalars as numpy arrays, the recorded
steps of each signal, and the union of steps a scrubber moves over. The index
is built once and then extended with cheap queries (rows after the last step
seen), because full reads of a 100k-step run take most of a second.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbviz.store import SIGNALS

__all__ = ["RunIndex", "Series"]


@dataclass
class Series:
    """One scalar over time: sorted int64 steps and float64 values (NaN/Inf kept)."""

    steps: np.ndarray
    values: np.ndarray

    def last(self, step: int | None = None) -> tuple[int, float] | None:
        """(step, value) at the latest step <= ``step`` (or the last one), None if before."""
        if len(self.steps) == 0:
            return None
        i = (
            len(self.steps) - 1
            if step is None
            else int(np.searchsorted(self.steps, step, "right")) - 1
        )
        if i < 0:
            return None
        return int(self.steps[i]), float(self.values[i])


def _union(parts: list[np.ndarray]) -> np.ndarray:
    """The sorted union of sorted int64 arrays.

    When the longest holds every step from its first to its last (a run logged
    every step), the others add only their steps outside that span, found by
    binary search: no sort of millions of steps. Else a sort of sorted runs and
    a mask, forty times faster than ``np.unique``, which hashes every step.
    """
    if not parts:
        return np.zeros(0, dtype=np.int64)
    base = max(parts, key=len)
    first, last = int(base[0]), int(base[-1])
    if last - first + 1 == len(base):
        below = [p[: np.searchsorted(p, first)] for p in parts if p is not base]
        above = [p[np.searchsorted(p, last, "right") :] for p in parts if p is not base]
        below = [p for p in below if len(p)]
        above = [p for p in above if len(p)]
        if not below and not above:
            return base
        return np.concatenate([_sorted_union(below), base, _sorted_union(above)])
    return _sorted_union(parts)


def _sorted_union(parts: list[np.ndarray]) -> np.ndarray:
    """The sorted union of sorted int64 arrays: a sort of sorted runs and a mask."""
    if not parts:
        return np.zeros(0, dtype=np.int64)
    out = np.sort(np.concatenate(parts), kind="stable")
    keep = np.empty(len(out), dtype=bool)
    keep[:1] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def _concat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return b if len(a) == 0 else np.concatenate([a, b])


class RunIndex:
    """What one run holds, cached for the views and extended as the run grows.

    Get it with :meth:`of` so that views of the same run object share it. All
    methods are safe to call from the poller thread and the kernel's thread.
    """

    _shared: weakref.WeakKeyDictionary[Any, RunIndex] = weakref.WeakKeyDictionary()
    _shared_lock = threading.Lock()

    def __init__(self, run: Any) -> None:
        self.run = run
        self.lock = threading.RLock()
        self._scalars: dict[str, Series] | None = None
        self._steps: dict[str, np.ndarray] = {}
        self._scalar_steps: np.ndarray | None = None
        self._scalar_counts: dict[str, int] | None = None
        self._positions: np.ndarray | None = None
        self.version = 0
        """Bumped by every refresh that found something new."""

    @classmethod
    def of(cls, run: Any) -> RunIndex:
        """The shared index of ``run`` (made on first use)."""
        with cls._shared_lock:
            index = cls._shared.get(run)
            if index is None:
                index = cls._shared[run] = cls(run)
            return index

    # -- scalars -------------------------------------------------------------------------

    def scalars(self) -> dict[str, Series]:
        """Every scalar by name (a copy of the dict; the arrays are shared, do not modify)."""
        with self.lock:
            if self._scalars is None:
                self._scalars = {}
                self._add_scalars(self.run.scalars())
            return dict(self._scalars)

    def _add_scalars(self, frame: Any) -> bool:
        assert self._scalars is not None
        if len(frame) == 0:
            return False
        for name, rows in frame.groupby("name", sort=True):
            steps = rows["step"].to_numpy(dtype=np.int64)
            values = rows["value"].to_numpy(dtype=np.float64)
            old = self._scalars.get(str(name))
            if old is None:
                self._scalars[str(name)] = Series(steps, values)
            else:
                self._scalars[str(name)] = Series(
                    _concat(old.steps, steps), _concat(old.values, values)
                )
        return True

    def scalar_steps(self) -> np.ndarray:
        """Sorted steps any scalar was logged at (int64; from the run's runs of steps)."""
        with self.lock:
            if self._scalar_steps is None:
                self._scalar_steps = np.asarray(self.run.recorded_steps("scalars"), dtype=np.int64)
            return self._scalar_steps

    def scalar_counts(self) -> dict[str, int]:
        """Rows logged of each scalar (from the run's summaries; watched for growth)."""
        with self.lock:
            if self._scalar_counts is None:
                self._scalar_counts = self.run.scalar_counts()
            return dict(self._scalar_counts)

    # -- captures ------------------------------------------------------------------------

    def steps(self, signal: str) -> np.ndarray:
        """Sorted steps with layer_stats rows for ``signal`` (int64), or with histograms
        of it for ``"histograms:<signal>"`` (the distributions' steps)."""
        with self.lock:
            steps = self._steps.get(signal)
            if steps is None:
                steps = self._steps[signal] = self._read_steps(signal)
            return steps

    def _read_steps(self, source: str) -> np.ndarray:
        if source.startswith("histograms:"):
            return np.asarray(self.run.recorded_steps(source), dtype=np.int64)
        return np.asarray(self.run.steps(source), dtype=np.int64)

    def capture_at(self, signal: str, step: int) -> int | None:
        """The latest capture of ``signal`` at or before ``step`` (None: none yet);
        ``signal`` as for :meth:`steps`."""
        steps = self.steps(signal)
        i = int(np.searchsorted(steps, step, "right")) - 1
        return int(steps[i]) if i >= 0 else None

    def positions(self) -> np.ndarray:
        """Every step anything was recorded at: scalars, captures, predictions (sorted)."""
        with self.lock:
            if self._positions is None:
                parts = [self.scalar_steps()]
                parts += [self.steps(signal) for signal in SIGNALS]
                for split in self.run.splits():
                    parts.append(np.asarray(self.run.prediction_steps(split), dtype=np.int64))
                self._positions = _union([p for p in parts if len(p)])
            return self._positions

    # -- growing -------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Read what was committed since the last look; True when anything was new."""
        with self.lock:
            grew = False
            if self._scalars is not None:
                after = {
                    name: int(s.steps[-1]) for name, s in self._scalars.items() if len(s.steps)
                }
                grew |= self._add_scalars(self.run.scalars_after(after))
            # the runs of steps: a few rows, whatever the run's length
            for signal, known in list(self._steps.items()):
                steps = self._read_steps(signal)
                if len(steps) != len(known):
                    self._steps[signal] = steps
                    grew = True
            if self._scalar_steps is not None:
                steps = np.asarray(self.run.recorded_steps("scalars"), dtype=np.int64)
                if len(steps) != len(self._scalar_steps):
                    self._scalar_steps = steps
                    grew = True
            if self._scalar_counts is not None:
                counts = self.run.scalar_counts()
                if counts != self._scalar_counts:
                    self._scalar_counts = counts
                    grew = True
            if grew:
                self._positions = None
                self.version += 1
            elif self._positions is not None and self._predictions_grew():
                self._positions = None
                self.version += 1
                grew = True
            return grew

    def _predictions_grew(self) -> bool:
        assert self._positions is not None
        last = int(self._positions[-1]) if len(self._positions) else -1
        for split in self.run.splits():
            steps = self.run.prediction_steps(split)
            if len(steps) and int(steps[-1]) > last:
                return True
        return False
