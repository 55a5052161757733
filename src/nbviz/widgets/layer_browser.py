"""LayerBrowser: the model's layers as a table, and one layer's history in detail.

Each row is a module (qualified name, type, output shape, parameter count) with
sparklines and the value at the linked step for three signs of health:
activation zero fraction, gradient norm (of the layer's weight, else of its
output) and the update/weight ratio (:mod:`nbviz.widgets.layer_table`).
Selecting a layer fills its detail (:mod:`nbviz.widgets.layer_detail`):
activation, gradient and weight statistics over the steps; its histograms at
the current step; the per-unit dead map (units x steps of the fraction of
the batch on which a unit was zero; for an attention layer's ``<module>/heads``
row, heads x steps of the fraction of each head's output that is ~0, see
:mod:`nbviz.probes.heads`); and what each unit responds to
(:mod:`nbviz.widgets.unit_explorer`): for a layer whose per-sample unit
summaries ``run.evaluate(..., units_layer=...)`` recorded (or the embedding
layer, whose input ``run.evaluate`` keeps for the projector), choosing a
``unit`` lists the samples that excite it most and least at the evaluation in
view (the latest at or before ``step``). A click on one of those samples
(``map_id``) shows its activations of the layer channel by channel (feature
maps of a convolution) where ``run.capture`` recorded them.

Long runs are summarised, never sent whole: sparklines use about a hundred
captures; detail series at most ``DETAIL_POINTS`` buckets (min of the minima,
max of the maxima, peak norm, so spikes survive); the dead map the captures up
to the current step within a window. ``notice`` and the detail's ``notice`` say
what is shown.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np
import pandas as pd
import traitlets

from nbviz.widgets.checks import check_choice, check_run, check_split
from nbviz.widgets.frontend import esm
from nbviz.widgets.layer_detail import (
    STAT_FIELDS,
    HistogramsAtStep,
    dead_map,
    heads_map,
    stats_detail,
)
from nbviz.widgets.layer_table import (
    METRICS,
    layer_rows,
    recorded_layers,
    sparklines,
    values_at,
    with_head_rows,
)
from nbviz.widgets.live import LiveView, linked_step, reacts_to, view_css
from nbviz.widgets.splits import choose_split
from nbviz.widgets.unit_explorer import UnitExplorer
from nbviz.widgets.view_data import bars_figure, frame
from nbviz.widgets.wire import array_from_payload

__all__ = ["LayerBrowser"]

SEVERITIES = ("info", "warning", "error")


class LayerBrowser(LiveView):
    """The layers of a run's model, with health sparklines and a per-layer detail.

    Parameters
    ----------
    run
        A run (``nbviz.Run`` or ``nbviz.open_run(...)``) recorded with a probe.
    selected_layer
        Qualified module name to open at once ("" for none).
    live
        Follow the run while it grows.

    Traits: ``step`` and ``selected_layer`` (synced, clicking a row sets it),
    ``badges`` (``{layer: [severity, text]}`` or a list of such pairs per
    layer, shown beside the layer; severity info, warning or error).

    ``data()`` is the table at the step as a DataFrame (the view's menu
    downloads it as CSV), ``series()`` the selected layer's statistics over
    steps, ``figure(metric)`` a bqplot bar chart of one column of the table.
    """

    _esm = esm("layer_browser")

    step = linked_step("Linked step; values and histograms are at this step.")
    selected_layer = traitlets.Unicode("", help="The layer whose detail is open.").tag(sync=True)
    badges = traitlets.Dict(help="{layer: [severity, text]}: findings shown beside layers.").tag(
        sync=True
    )
    layers = traitlets.List(traitlets.Dict(), help="One row per module.").tag(sync=True)
    spark = traitlets.Dict(help="Per metric: sampled steps and a [layers, steps] matrix.").tag(
        sync=True
    )
    current = traitlets.Dict(
        help="Per metric: the capture step shown and one value per layer."
    ).tag(sync=True)
    detail = traitlets.Dict(help="The selected layer's statistics over steps and dead map.").tag(
        sync=True
    )
    detail_at = traitlets.Dict(help="The selected layer's histograms at the step.").tag(sync=True)
    dead_map = traitlets.Dict(
        help="The selected layer's per-unit zero fractions: steps, [steps, units] values."
    ).tag(sync=True)
    split = traitlets.Unicode(
        "val", help="Split whose evaluations the unit samples come from."
    ).tag(sync=True)
    unit = traitlets.Int(-1, help="Unit of the selected layer whose samples are listed.").tag(
        sync=True
    )
    unit_samples = traitlets.Dict(
        help="Per-unit means of the selected layer, and the chosen unit's top samples."
    ).tag(sync=True)
    map_id = traitlets.Int(
        -1, help="Sample whose captured activations of the layer are shown."
    ).tag(sync=True)
    sample_maps = traitlets.Dict(
        help="The map_id sample's captured output of the selected layer: units, feature maps."
    ).tag(sync=True)

    def __init__(
        self,
        run: Any,
        *,
        selected_layer: str = "",
        split: str | None = None,
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        check_run("LayerBrowser", run)
        if split is None:  # the split whose evaluations recorded per-sample unit values
            split = choose_split(run.splits("embeddings")) or "val"
        check_split("LayerBrowser", split)
        super().__init__(**kwargs)
        self._run = run
        self.split = split
        self._units = UnitExplorer(run)
        self._histograms = HistogramsAtStep(run)
        self._dead_window: tuple[int, int] | None = None
        with self._building([run], live):
            self._newest = self._newest_capture()
            self.step = self._newest[-1] if self._newest else 0
            self._rebuild()
            self._ready = True
            if selected_layer:
                self.selected_layer = selected_layer

    # -- validation ----------------------------------------------------------------------

    @traitlets.validate("selected_layer")
    def _check_selected(self, proposal: Any) -> str:
        name = proposal["value"]
        known = [row["name"] for row in self.layers]
        if name and name not in known:
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.4)
            hint = f"; close matches: {', '.join(close)}" if close else ""
            raise traitlets.TraitError(
                f"LayerBrowser.selected_layer: no layer named {name!r} in this run's model{hint}"
            )
        return name

    @traitlets.validate("badges")
    def _check_badges(self, proposal: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for layer, value in dict(proposal["value"]).items():
            pairs = value if value and isinstance(value[0], (list, tuple)) else [value]
            for pair in pairs:
                if len(pair) != 2 or pair[0] not in SEVERITIES:
                    raise traitlets.TraitError(
                        f"LayerBrowser.badges[{layer!r}]: expected [severity, text] with "
                        f"severity one of {', '.join(SEVERITIES)}, got {pair!r}"
                    )
            out[str(layer)] = [[str(s), str(t)] for s, t in pairs]
        return out

    # -- the table ------------------------------------------------------------------------

    def _newest_capture(self) -> list[int]:
        """The newest step with activations or gradients (empty before the first)."""
        index = self._indexes[0]
        ends = [int(index.steps(s)[-1]) for s in ("activation", "gradient") if len(index.steps(s))]
        return [max(ends)] if ends else []

    def _rebuild(self) -> None:
        run = self._run
        index = self._indexes[0]
        newest, before = self._newest_capture(), self._newest
        self._newest = newest
        self.step = self._followed(self.step, before, newest)  # on its own: the newest
        self._units.clear()
        probe = run.meta("probe") or {}
        params = [p["name"] for p in probe.get("params", [])]
        shapes = {p["name"]: p.get("shape") for p in probe.get("params", [])}
        self._recorded = recorded_layers(run, index)
        rows = layer_rows(run.layers(), params, set().union(*self._recorded.values()), shapes)
        rows, malformed = with_head_rows(rows, run.meta("heads"))
        self.layers = rows
        self._rows = rows
        self._histograms.clear()
        self.spark, self.notice = sparklines(run, index, rows)
        self.notice = "; ".join(t for t in (self.notice, malformed) if t)
        if not rows:
            self.empty = (
                f"No layers recorded in {run.name} yet: attach a probe with "
                "run.watch(model, every=10) before training; the table fills in as steps arrive."
            )
        else:
            self.empty = ""
            if not len(index.steps("activation")) and not len(index.steps("gradient")):
                self.notice = (
                    "No probe captures yet: the model summary is shown; statistics appear "
                    "after the first captured step."
                )
        self._fill_current()
        if self.selected_layer:
            self._fill_detail()

    def _fill_current(self) -> None:
        self.current = values_at(self._run, self._indexes[0], self._rows, self.step)

    # -- the step ------------------------------------------------------------------------

    @reacts_to("step")
    def _on_step(self, change: Any) -> None:
        self._fill_current()
        if self.selected_layer:
            self._fill_detail_at()
            self._fill_units()
            if self._dead_window is not None and not (
                self._dead_window[0] <= self.step <= self._dead_window[1]
            ):
                self._fill_dead_map(self.selected_layer)

    # -- the selected layer --------------------------------------------------------------

    @reacts_to("selected_layer")
    def _on_select(self, change: Any) -> None:
        self.unit = -1
        self._fill_detail()

    @reacts_to("unit", hold=False)
    def _on_unit(self, change: Any) -> None:
        self._fill_units()

    @reacts_to("map_id", hold=False)
    def _on_map_id(self, change: Any) -> None:
        self._fill_sample_maps()

    def _row(self, name: str) -> dict[str, Any] | None:
        return next((r for r in self._rows if r["name"] == name), None)

    def _fill_detail(self) -> None:
        name = self.selected_layer
        row = self._row(name) if name else None
        if row is None:
            self.detail = {}
            self.detail_at = {}
            self.dead_map = {}
            self.unit_samples = {}
            self.sample_maps = {}
            self._dead_window = None
            return
        if row.get("heads"):  # a <module>/heads pseudo-layer: its heads map is its detail
            self.detail = {**stats_detail(self._run, self._indexes[0], {}, row), "empty": ""}
        else:
            self.detail = stats_detail(self._run, self._indexes[0], self._recorded, row)
        self._fill_dead_map(name)
        self._fill_detail_at()
        self._fill_units()

    def _fill_dead_map(self, name: str) -> None:
        steps = self._indexes[0].steps("activation")
        row = self._row(name)
        read = heads_map if row is not None and row.get("heads") else dead_map
        self.dead_map, self._dead_window = read(self._run, steps, self.step, name)

    def _fill_detail_at(self) -> None:
        name = self.selected_layer
        row = self._row(name) if name else None
        self.detail_at = {} if row is None else self._histograms.detail_at(row, self.step)

    # -- what each unit responds to ------------------------------------------------------

    def unit_top_samples(self, unit: int | None = None) -> tuple[list[int], list[int]]:
        """Ids of the samples that excite ``unit`` (default: ``self.unit``) most and least."""
        if unit is not None:
            self.unit = int(unit)
        got = self.unit_samples
        return [s["id"] for s in got.get("most", [])], [s["id"] for s in got.get("least", [])]

    def _fill_units(self) -> None:
        self._fill_sample_maps()
        name = self.selected_layer
        if not name:
            self.unit_samples = {}
            return
        if (self._row(name) or {}).get("heads"):
            notice = "Attention heads are measured on the training batch: no per-sample values."
            self.unit_samples = {"layer": name, "n_units": 0, "notice": notice}
            return
        self.unit_samples = self._units.samples(name, self.split, self.step, int(self.unit))

    def _fill_sample_maps(self) -> None:
        name, id = self.selected_layer, int(self.map_id)
        if not name or id < 0:
            self.sample_maps = {}
            return
        self.sample_maps = self._units.sample_maps(name, self.split, self.step, id)

    # -- reading back --------------------------------------------------------------------

    def nonfinite_at_step(self) -> dict[str, dict[str, int]]:
        """Non-finite values behind each value the table shows at ``step``:
        ``{metric: {layer: count}}``, layers with none left out."""
        out: dict[str, dict[str, int]] = {}
        for metric, entry in self.current.items():
            counts = array_from_payload(entry["nonfinite"])
            out[metric] = {
                row["name"]: int(c) for row, c in zip(self._rows, counts, strict=True) if c > 0
            }
        return out

    def values_at_step(self) -> dict[str, dict[str, float]]:
        """What the table shows at ``step``: ``{metric: {layer: value}}`` (NaN: none)."""
        out: dict[str, dict[str, float]] = {}
        for metric, entry in self.current.items():
            values = array_from_payload(entry["values"])
            out[metric] = {row["name"]: float(v) for row, v in zip(self._rows, values)}
        return out

    # -- the data, for people and other tools ----------------------------------------------

    def data(self) -> Any:
        """The table at ``step`` as a tidy DataFrame, one row per layer.

        Columns ``layer, type, shape, params``, then for each health sign
        (``zero_frac``, ``grad_norm``, ``update_ratio``) its value at the step
        (NaN: none), ``<sign>_step`` (the capture it comes from, -1: none) and
        ``<sign>_nonfinite`` (non-finite values left out of it).
        """
        cols = {
            "layer": [r["name"] for r in self._rows],
            "type": [r["type"] for r in self._rows],
            "shape": [r["shape"] for r in self._rows],
            "params": [int(r["params"]) for r in self._rows],
        }
        n = len(self._rows)
        for metric in METRICS:
            entry = self.current.get(metric)
            if entry is None:
                values, bad, at = np.full(n, np.nan), np.zeros(n), -1
            else:
                values = np.asarray(array_from_payload(entry["values"]), dtype=np.float64)
                bad = np.asarray(array_from_payload(entry["nonfinite"]), dtype=np.float64)
                at = int(entry["step"])
            cols[metric] = values
            cols[f"{metric}_step"] = np.full(n, at, dtype=np.int64)
            cols[f"{metric}_nonfinite"] = bad.astype(np.int64)
        return frame(cols, list(cols))

    def series(self) -> Any:
        """The selected layer's statistics over steps, as its detail draws them.

        Columns ``label, signal, layer, step`` and ``mean, std, min, max, norm,
        zero_frac, rel, nonfinite``; one row per capture (or per bucket of
        captures on a long run: the detail's ``notice`` says so). Empty when no
        layer is selected.
        """
        columns = ["label", "signal", "layer", "step", *STAT_FIELDS]
        parts = []
        for s in self.detail.get("series", []):
            steps = np.asarray(array_from_payload(s["steps"]), dtype=np.int64)
            cols: dict[str, Any] = {
                "label": [s["label"]] * len(steps),
                "signal": [s["signal"]] * len(steps),
                "layer": [s["layer"]] * len(steps),
                "step": steps,
            }
            cols.update({f: np.asarray(array_from_payload(s[f])) for f in STAT_FIELDS})
            parts.append(frame(cols, columns))
        if not parts:
            return frame([], columns)
        return pd.concat(parts, ignore_index=True)

    def figure(self, metric: str = "grad_norm") -> Any:
        """One column of the table at ``step`` (``zero_frac``, ``grad_norm`` or
        ``update_ratio``) as a bqplot bar chart, one bar per layer."""
        check_choice("LayerBrowser.figure", "metric", metric, METRICS)
        table = self.data()
        return bars_figure(
            table["layer"].tolist(),
            table[metric].to_numpy(),
            title=f"{metric} at step {self.step}",
            y_label=metric,
        )


LayerBrowser._css = view_css(
    """
.nbviz-lb { display: flex; flex-direction: column; gap: 8px; }
.nbviz-lb-table { border-collapse: collapse; font-variant-numeric: tabular-nums;
  width: 100%; max-width: 1100px; table-layout: fixed; }
.nbviz-lb-table th { text-align: left; font-weight: 600; padding: 2px 8px;
  border-bottom: 1px solid var(--jp-border-color1, #bdbdbd); white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
.nbviz-lb-table td { padding: 1px 8px; white-space: nowrap; vertical-align: middle;
  overflow: hidden; text-overflow: ellipsis; }
.nbviz-lb-table th.nbviz-lb-name { width: 19%; }
.nbviz-lb-table th.nbviz-lb-type, .nbviz-lb-table th.nbviz-lb-shape { width: 10%; }
.nbviz-lb-table th.nbviz-lb-num { width: 9%; }
.nbviz-lb-table th.nbviz-lb-m { width: 17.33%; }
.nbviz-lb-table td.nbviz-lb-m, .nbviz-lb-table th.nbviz-lb-m { padding: 1px 4px; }
.nbviz-lb-table td.nbviz-lb-m { white-space: normal; }
.nbviz-lb-name-box { display: flex; align-items: center; gap: 4px; min-width: 0; }
.nbviz-lb-layer-name { flex: 0 1 auto; min-width: 0; overflow: hidden; text-overflow: ellipsis;
  direction: rtl; text-align: left; }
.nbviz-lb-name-box .nbviz-badge { flex: none; }
.nbviz-lb-row { cursor: pointer; }
.nbviz-lb-row:hover { background: var(--jp-layout-color2, #f5f5f5); }
.nbviz-lb-row.nbviz-selected { background: var(--jp-brand-color3, #bbdefb); }
.nbviz-lb-row.nbviz-unwatched { color: var(--jp-ui-font-color3, #9e9e9e); }
.nbviz-lb-metric { display: flex; flex-wrap: wrap; align-items: center; gap: 0 4px; }
.nbviz-lb-metric span { white-space: nowrap; }
.nbviz-lb-metric span { min-width: 4.5em; text-align: right; }
.nbviz-lb-metric span.nbviz-lb-nonfinite { min-width: 0; font-size: 0.85em; }
.nbviz-lb-metric span.nbviz-lb-nonfinite:empty { display: none; }
.nbviz-lb-nonfinite-note { font-weight: 600; }
.nbviz-lb-swatch { display: inline-block; width: 10px; height: 10px; vertical-align: middle;
  border: 1px solid var(--jp-border-color2, #e0e0e0); }
.nbviz-lb-num { text-align: right; }
.nbviz-lb-detail { border-top: 1px solid var(--jp-border-color2, #e0e0e0); padding-top: 6px; }
.nbviz-lb-detail h4 { margin: 4px 0; font-size: 1.05em; }
.nbviz-lb-charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr));
  gap: 8px; }
.nbviz-lb-chart-title { font-weight: 600; font-size: 0.92em; }
.nbviz-lb-hists { display: flex; flex-wrap: wrap; gap: 10px; }
.nbviz-lb-caption { font-size: 0.9em; color: var(--jp-ui-font-color2, #616161); }
.nbviz-lb-units canvas { cursor: pointer; }
.nbviz-lb-unit-row { display: flex; flex-wrap: wrap; gap: 6px; align-items: flex-start; }
.nbviz-lb-unit-card { display: flex; flex-direction: column; align-items: center; font-size: 0.85em;
  border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 3px; padding: 2px;
  width: 84px; overflow: hidden; }
.nbviz-lb-unit-card img { width: 64px; height: 64px; object-fit: contain;
  image-rendering: pixelated; background: #000; }
.nbviz-lb-unit-card { cursor: pointer; }
.nbviz-lb-unit-card.nbviz-active { outline: 2px solid var(--jp-brand-color1, #1976d2); }
.nbviz-lb-maps { display: flex; flex-wrap: wrap; gap: 3px; }
.nbviz-lb-map { image-rendering: pixelated; }
.nbviz-lb-map.nbviz-active { outline: 2px solid #d55e00; }
.nbviz-lb-unit-card span { max-width: 80px; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; }
.nbviz-lb-strips { display: flex; flex-direction: column; gap: 2px; max-width: 900px; }
.nbviz-lb-strip { display: flex; align-items: baseline; gap: 8px; cursor: pointer;
  padding: 1px 4px; border-radius: 3px; }
.nbviz-lb-strip:hover { background: var(--jp-layout-color2, #f5f5f5); }
.nbviz-lb-strip.nbviz-active { outline: 2px solid var(--jp-brand-color1, #1976d2); }
.nbviz-lb-strip-value { flex: none; width: 5.5em; text-align: right;
  font-variant-numeric: tabular-nums; }
.nbviz-lb-strip-tokens { flex: 1 1 auto; min-width: 0; display: grid;
  grid-template-columns: 45% auto minmax(0, 1fr); column-gap: 4px;
  font-family: var(--jp-code-font-family, monospace); white-space: pre; }
.nbviz-lb-strip-before, .nbviz-lb-strip-after { display: flex; gap: 4px; overflow: hidden;
  min-width: 0; }
.nbviz-lb-strip-before { justify-content: flex-end; }
.nbviz-lb-ctx { flex: none; padding: 0 1px; color: var(--jp-ui-font-color2, #616161); }
.nbviz-lb-ctx-hit { color: #000; font-weight: 700; border-radius: 2px;
  outline: 1px solid rgba(0, 0, 0, 0.25); }
.nbviz-lb-strip-where { flex: none; font-size: 0.85em; }
"""
)
