"""Every view's data for people: tidy DataFrames and bqplot Figures.

A view's ``data()`` (or its own named methods) gives what it shows as a tidy
pandas DataFrame, the same table its menu downloads as CSV; ``figure()`` gives
it as a bqplot ``Figure`` for ipywidgets layouts of one's own. The views build
their frames with :func:`frame` and their figures with the few builders here
(bars, lines, a heatmap, a scatter), so every figure looks and reads alike.

Most views build their CSV in the browser from what they hold. A view whose
browser side holds less than its table (the projector's and the data map's
points travel as a few bytes each, without ids) answers a ``{"type": "table"}``
message with ``data()`` itself (:func:`answer_table_requests`): numeric columns
as binary float64 buffers, the others as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import is_bool_dtype, is_numeric_dtype

from nbviz.widgets.wire import array_trait_payload

__all__ = [
    "answer_table_requests",
    "bars_figure",
    "frame",
    "heatmap_figure",
    "lines_figure",
    "scatter_figure",
    "table_message",
]

_BLUE = "#0072b2"


def frame(rows: Sequence[Mapping[str, Any]] | Mapping[str, Any], columns: Sequence[str]) -> Any:
    """A DataFrame of ``rows`` (records, or a mapping of columns) with exactly ``columns``,
    in that order, also when there are no rows (so an empty view still names them)."""
    if isinstance(rows, Mapping):
        return pd.DataFrame({c: rows[c] for c in columns}, columns=list(columns))
    return pd.DataFrame([{c: r.get(c) for c in columns} for r in rows], columns=list(columns))


def _figure(marks: list[Any], axes: list[Any], title: str) -> Any:
    import bqplot as bq

    return bq.Figure(
        marks=marks,
        axes=axes,
        title=title,
        fig_margin={"top": 40, "bottom": 50, "left": 70, "right": 20},
    )


def bars_figure(labels: Sequence[str], values: Any, *, title: str, y_label: str) -> Any:
    """One bar per label (NaN bars are drawn empty); labels along x."""
    import bqplot as bq

    sx, sy = bq.OrdinalScale(), bq.LinearScale()
    y = np.asarray(values, dtype=np.float64)
    bars = bq.Bars(
        x=[str(v) for v in labels],
        y=np.where(np.isfinite(y), y, 0.0),
        scales={"x": sx, "y": sy},
        colors=[_BLUE],
    )
    axes = [
        bq.Axis(scale=sx, tick_rotate=-30 if len(labels) > 6 else 0),
        bq.Axis(scale=sy, side="left", label=y_label),
    ]
    return _figure([bars], axes, title)


def lines_figure(x: Any, ys: Mapping[str, Any], *, title: str, x_label: str, y_label: str) -> Any:
    """One line per entry of ``ys`` (name -> values over ``x``), with a legend."""
    import bqplot as bq

    if not ys:
        raise ValueError(f"{title}: nothing to draw (no series)")
    sx, sy = bq.LinearScale(), bq.LinearScale()
    names = list(ys)
    lines = bq.Lines(
        x=np.asarray(x, dtype=np.float64),
        y=np.vstack([np.asarray(ys[n], dtype=np.float64) for n in names]),
        labels=names,
        display_legend=len(names) > 1,
        scales={"x": sx, "y": sy},
    )
    axes = [
        bq.Axis(scale=sx, label=x_label),
        bq.Axis(scale=sy, side="left", label=y_label),
    ]
    return _figure([lines], axes, title)


def heatmap_figure(
    matrix: Any, *, title: str, row_label: str, column_label: str, colors: str = "viridis"
) -> Any:
    """A bqplot ``GridHeatMap`` of ``matrix`` (row 0 at the top, as the views draw it)."""
    import bqplot as bq

    values = np.asarray(matrix, dtype=np.float64)
    if values.ndim != 2 or 0 in values.shape:
        raise ValueError(f"{title}: nothing to draw (matrix of shape {values.shape})")
    sx, sy = bq.OrdinalScale(), bq.OrdinalScale(reverse=True)
    sc = bq.ColorScale(scheme=colors)
    grid = bq.GridHeatMap(
        color=values,
        row=np.arange(values.shape[0]),
        column=np.arange(values.shape[1]),
        scales={"row": sy, "column": sx, "color": sc},
    )
    axes = [
        bq.Axis(scale=sx, label=column_label),
        bq.Axis(scale=sy, side="left", label=row_label),
        bq.ColorAxis(scale=sc, side="right"),
    ]
    return _figure([grid], axes, title)


def scatter_figure(
    x: Any,
    y: Any,
    *,
    title: str,
    x_label: str,
    y_label: str,
    color: Any = None,
    color_label: str = "",
) -> Any:
    """A bqplot ``Scatter`` of ``(x, y)``, coloured by ``color`` (numbers) where given."""
    import bqplot as bq

    sx, sy = bq.LinearScale(), bq.LinearScale()
    scales: dict[str, Any] = {"x": sx, "y": sy}
    kwargs: dict[str, Any] = {}
    axes = [
        bq.Axis(scale=sx, label=x_label),
        bq.Axis(scale=sy, side="left", label=y_label),
    ]
    if color is not None:
        values = np.asarray(color, dtype=np.float64)
        if np.isfinite(values).any():
            sc = bq.ColorScale(scheme="viridis")
            scales["color"] = sc
            kwargs["color"] = np.where(np.isfinite(values), values, np.nanmin(values))
            axes.append(bq.ColorAxis(scale=sc, side="right", label=color_label))
    scatter = bq.Scatter(
        x=np.asarray(x, dtype=np.float64),
        y=np.asarray(y, dtype=np.float64),
        scales=scales,
        default_size=16,
        colors=[_BLUE],
        **kwargs,
    )
    return _figure([scatter], axes, title)


def table_message(table: Any) -> tuple[dict[str, Any], list[bytes]]:
    """``table`` (a DataFrame) as a message and its buffers: numeric columns as float64
    buffers (integers too large for a float64 go as text), the others as text lists
    (None for missing), booleans as booleans."""
    columns: list[dict[str, Any]] = []
    buffers: list[bytes] = []
    for name in table.columns:
        col = table[name]
        entry: dict[str, Any] = {"name": str(name)}
        if is_numeric_dtype(col) and not is_bool_dtype(col):
            try:
                payload = array_trait_payload(col.to_numpy(), dtype="<f8")
            except (ValueError, TypeError):
                payload = None
            if payload is not None:
                entry.update(dtype=payload["dtype"], shape=payload["shape"], buffer=len(buffers))
                buffers.append(payload["data"])
                columns.append(entry)
                continue
        if is_bool_dtype(col):
            entry["values"] = [bool(v) for v in col]
        else:
            entry["values"] = [None if _missing(v) else str(v) for v in col]
        columns.append(entry)
    return {"type": "table", "rows": int(len(table)), "columns": columns}, buffers


def _missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):  # a list or array in a cell: not missing
        return False


def answer_table_requests(view: Any) -> None:
    """Answer the browser's ``{"type": "table", "request": r}`` messages to ``view`` with
    ``view.data()`` (see :func:`table_message`), the reply carrying the same ``request``.

    Where ``view.data()`` (or its encoding) raises, the reply is
    ``{"type": "table", "request": r, "error": "<ExcType>: <message>"}``, so that the
    menu says why rather than waiting out its time limit as if no kernel were there.
    """

    def on_msg(_widget: Any, content: Any, _buffers: Sequence[Any]) -> None:
        if not isinstance(content, dict) or content.get("type") != "table":
            return
        request = content.get("request")
        try:
            reply, buffers = table_message(view.data())
        except Exception as err:  # any failure is told to the browser, whatever it is
            view.send({"type": "table", "request": request, "error": _error_text(err)}, [])
            return
        reply["request"] = request
        view.send(reply, buffers)

    view.on_msg(on_msg)


def _error_text(err: BaseException) -> str:
    """``"<ExcType>: <message>"`` (the type alone where the message is empty)."""
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
