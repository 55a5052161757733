"""Read queries on ``events``: what happened once, at a step (a first non-finite value, ...)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from nbviz.store.columns import frame
from nbviz.store.query import ReaderBase

__all__ = ["EventQueries"]


class EventQueries(ReaderBase):
    """The events of a run."""

    def events(self, kind: str | None = None) -> pd.DataFrame:
        """Events ``[kind, layer, signal, step, detail]`` (detail decoded), sorted by step."""
        sql = "SELECT kind, layer, signal, step, detail FROM events"
        params: list[Any] = []
        if kind is not None:
            sql += " WHERE kind = ?"
            params.append(kind)
        rows = self._q(sql + " ORDER BY step, kind, layer, signal", params)
        return frame(rows, ("kind", "layer", "signal", "step", "detail"), "sssij")
