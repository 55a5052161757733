"""What a view reads once per evaluation and keeps for the few evaluations in view.

A gallery asks for a sample's panels or tokens card by card; each evaluation's
arrays are read once, kept by ``(split, step)``, and dropped all together when
more than :data:`KEPT` are held (a scrubber sweeping through the run).
"""

from __future__ import annotations

from typing import Any

KEPT = 5


class PerEvaluation:
    """A memo of :meth:`_read` by ``(split, step)``; subclasses say what is read."""

    def __init__(self, run: Any) -> None:
        self._run = run
        self._at: dict[tuple[str, int], Any] = {}

    def clear(self) -> None:
        self._at.clear()

    def _read(self, split: str, at: int) -> Any:
        raise NotImplementedError

    def _kept(self, split: str, at: int) -> Any:
        key = (split, at)
        if key not in self._at:
            got = self._read(split, at)
            if len(self._at) >= KEPT:
                self._at.clear()
            self._at[key] = got
        return self._at[key]
