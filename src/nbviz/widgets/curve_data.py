"""LossCurves' data for people and other tools: a DataFrame, and a bqplot Figure.

``curves_frame`` is the full-resolution data behind the view (what ``data()``
returns); ``curves_figure`` draws one of its panels with bqplot, for someone
composing their own ipywidgets layout (the view itself is a canvas, see
:mod:`nbviz.widgets.loss_curves`). Both respect the view's selected runs,
grouping and x axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nbviz.widgets.time_axes import X_LABELS
from nbviz.widgets.wire import array_from_payload

__all__ = ["curves_figure", "curves_frame", "panel_series"]

#: The views' categorical colours (js/lib/color.js), in order.
PALETTE = (
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9",
    "#d55e00", "#f0e442", "#332288", "#882255", "#999933",
)  # fmt: skip
_RUN_COLUMNS = ["run", "name", "step", "wall_time", "relative_time", "value"]
_GROUP_COLUMNS = ["group", "name", "step", "x", "mean", "min", "max", "runs"]


def _shown_runs(view: Any) -> list[str]:
    chosen = set(view.selected_runs)
    return [r for r in view.runs if not chosen or r in chosen]


def curves_frame(view: Any) -> pd.DataFrame:
    """The view's curves, tidy: per run at full resolution, or per group and bucket."""
    if view.group_by:
        parts = [
            pd.DataFrame(
                {
                    "group": label,
                    "name": name,
                    "step": band.steps,
                    "x": band.x,
                    "mean": band.mean,
                    "min": band.lo,
                    "max": band.hi,
                    "runs": members,
                }
            )
            for label, name, band, members in view._bands.values()
        ]
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        return frame.reindex(columns=_GROUP_COLUMNS)
    parts = []
    shown = set(_shown_runs(view))
    for run_name, index in zip(view.runs, view._indexes):
        if run_name not in shown:
            continue
        rows = index.run.scalars()  # every row: what a person asked for, not a redraw
        origin = index.run.first_wall_time()
        parts.append(
            pd.DataFrame(
                {
                    "run": run_name,
                    "name": rows["name"],
                    "step": rows["step"],
                    "wall_time": rows["wall_time"],
                    "relative_time": rows["wall_time"] - origin,
                    "value": rows["value"],
                }
            )
        )
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return frame.reindex(columns=_RUN_COLUMNS)


def panel_series(view: Any, panel: str | None) -> tuple[str, list[dict[str, Any]]]:
    """The panel's stem and its series as the view draws them: label, x, y (and lo/hi
    for a group)."""
    if not view.panels:
        raise ValueError("LossCurves.figure: nothing to draw yet (no scalars logged)")
    stem = view.panels[0] if panel is None else panel
    if stem not in view.panels:
        raise ValueError(f"LossCurves.figure: no panel {stem!r}; panels: {', '.join(view.panels)}")
    shown = set(_shown_runs(view))
    out = []
    for entry in view.series:
        if entry["stem"] != stem or (not view.group_by and entry["run"] not in shown):
            continue
        x = array_from_payload(entry["x"] if "x" in entry else entry["steps"])
        label = f"{entry['run']} {entry['name']}" if len(view.runs) > 1 else entry["name"]
        line = {"label": label, "x": np.asarray(x, np.float64)}
        line["y"] = array_from_payload(entry["values"])
        if "lo" in entry:
            line["lo"] = array_from_payload(entry["lo"])
            line["hi"] = array_from_payload(entry["hi"])
        out.append(line)
    return stem, out


def curves_figure(view: Any, panel: str | None = None) -> Any:
    """A bqplot Figure of one panel of the view (see ``LossCurves.figure``)."""
    import bqplot as bq

    stem, lines = panel_series(view, panel)
    wall = view.x_axis == "wall"
    sx = bq.DateScale() if wall else bq.LinearScale()
    sy = bq.LogScale() if view.log_y else bq.LinearScale()
    marks = []
    for k, line in enumerate(lines):
        color = PALETTE[k % len(PALETTE)]
        x = (line["x"] * 1000).astype("datetime64[ms]") if wall else line["x"]
        if "lo" in line:
            marks.append(
                bq.Lines(
                    x=x,
                    y=np.vstack([line["lo"], line["hi"]]),
                    scales={"x": sx, "y": sy},
                    fill="between",
                    colors=[color],
                    fill_colors=[color],
                    fill_opacities=[0.2],
                    stroke_width=0,
                )
            )
        marks.append(
            bq.Lines(
                x=x,
                y=line["y"],
                scales={"x": sx, "y": sy},
                colors=[color],
                labels=[line["label"]],
                display_legend=True,
            )
        )
    axes = [
        bq.Axis(scale=sx, label=X_LABELS[view.x_axis]),
        bq.Axis(scale=sy, side="left", label=stem),
    ]
    return bq.Figure(marks=marks, axes=axes, title=stem, legend_location="top-right")
