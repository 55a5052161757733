"""RunsTable: several runs side by side, their configuration beside their results.

One row per run: every configuration key any run has (``nbviz.Run(path,
config={...})``), then for every scalar its final value and its best value
with the step it was reached. "Best" is the minimum, except for names that
read as a score (accuracy, F1, precision, recall, AUC, IoU, ...), where it is
the maximum. Clicking a row sets ``selected`` (a run name); link it to an
overlaid ``LossCurves``'s ``highlight`` to see that run's curves in front
(``Dashboard`` and ``RunsTable.link`` do this).

Many runs (a sweep of a hundred): above the table, a parallel-coordinates view
draws each run as a line across one axis per varying config key and one for a
chosen ``metric``; dragging along an axis brushes a range (``brushes``), the
menus filter by config values (``filters``), and the runs passing both are
``selected_runs``. ``link(curves)`` makes a LossCurves draw exactly those, so a
table and curves compose without a Dashboard::

    runs = nbviz.open_runs("runs/")
    curves = nbviz.LossCurves(runs, group_by="optimizer")
    table = nbviz.RunsTable(runs).link(curves)
    ipywidgets.VBox([table, curves])
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import traitlets

from nbviz.widgets.checks import check_known, check_run_name, check_run_names
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import LiveView, reacts_to, view_css
from nbviz.widgets.run_groups import flat_configs, flatten_config
from nbviz.widgets.run_selection import axes_of, passes
from nbviz.widgets.scalar_names import split_name, unique_names

__all__ = ["RunsTable", "better", "bounded_summary", "flatten_config", "summarise"]

#: Buckets a scalar's summary is read in for the table (its final and best values).
SUMMARY_BUCKETS = 64

_SCORE = re.compile(r"acc|f1|precision|recall|auc|iou|dice|score|bleu|rouge|map\b|top\d", re.I)


def better(name: str) -> str:
    """``"max"`` when a larger ``name`` is better (accuracy and other scores), else ``"min"``."""
    stem, _ = split_name(name)
    return "max" if _SCORE.search(stem) else "min"


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def nonfinite_name(value: float) -> str | None:
    """ "NaN", "+Inf" or "-Inf" for a non-finite ``value``; None for a finite one."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return None


def summarise(steps: np.ndarray, values: np.ndarray, direction: str) -> dict[str, Any]:
    """Final and best finite values of one series, with their steps (None when none is finite).

    ``nonfinite`` counts the NaN/Inf points, which are never taken as best; ``end``
    names the last value where it is one of them ("NaN", "+Inf", "-Inf"; else None),
    and ``end_step`` its step: a run that diverged does not read as ending finite.
    """
    finite = np.isfinite(values)
    out: dict[str, Any] = {
        "final": None,
        "final_step": None,
        "best": None,
        "best_step": None,
        "nonfinite": int((~finite).sum()),
        "end": None,
        "end_step": None,
    }
    if len(values) and not finite[-1]:
        out["end"], out["end_step"] = nonfinite_name(float(values[-1])), int(steps[-1])
    if not finite.any():
        return out
    idx = np.flatnonzero(finite)
    out["final"], out["final_step"] = _number(values[idx[-1]]), int(steps[idx[-1]])
    pick = idx[np.argmax(values[idx])] if direction == "max" else idx[np.argmin(values[idx])]
    out["best"], out["best_step"] = _number(values[pick]), int(steps[pick])
    return out


class RunsTable(LiveView):
    """Runs as rows: configuration, then final and best value of every scalar.

    Parameters
    ----------
    runs
        Runs (``nbviz.Run`` or ``nbviz.open_run(...)``), e.g. a learning-rate sweep.
    live
        Follow the runs while they grow.

    metric
        The column on the parallel coordinates' last axis (default: the best
        validation loss, or the first metric); also chosen in the view.

    Traits: ``selected`` (the clicked run's name, "" for none), ``sort_by``
    (a column key), ``descending``, ``metric``, ``filters`` (config column key
    -> the value texts kept), ``brushes`` (axis key -> ``[lo, hi]``) and
    ``selected_runs`` (the runs passing both; empty when neither is set).
    ``data()`` is the table as a DataFrame, ``figure()`` a bqplot scatter of a
    config key against the metric.
    """

    _esm = esm("runs_table")

    columns = traitlets.List(traitlets.Dict(), help="key, label, kind, better").tag(sync=True)
    rows = traitlets.List(traitlets.Dict(), help="One per run: name and cells by key.").tag(
        sync=True
    )
    selected = traitlets.Unicode("", help="The highlighted run's name; '' for none.").tag(sync=True)
    sort_by = traitlets.Unicode(
        "", help="Column key the rows are sorted by; '' keeps run order."
    ).tag(sync=True)
    descending = traitlets.Bool(False).tag(sync=True)
    metric = traitlets.Unicode("", help="Column key on the last parallel axis.").tag(sync=True)
    axes = traitlets.List(traitlets.Dict(), help="The parallel axes.").tag(sync=True)
    coords = traitlets.List(traitlets.Dict(), help="Each row's coordinate on each axis.").tag(
        sync=True
    )
    filters = traitlets.Dict(help="Config column key -> value texts kept.").tag(sync=True)
    brushes = traitlets.Dict(help="Axis key -> [lo, hi] of coordinates kept.").tag(sync=True)
    selected_runs = traitlets.List(
        traitlets.Unicode(), help="Runs passing the filters and brushes; empty: no selection."
    ).tag(sync=True)

    def __init__(
        self, runs: Sequence[Any], *, live: bool = True, metric: str = "", **kwargs: Any
    ) -> None:
        runs = list(runs) if isinstance(runs, (list, tuple)) else [runs]
        if not runs:
            raise ValueError("RunsTable: no runs given; pass a list of runs")
        super().__init__(**kwargs)
        self._runs = runs
        self._names = unique_names(runs)
        self._metric_asked = metric
        with self._building(runs, live):
            self._rebuild()

    @traitlets.validate("selected")
    def _check_selected(self, proposal: Any) -> str:
        return check_run_name("RunsTable.selected", proposal["value"], self._names)

    @traitlets.validate("sort_by")
    def _check_sort(self, proposal: Any) -> str:
        key = proposal["value"]
        keys = [c["key"] for c in self.columns]
        if not keys:
            return key
        return check_known(key, keys, f"RunsTable.sort_by: no column {key!r}", "columns: ")

    @traitlets.validate("metric")
    def _check_metric(self, proposal: Any) -> str:
        key = proposal["value"]
        keys = [c["key"] for c in self.columns if c["kind"] in ("final", "best")]
        if not keys or key == "":
            return key
        return check_known(key, keys, f"RunsTable.metric: no metric column {key!r}", "columns: ")

    @traitlets.validate("selected_runs")
    def _check_selected_runs(self, proposal: Any) -> list[str]:
        return check_run_names("RunsTable.selected_runs", proposal["value"], self._names)

    @traitlets.validate("brushes")
    def _check_brushes(self, proposal: Any) -> dict[str, list[float]]:
        out = {}
        known = [a["key"] for a in self.axes]
        for key, span in dict(proposal["value"]).items():
            check_known(key, known, f"RunsTable.brushes: no axis {key!r}", "axes: ")
            try:
                lo, hi = (float(v) for v in span)
            except (TypeError, ValueError):
                raise traitlets.TraitError(
                    f"RunsTable.brushes[{key!r}] must be [lo, hi] numbers, got {span!r:.60}"
                ) from None
            out[key] = [min(lo, hi), max(lo, hi)]
        return out

    @reacts_to("metric")
    def _metric_changed(self, change: Any) -> None:
        self._rebuild()

    @reacts_to("filters", "brushes")
    def _selection_changed(self, change: Any) -> None:
        self._select()

    def _set_axes(self, config_keys: list[str]) -> None:
        metrics = {c["key"]: c for c in self.columns if c["kind"] in ("final", "best")}
        if self.metric not in metrics:
            asked = self._metric_asked
            if asked and asked not in metrics:
                raise ValueError(
                    f"RunsTable: no metric column {asked!r}; columns: {', '.join(metrics)}"
                )
            self.metric = asked or _default_metric(self.columns)
        axes, self._coords = axes_of(self.rows, config_keys, metrics.get(self.metric))
        known = {a["key"] for a in axes}
        self.axes = axes
        self.coords = self._coords
        self.brushes = {k: v for k, v in self.brushes.items() if k in known}
        self.filters = {k: v for k, v in self.filters.items() if f"{k}" in known}
        self._select()

    def _select(self) -> None:
        if not self.filters and not self.brushes:
            self.selected_runs = []
            return
        self.selected_runs = [
            row["name"]
            for row, coords in zip(self.rows, self._coords)
            if passes(row["cells"], coords, self.filters, self.brushes)
        ]

    def link(self, curves: Any) -> RunsTable:
        """Make ``curves`` (a LossCurves of the same runs) draw the selected runs and
        emphasise the clicked one: a plain traitlets link, no Dashboard needed."""
        traitlets.dlink((self, "selected"), (curves, "highlight"))
        traitlets.dlink((self, "selected_runs"), (curves, "selected_runs"))
        return self

    def data(self) -> Any:
        """The table as a DataFrame: ``run``, the config keys, each ``final``/``best``
        metric, and ``selected`` (in ``selected_runs``)."""
        import pandas as pd

        chosen = set(self.selected_runs)
        labels = {c["key"]: c["label"] for c in self.columns}
        frame = pd.DataFrame(
            [{labels[k]: row["cells"].get(k) for k in labels} for row in self.rows],
            columns=list(labels.values()),
        )
        frame["selected"] = [row["name"] in chosen for row in self.rows]
        return frame

    def figure(self, x: str | None = None) -> Any:
        """A bqplot Figure: config key ``x`` (default: the first numeric axis) against
        the metric, one point per run, the selected runs in colour."""
        from nbviz.widgets.runs_figure import runs_figure

        return runs_figure(self, x)

    def _rebuild(self) -> None:
        configs, config_keys = flat_configs(self._runs)
        scalars = [index.scalar_counts() for index in self._indexes]
        names = sorted({n for s in scalars for n in s}, key=_metric_order)
        columns: list[dict[str, Any]] = [{"key": "run", "label": "run", "kind": "run"}]
        columns += [{"key": f"config:{k}", "label": k, "kind": "config"} for k in config_keys]
        for name in names:
            direction = better(name)
            for kind in ("final", "best"):
                columns.append(
                    {
                        "key": f"{kind}:{name}",
                        "label": f"{kind} {name}",
                        "kind": kind,
                        "better": direction,
                        "metric": name,
                    }
                )
        rows = []
        for run, run_name, config, series in zip(self._runs, self._names, configs, scalars):
            cells: dict[str, Any] = {"run": run_name}
            steps: dict[str, int] = {}
            flags: dict[str, int] = {}
            ends: dict[str, dict[str, Any]] = {}
            for k in config_keys:
                cells[f"config:{k}"] = config.get(k)
            for name in names:
                if name not in series:
                    continue
                summary = bounded_summary(run, name, better(name))
                cells[f"final:{name}"] = summary["final"]
                cells[f"best:{name}"] = summary["best"]
                if summary["final_step"] is not None:
                    steps[f"final:{name}"] = summary["final_step"]
                    steps[f"best:{name}"] = summary["best_step"]
                if summary["nonfinite"]:
                    flags[f"final:{name}"] = summary["nonfinite"]
                if summary["end"] is not None:
                    ends[f"final:{name}"] = {"value": summary["end"], "step": summary["end_step"]}
            rows.append(
                {"name": run_name, "cells": cells, "steps": steps, "nonfinite": flags, "ends": ends}
            )
        self.columns = columns
        self.rows = rows
        self._set_axes(config_keys)
        if not names and not config_keys:
            self.empty = (
                "These runs have no configuration and no scalars yet: pass "
                "nbviz.Run(path, config={...}) and call run.log(step, train_loss=...)."
            )
        else:
            self.empty = ""


def bounded_summary(run: Any, name: str, direction: str) -> dict[str, Any]:
    """:func:`summarise` of a run's scalar from its stored summaries: a few dozen
    buckets and a seek or two, whatever the run's length (a table of a hundred long
    runs reads no series whole)."""
    s = run.scalar_summary(name, SUMMARY_BUCKETS)
    f = s.frame
    if s.width == 0:
        return summarise(
            f["step"].to_numpy(dtype=np.int64),
            f["value"].to_numpy(dtype=np.float64, na_value=np.nan),
            direction,
        )
    n_finite = f["n_finite"].to_numpy(dtype=np.int64)
    out: dict[str, Any] = {"final": None, "final_step": None, "best": None, "best_step": None}
    out["nonfinite"] = int(f["n"].to_numpy(dtype=np.int64).sum() - n_finite.sum())
    end = f["last"].iloc[-1]
    end = float("nan") if end is None else float(end)
    out["end"] = nonfinite_name(end)
    out["end_step"] = None if out["end"] is None else int(f["last_step"].iloc[-1])
    col = "max" if direction == "max" else "min"
    extremes = f[col].to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.isfinite(extremes).any():
        return out
    # the first bucket reaching the best value, at the first step it was reached
    target = np.nanmax(extremes) if direction == "max" else np.nanmin(extremes)
    i = int(np.flatnonzero(extremes == target)[0])
    out["best"] = _number(target)
    out["best_step"] = int(f[f"{col}_step"].iloc[i])
    # the last finite value: in the last bucket holding one, read whole if it ends badly
    k = int(np.flatnonzero(n_finite > 0)[-1])
    last = f["last"].iloc[k]
    if last is not None and np.isfinite(last):
        out["final"], out["final_step"] = _number(float(last)), int(f["last_step"].iloc[k])
        return out
    lo, hi = int(f["first_step"].iloc[k]), int(f["last_step"].iloc[k])
    rows = run.scalar_summary(name, int(f["n"].iloc[k]) + 2, step_range=(lo, hi)).frame
    tail = summarise(
        rows["step"].to_numpy(dtype=np.int64),
        rows["value"].to_numpy(dtype=np.float64, na_value=np.nan),
        direction,
    )
    out["final"], out["final_step"] = tail["final"], tail["final_step"]
    return out


def _default_metric(columns: list[dict[str, Any]]) -> str:
    best = [c["key"] for c in columns if c["kind"] == "best"]
    for key in best:
        stem, split = split_name(key.partition(":")[2])
        if "loss" in stem.lower() and split in ("val", "valid", "validation", "test", "eval"):
            return key
    return best[0] if best else ""


def _metric_order(name: str) -> tuple[int, str, str]:
    stem, split = split_name(name)
    rank = 0 if "loss" in stem.lower() else 1 if _SCORE.search(stem) else 2
    return rank, stem.lower(), split


RunsTable._css = view_css(
    """
.nbviz-rt-scroll { overflow: auto; max-height: 420px; }
.nbviz-rt-table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
.nbviz-rt-table th, .nbviz-rt-table td { padding: 2px 8px; text-align: right;
  border-bottom: 1px solid var(--jp-border-color2, #e0e0e0); white-space: nowrap; }
.nbviz-rt-table th { cursor: pointer; position: sticky; top: 0; user-select: none;
  background: var(--jp-layout-color1, #fff); }
.nbviz-rt-table th.nbviz-rt-config, .nbviz-rt-table td.nbviz-rt-config {
  background: var(--jp-layout-color2, #f5f5f5); }
.nbviz-rt-table td:first-child, .nbviz-rt-table th:first-child { text-align: left; }
.nbviz-rt-table tbody tr { cursor: pointer; }
.nbviz-rt-table tbody tr:hover { background: var(--jp-layout-color2, #eeeeee); }
.nbviz-rt-table tbody tr.nbviz-active { outline: 2px solid var(--jp-brand-color1, #1976d2);
  outline-offset: -2px; }
.nbviz-rt-best { font-weight: 700; }
.nbviz-rt-filters { display: inline-flex; flex-wrap: wrap; gap: 0.3em 0.9em; }
.nbviz-rt-pc { overflow-x: auto; }
.nbviz-rt-bad { color: #c62828; }
/* a long config value (or key) is cut with an ellipsis: the run's name stays in view */
.nbviz-rt-table td.nbviz-rt-config, .nbviz-rt-table th.nbviz-rt-config { max-width: 16em;
  overflow: hidden; text-overflow: ellipsis; }
"""
)
