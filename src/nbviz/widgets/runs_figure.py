"""RunsTable's runs as a bqplot Figure: a config key against the chosen metric.

For people composing their own ipywidgets layouts: one point per run, the
selected runs in colour and the others grey, run names as tooltips.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["runs_figure"]


def runs_figure(table: Any, x: str | None = None) -> Any:
    """A bqplot scatter of ``x`` (a config key; default the first numeric axis) against
    ``table.metric``."""
    import bqplot as bq

    numeric = [a for a in table.axes if a["kind"] == "number" and not a["metric"]]
    if x is None:
        if not numeric:
            raise ValueError("RunsTable.figure: no numeric config key varies across these runs")
        axis = numeric[0]
    else:
        key = x if x.startswith("config:") else f"config:{x}"
        found = [a for a in table.axes if a["key"] == key and not a["metric"]]
        if not found:
            keys = ", ".join(a["label"] for a in table.axes if not a["metric"])
            raise ValueError(f"RunsTable.figure: no varying config key {x!r}; keys: {keys}")
        axis = found[0]
    metric = table.metric
    label = next((c["label"] for c in table.columns if c["key"] == metric), metric)
    chosen = set(table.selected_runs)
    xs, ys, names, colors = [], [], [], []
    for row, coords in zip(table.rows, table._coords):
        value = row["cells"].get(metric)
        if coords.get(axis["key"]) is None or value is None:
            continue
        xs.append(coords[axis["key"]])
        ys.append(value)
        names.append(row["name"])
        colors.append("#0072b2" if not chosen or row["name"] in chosen else "#bdbdbd")
    sx, sy = bq.LinearScale(), bq.LinearScale()
    tooltip = bq.Tooltip(fields=["name"], labels=["run"])
    scatter = bq.Scatter(
        x=np.asarray(xs, dtype=np.float64),
        y=np.asarray(ys, dtype=np.float64),
        names=names,
        display_names=False,
        colors=colors,
        scales={"x": sx, "y": sy},
        tooltip=tooltip,
    )
    x_label = axis["label"]
    if axis["kind"] == "category":
        x_label += " (" + ", ".join(f"{i}={c}" for i, c in enumerate(axis["categories"])) + ")"
    axes = [bq.Axis(scale=sx, label=x_label), bq.Axis(scale=sy, side="left", label=label)]
    return bq.Figure(marks=[scatter], axes=axes, title=f"{label} by {axis['label']}")
