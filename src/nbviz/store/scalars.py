"""Read queries on the ``meta`` and ``scalars`` tables: the run's description and its curves."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from nbviz.store.columns import frame, json_value
from nbviz.store.query import ReaderBase, close_matches, skip_scan_sql

__all__ = ["ScalarQueries"]

_COLUMNS = ("step", "name", "value", "wall_time")


class ScalarQueries(ReaderBase):
    """``meta`` values and logged scalars."""

    def meta(self, key: str | None = None, default: Any = None) -> Any:
        """One meta value (decoded JSON), or the whole meta dict when ``key`` is None."""
        if key is None:
            return {k: json_value(v) for k, v in self._q("SELECT key, value FROM meta")}
        value = self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return default if value is None else json_value(value)

    def scalar_names(self) -> list[str]:
        """Names of the logged scalars, sorted."""
        return [r[0] for r in self._q(skip_scan_sql("scalars", "name"))]

    def scalars(self, names: str | Sequence[str] | None = None) -> pd.DataFrame:
        """Scalars as a frame ``[step, name, value, wall_time]`` sorted by name, step.

        ``names``: one name, a list, or None for all. An unknown name raises
        ValueError naming close matches. NaN values come back as NaN.
        """
        sql = "SELECT step, name, value, wall_time FROM scalars"
        params: list[Any] = []
        if names is not None:
            names = [names] if isinstance(names, str) else list(names)
            known = set(self.scalar_names())
            for name in names:
                if name not in known:
                    raise ValueError(
                        f"no scalar named {name!r}; {close_matches(name, sorted(known))}"
                    )
            sql += " WHERE name IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(names))
        rows = self._q(sql + " ORDER BY name, step", params)
        return frame(rows, _COLUMNS, "isff")

    def scalars_after(self, after: Mapping[str, int]) -> pd.DataFrame:
        """Scalars logged after a known step, per name: what a view following the run lacks.

        ``after`` maps a name to the last step already seen; names not in it
        return every row. Same columns and order as :meth:`scalars`. Each name is
        an index range scan, so this stays cheap on long runs.
        """
        frames = []
        for name in self.scalar_names():
            rows = self._q(
                "SELECT step, name, value, wall_time FROM scalars WHERE name = ? AND step > ? "
                "ORDER BY step",
                (name, int(after.get(name, -(2**62)))),
            )
            if rows:
                frames.append(pd.DataFrame(rows, columns=list(_COLUMNS)))
        if not frames:
            return self.scalars().iloc[0:0]
        out = pd.concat(frames, ignore_index=True)
        out["value"] = out["value"].astype(np.float64)  # SQL NULL (a NaN) -> NaN
        return out
