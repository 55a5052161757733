"""RunsTable: several runs side by side, their configuration beside their results.

One row per run: every configuration key any run has (``nbviz.Run(path,
config={...})``), then for every scalar its final value and its best value
with the step it was reached. "Best" is the minimum, except for names that
read as a score (accuracy, F1, precision, recall, AUC, IoU, ...), where it is
the maximum. Clicking a row sets ``selected`` (a run name); link it to an
overlaid ``LossCurves``'s ``highlight`` to see that run's curves in front
(``Dashboard`` and ``RunsTable.link`` do this).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import traitlets

from nbviz.widgets.checks import check_known
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import LiveView, view_css
from nbviz.widgets.loss_curves import _unique_names, split_name
from nbviz.widgets.run_groups import flatten_config

__all__ = ["RunsTable", "better", "flatten_config", "summarise"]

_SCORE = re.compile(r"acc|f1|precision|recall|auc|iou|dice|score|bleu|rouge|map\b|top\d", re.I)


def better(name: str) -> str:
    """``"max"`` when a larger ``name`` is better (accuracy and other scores), else ``"min"``."""
    stem, _ = split_name(name)
    return "max" if _SCORE.search(stem) else "min"


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def summarise(steps: np.ndarray, values: np.ndarray, direction: str) -> dict[str, Any]:
    """Final and best finite values of one series, with their steps (None when none is finite).

    ``nonfinite`` counts the NaN/Inf points, which are never taken as best.
    """
    finite = np.isfinite(values)
    out: dict[str, Any] = {
        "final": None,
        "final_step": None,
        "best": None,
        "best_step": None,
        "nonfinite": int((~finite).sum()),
    }
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

    Traits: ``selected`` (the clicked run's name, "" for none), ``sort_by``
    (a column key) and ``descending``.
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

    def __init__(self, runs: Sequence[Any], *, live: bool = True, **kwargs: Any) -> None:
        runs = list(runs) if isinstance(runs, (list, tuple)) else [runs]
        if not runs:
            raise ValueError("RunsTable: no runs given; pass a list of runs")
        super().__init__(**kwargs)
        self._runs = runs
        self._names = _unique_names(runs)
        with self._building(runs, live):
            self._rebuild()

    @traitlets.validate("selected")
    def _check_selected(self, proposal: Any) -> str:
        name = proposal["value"]
        return check_known(
            name, self._names, f"RunsTable.selected: no run named {name!r}", "runs: "
        )

    @traitlets.validate("sort_by")
    def _check_sort(self, proposal: Any) -> str:
        key = proposal["value"]
        keys = [c["key"] for c in self.columns]
        if not keys:
            return key
        return check_known(key, keys, f"RunsTable.sort_by: no column {key!r}", "columns: ")

    def link(self, curves: Any) -> RunsTable:
        """Highlight the selected run in ``curves`` (a LossCurves of the same runs)."""
        traitlets.dlink((self, "selected"), (curves, "highlight"))
        return self

    def _rebuild(self) -> None:
        configs = [flatten_config(run.config) for run in self._runs]
        config_keys = sorted({k for c in configs for k in c})
        scalars = [index.scalars() for index in self._indexes]
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
        for run_name, config, series in zip(self._names, configs, scalars):
            cells: dict[str, Any] = {"run": run_name}
            steps: dict[str, int] = {}
            flags: dict[str, int] = {}
            for k in config_keys:
                cells[f"config:{k}"] = config.get(k)
            for name in names:
                raw = series.get(name)
                if raw is None:
                    continue
                summary = summarise(raw.steps, raw.values, better(name))
                cells[f"final:{name}"] = summary["final"]
                cells[f"best:{name}"] = summary["best"]
                if summary["final_step"] is not None:
                    steps[f"final:{name}"] = summary["final_step"]
                    steps[f"best:{name}"] = summary["best_step"]
                if summary["nonfinite"]:
                    flags[f"final:{name}"] = summary["nonfinite"]
            rows.append({"name": run_name, "cells": cells, "steps": steps, "nonfinite": flags})
        self.columns = columns
        self.rows = rows
        if not names and not config_keys:
            self.empty = (
                "These runs have no configuration and no scalars yet: pass "
                "nbviz.Run(path, config={...}) and call run.log(step, train_loss=...)."
            )
        else:
            self.empty = ""


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
.nbviz-rt-bad { color: #c62828; }
"""
)
