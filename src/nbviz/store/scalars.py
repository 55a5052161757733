"""Read queries on the ``meta`` and ``scalars`` tables: the run's description and its curves."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from nbviz.store.columns import frame, json_value
from nbviz.store.errors import RunFileError, StoredValueError
from nbviz.store.query import ReaderBase, close_matches, skip_scan_sql

__all__ = ["ScalarQueries"]

_COLUMNS = ("step", "name", "value", "wall_time")


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def _list_of(kind: type) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(isinstance(x, kind) for x in v)


def _model_summary(v: Any) -> bool:
    modules = v.get("modules", []) if isinstance(v, dict) else None
    return isinstance(modules, list) and all(isinstance(m, dict) for m in modules)


#: What each meta value nbviz writes is, so that a foreign or damaged value is
#: refused where it is read, not met as an AttributeError in a view.
META_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "schema_version": (lambda v: type(v) is int, "an integer"),
    "created": (_is_number, "a number (seconds since the epoch)"),
    "nbviz_version": (lambda v: isinstance(v, str), "a string"),
    "torch_version": (lambda v: isinstance(v, str), "a string"),
    "name": (lambda v: isinstance(v, str), "a string"),
    "config": (lambda v: isinstance(v, dict), "an object"),
    "class_names": (_list_of(str), "a list of strings"),
    "model": (_model_summary, "an object whose modules are a list of objects"),
    "probe": (lambda v: isinstance(v, dict), "an object"),
    "distributed": (lambda v: isinstance(v, dict), "an object"),
    "import_notes": (_list_of(str), "a list of strings"),
    "top_tokens_left_out": (lambda v: isinstance(v, dict), "an object"),
    "token_texts": (
        lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        "an object of strings",
    ),
}


class ScalarQueries(ReaderBase):
    """``meta`` values and logged scalars."""

    def meta(self, key: str | None = None, default: Any = None) -> Any:
        """One meta value (decoded JSON), or the whole meta dict when ``key`` is None.

        A value of a known key that is not of the kind nbviz writes (see
        :data:`META_KINDS`) raises RunFileError naming the key and the value.
        """
        if key is None:
            return {k: self._meta_value(k, v) for k, v in self._q("SELECT key, value FROM meta")}
        if not isinstance(key, str):
            raise TypeError(f"meta: key must be a string, got {key!r}")
        value = self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return default if value is None else self._meta_value(key, value)

    def _meta_value(self, key: str, text: Any) -> Any:
        try:
            value = json_value(text)
        except StoredValueError as exc:
            raise self._bad_meta(key, f"unreadable: {exc}") from None
        kind = META_KINDS.get(key)
        if kind is not None and value is not None and not kind[0](value):
            shown = repr(value) if len(repr(value)) < 60 else repr(value)[:57] + "..."
            name = type(value).__name__
            article = "an" if name[0] in "aeiou" else "a"
            raise self._bad_meta(key, f"{shown} ({article} {name}) where nbviz writes {kind[1]}")
        return value

    def _bad_meta(self, key: str, problem: str) -> RunFileError:
        return RunFileError(
            self._file,
            f"its meta value {key!r} is {problem}: the run was changed by something other "
            "than nbviz, or is damaged",
            "record the run again, or fix that value (it is JSON text in the meta table); "
            "`nbviz info RUN` lists what can still be read",
        )

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
