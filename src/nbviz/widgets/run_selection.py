"""Choosing runs among many: parallel-coordinate axes, filters and brushes.

A ``RunsTable`` of a sweep draws every run as a line across parallel axes, one
per configuration key that varies (numbers on a linear axis, anything else as
categories in sorted order) and a last one for a chosen metric. Each run's
position on each axis is its *coordinate* (the number, or the category's
index), so a brush, a ``[lo, hi]`` range on one axis, selects the same way on
any axis. A filter keeps the runs whose config value is one of those allowed
(by their text, as shown). The runs that pass every filter and every brush
are the selection.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_CATEGORIES", "axes_of", "passes", "value_text"]

#: Config keys with more distinct values than this get no filter menu (brush them).
MAX_CATEGORIES = 12


def value_text(value: Any) -> str:
    """A config value as shown and filtered on: ``0.1``, ``adam``, ``true``, ``''`` for None."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def axes_of(
    rows: Sequence[Mapping[str, Any]], config_keys: Sequence[str], metric: Mapping[str, Any] | None
) -> tuple[list[dict[str, Any]], list[dict[str, float | None]]]:
    """The axes (config keys that vary, then ``metric``) and each row's coordinates on them.

    An axis: ``key``, ``label``, ``kind`` ("number" | "category"), ``lo``/``hi``
    (its coordinate range), ``categories`` (texts, for a category axis) and
    ``filter`` (whether it gets a filter menu).
    """
    axes: list[dict[str, Any]] = []
    coords: list[dict[str, float | None]] = [{} for _ in rows]
    keys = [(f"config:{k}", k) for k in config_keys]
    if metric is not None:
        keys.append((metric["key"], metric["label"]))
    for key, label in keys:
        values = [row["cells"].get(key) for row in rows]
        present = [v for v in values if v is not None]
        texts = sorted({value_text(v) for v in values})
        is_metric = metric is not None and key == metric["key"]
        if not is_metric and len(texts) < 2:
            continue  # a key every run shares says nothing about the differences
        axis: dict[str, Any] = {"key": key, "label": label, "metric": is_metric}
        axis["filter"] = not is_metric and len(texts) <= MAX_CATEGORIES
        axis["options"] = texts if axis["filter"] else []
        if present and all(_is_number(v) for v in present) or is_metric:
            nums = [float(v) for v in present if _is_number(v)]
            axis.update(kind="number", lo=min(nums, default=0.0), hi=max(nums, default=1.0))
            for c, v in zip(coords, values):
                c[key] = float(v) if _is_number(v) else None
        else:
            cats = sorted({value_text(v) for v in present})
            axis.update(kind="category", categories=cats, lo=0.0, hi=float(max(len(cats) - 1, 1)))
            for c, v in zip(coords, values):
                c[key] = float(cats.index(value_text(v))) if v is not None else None
        axes.append(axis)
    return axes, coords


def passes(
    cells: Mapping[str, Any],
    coords: Mapping[str, float | None],
    filters: Mapping[str, Sequence[str]],
    brushes: Mapping[str, Sequence[float]],
) -> bool:
    """Whether a run passes every filter (its config text is allowed) and every brush
    (its coordinate lies in the range)."""
    for key, allowed in filters.items():
        if allowed and value_text(cells.get(key)) not in allowed:
            return False
    for key, (lo, hi) in brushes.items():
        v = coords.get(key)
        if v is None or not (min(lo, hi) <= v <= max(lo, hi)):
            return False
    return True
