"""LayerBrowser: the model's layers as a table, and one layer's history in detail.

Each row is a module (qualified name, type, output shape, parameter count) with
sparklines and the value at the linked step for three signs of health:
activation zero fraction, gradient norm (of the layer's weight, else of its
output) and the update/weight ratio. Selecting a layer fills its detail:
activation, gradient and weight statistics over the steps; its histograms at
the current step; the per-unit dead map (units x steps of the fraction of
the batch on which a unit was zero); and what each unit responds to: for a
layer whose per-sample unit summaries ``run.evaluate(..., units_layer=...)``
recorded (or the embedding layer, whose input ``run.evaluate`` keeps for the
projector), choosing a ``unit`` lists the samples that excite it most and
least at the evaluation in view (the latest at or before ``step``). A click on
one of those samples (``map_id``) shows its activations of the layer channel by
channel (feature maps of a convolution) where ``run.capture`` recorded them.

Long runs are summarised, never sent whole: sparklines use about a hundred
captures; detail series at most ``DETAIL_POINTS`` buckets (min of the minima,
max of the maxima, peak norm, so spikes survive); the dead map the captures up
to the current step within a window. ``notice`` and the detail's ``notice`` say
what is shown.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import traitlets

from nbviz.analysis.metrics import evaluation_at
from nbviz.store import MissingStepError
from nbviz.widgets.base import array_trait_payload, esm, steps_payload
from nbviz.widgets.live import TRAINING_CSS, LiveView
from nbviz.widgets.sampling import count_text, evenly

__all__ = ["LayerBrowser"]

SPARK_POINTS = 100
DETAIL_POINTS = 1000
FULL_READ_MAX = 20_000  # captures read whole (then bucketed); beyond this, sampled
DEAD_WINDOW = 2000  # captures before the step searched for per-unit stats
DEAD_COLUMNS = 400
DEAD_CELLS = 250_000
SEVERITIES = ("info", "warning", "error")
UNIT_SAMPLES = 8
"""Samples listed per unit, for each end (most and least excited)."""

#: The three health signs: name -> (signal, column, which layer row provides it)
METRICS = {
    "zero_frac": ("activation", "zero_frac", "module"),
    "grad_norm": ("gradient", "norm", "weight_or_module"),
    "update_ratio": ("update", "rel", "weight"),
}
STAT_FIELDS = ("mean", "std", "min", "max", "norm", "zero_frac", "rel", "nonfinite")


def _f8(values: Any) -> dict[str, Any]:
    return array_trait_payload(np.asarray(values, dtype=np.float64))


def _shape_text(shape: Any) -> str:
    if shape is None or (isinstance(shape, float) and np.isnan(shape)):
        return ""
    if isinstance(shape, (list, tuple)):
        return "[" + ", ".join(str(d) for d in shape) + "]"
    return str(shape)


def bucket_stats(frame: Any, max_points: int) -> dict[str, np.ndarray]:
    """layer_stats rows of one layer (sorted by step) as at most ``max_points`` buckets.

    Minimum of ``min``, maximum of ``max`` and of ``norm`` (peaks survive),
    mean of the rest, sum of ``nonfinite``; a bucket's step is its last step.
    """
    steps = frame["step"].to_numpy(dtype=np.int64)
    cols = {f: frame[f].to_numpy(dtype=np.float64) for f in STAT_FIELDS}
    n = len(steps)
    if n <= max_points:
        return {"step": steps, **cols}
    bounds = (np.arange(max_points) * n) // max_points
    ends = np.append(bounds[1:], n) - 1
    out: dict[str, np.ndarray] = {"step": steps[ends]}
    with np.errstate(invalid="ignore"):
        for f, v in cols.items():
            if f == "min":
                out[f] = np.fmin.reduceat(v, bounds)
            elif f in ("max", "norm"):
                out[f] = np.fmax.reduceat(v, bounds)
            elif f == "nonfinite":
                out[f] = np.add.reduceat(np.nan_to_num(v), bounds)
            else:
                finite = np.isfinite(v)
                total = np.add.reduceat(np.where(finite, v, 0.0), bounds)
                count = np.add.reduceat(finite.astype(np.float64), bounds)
                out[f] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return out


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
    """

    _esm = esm("layer_browser")

    step = traitlets.Int(0, help="Linked step; values and histograms are at this step.").tag(
        sync=True
    )
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
        split: str = "val",
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        if not isinstance(split, str) or not split:
            raise ValueError(f"LayerBrowser: split must be a non-empty string, got {split!r}")
        super().__init__(**kwargs)
        self._run = run
        self.split = split
        self._unit_cache: dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray]] = {}
        self._hist_steps: dict[tuple[str, str], np.ndarray] = {}
        self._dead_window: tuple[int, int] | None = None
        self._init_live([run], live)
        with self._lock, self.hold_sync():
            index = self._indexes[0]
            ends = [
                int(index.steps(s)[-1]) for s in ("activation", "gradient") if len(index.steps(s))
            ]
            self.step = max(ends, default=0)
            self._rebuild()
            if selected_layer:
                self.selected_layer = selected_layer

    # -- validation ----------------------------------------------------------------------

    @traitlets.validate("selected_layer")
    def _check_selected(self, proposal: Any) -> str:
        name = proposal["value"]
        known = [row["name"] for row in self.layers]
        if name and name not in known:
            import difflib

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

    def _rebuild(self) -> None:
        run = self._run
        index = self._indexes[0]
        self._unit_cache.clear()
        frame = run.layers()
        probe = run.meta("probe") or {}
        params = [p["name"] for p in probe.get("params", [])]
        recorded = self._recorded_names()
        rows = []
        for rec in frame.to_dict("records"):
            name = str(rec.get("name") or "")
            if not name:
                continue  # the root module: its numbers are the model's
            own = [p for p in params if p.rpartition(".")[0] == name] or sorted(
                p
                for p in recorded
                if p.rpartition(".")[0] == name and p not in frame["name"].values
            )
            rows.append(
                {
                    "name": name,
                    "type": str(rec.get("type") or ""),
                    "depth": int(rec.get("depth") or 1),
                    "shape": _shape_text(rec.get("shape")),
                    "params": int(rec.get("params") or 0),
                    "watched": bool(rec.get("watched", True)),
                    "note": str(rec.get("note") or ""),
                    "own_params": own,
                    "recorded": name in recorded,
                }
            )
        if not rows:  # no model summary: the modules the probe recorded

            def is_param(n: str) -> bool:
                owner, _, leaf = n.rpartition(".")
                return n in params or (owner in recorded and leaf in ("weight", "bias"))

            for name in sorted(n for n in recorded if not is_param(n)):
                own = sorted(p for p in recorded if p.rpartition(".")[0] == name and is_param(p))
                rows.append(
                    {
                        "name": name,
                        "type": "",
                        "depth": 1,
                        "shape": "",
                        "params": 0,
                        "watched": True,
                        "note": "",
                        "own_params": own,
                        "recorded": True,
                    }
                )
        self.layers = rows
        self._rows = rows
        self._hist_steps = {}
        self._fill_spark()
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

    def _recorded_names(self) -> set[str]:
        """Layer names with stats at the latest capture of each signal (cheap: one step each).

        Also keeps ``self._recorded`` ({signal: names}), so that detail queries
        only ask for pairs that exist (asking for a missing one is slow).
        """
        index = self._indexes[0]
        self._recorded: dict[str, set[str]] = {}
        for signal in ("activation", "gradient", "weight", "update"):
            steps = index.steps(signal)
            names: set[str] = set()
            if len(steps):
                names = set(self._run.stats(signal, steps=int(steps[-1]))["layer"].tolist())
            self._recorded[signal] = names
        return set().union(*self._recorded.values())

    def _metric_layer(self, row: dict[str, Any], metric: str) -> str | None:
        _signal, _column, which = METRICS[metric]
        weight = f"{row['name']}.weight"
        has_weight = weight in row["own_params"]
        if which == "module":
            return row["name"]
        if which == "weight":
            return weight if has_weight else None
        return weight if has_weight else row["name"]

    def _fill_spark(self) -> None:
        index = self._indexes[0]
        spark: dict[str, Any] = {}
        shown = 0
        total = 0
        for metric, (signal, column, _which) in METRICS.items():
            steps = index.steps(signal)
            sample = evenly(steps, SPARK_POINTS)
            matrix = np.full((len(self._rows), len(sample)), np.nan)
            if len(sample):
                frame = self._run.stats(signal, steps=[int(s) for s in sample])
                col = {s: j for j, s in enumerate(sample.tolist())}
                by_layer = {la: i for i, la in enumerate(self._metric_names(metric))}
                li = frame["layer"].map(by_layer)
                ok = li.notna().to_numpy()
                if ok.any():
                    rows_i = li[ok].to_numpy(dtype=np.int64)
                    cols_j = frame["step"][ok].map(col).to_numpy(dtype=np.int64)
                    matrix[rows_i, cols_j] = frame[column][ok].to_numpy(dtype=np.float64)
            spark[metric] = {"steps": steps_payload(sample), "values": _f8(matrix)}
            shown = max(shown, len(sample))
            total = max(total, len(steps))
        self.spark = spark
        self.notice = f"sparklines: {count_text(shown, total, 'captures')}" if shown < total else ""

    def _metric_names(self, metric: str) -> list[str | None]:
        return [self._metric_layer(row, metric) for row in self._rows]

    # -- the step ------------------------------------------------------------------------

    @traitlets.observe("step")
    def _on_step(self, change: Any) -> None:
        if not hasattr(self, "_rows"):
            return
        with self._lock, self.hold_sync():
            self._fill_current()
            if self.selected_layer:
                self._fill_detail_at()
                self._fill_units()
                if self._dead_window is not None and not (
                    self._dead_window[0] <= self.step <= self._dead_window[1]
                ):
                    self.dead_map = self._dead_map(self.selected_layer)

    def _fill_current(self) -> None:
        index = self._indexes[0]
        out: dict[str, Any] = {}
        for metric, (signal, column, _which) in METRICS.items():
            at = index.capture_at(signal, self.step)
            values = np.full(len(self._rows), np.nan)
            if at is not None:
                frame = self._run.stats(signal, steps=[at])
                lookup = dict(zip(frame["layer"], frame[column].to_numpy(dtype=np.float64)))
                for i, name in enumerate(self._metric_names(metric)):
                    if name in lookup:
                        values[i] = lookup[name]
            out[metric] = {"step": -1 if at is None else at, "values": _f8(values)}
        self.current = out

    # -- the selected layer --------------------------------------------------------------

    @traitlets.observe("selected_layer")
    def _on_select(self, change: Any) -> None:
        if not hasattr(self, "_rows"):
            return
        with self._lock, self.hold_sync():
            self.unit = -1
            self._fill_detail()

    @traitlets.observe("unit")
    def _on_unit(self, change: Any) -> None:
        if hasattr(self, "_rows"):
            with self._lock:
                self._fill_units()

    @traitlets.observe("map_id")
    def _on_map_id(self, change: Any) -> None:
        if hasattr(self, "_rows"):
            with self._lock:
                self._fill_sample_maps()

    def _fill_sample_maps(self) -> None:
        name, id = self.selected_layer, int(self.map_id)
        if not name or id < 0:
            self.sample_maps = {}
            return
        out: dict[str, Any] = {"id": id, "layer": name, "step": -1}
        frame = self._run.captures(id, self.split, self.step)
        if not len(frame):
            frame = self._run.captures(id, self.split)  # only later captures: the latest
        rows = frame[frame["layer"] == name] if len(frame) else frame
        if not len(rows):
            out["notice"] = (
                f"No activations of {name!r} recorded for sample {id}: "
                f"run.capture(model, sample, id={id}, split={self.split!r}) records them."
            )
            self.sample_maps = out
            return
        r = rows.iloc[0]
        out.update(step=int(r["step"]), shape=[int(d) for d in r["shape"]], notice=str(r["note"]))
        if r["units"] is not None:
            out["units"] = array_trait_payload(r["units"], dtype="<f4")
        if r["maps"] is not None:
            out["maps"] = array_trait_payload(r["maps"], dtype="<f4")
        self.sample_maps = out

    # -- what each unit responds to ------------------------------------------------------

    def _unit_source(self, name: str) -> tuple[str, str] | None:
        """(kind, description) of the per-sample unit values recorded for ``name``."""
        run = self._run
        if name in run.embedding_layers(self.split, kind="units"):
            return "units", f"mean activation of each unit of {name} per sample"
        if name in run.embedding_layers(self.split, kind="embedding"):
            return "embedding", f"input of {name} per sample (the embedding run.evaluate records)"
        return None

    def _unit_matrix(self, name: str, kind: str, at: int) -> tuple[np.ndarray, np.ndarray]:
        key = (name, kind, at)
        hit = self._unit_cache.get(key)
        if hit is None:
            ids, matrix = self._run.embeddings(at, split=self.split, layer=name, kind=kind)
            hit = (np.asarray(ids, dtype=np.int64), np.asarray(matrix, dtype=np.float32))
            if len(self._unit_cache) > 4:
                self._unit_cache.clear()
            self._unit_cache[key] = hit
        return hit

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
        source = self._unit_source(name)
        how = (
            f"record them with run.evaluate(step, model, loader, units_layer={name!r}, "
            f"split={self.split!r})"
        )
        if source is None:
            self.unit_samples = {
                "layer": name,
                "n_units": 0,
                "notice": f"No per-sample unit values of {name!r} for split {self.split!r}: {how}.",
            }
            return
        kind, what = source
        steps = self._run.embedding_steps(self.split, name, kind=kind)
        at = evaluation_at(steps, self.step)
        notice = ""
        if at is None:
            at = int(steps[0])
            notice = f"the first evaluation (step {at}) comes after this step"
        ids, matrix = self._unit_matrix(name, kind, at)
        n_units = int(matrix.shape[1]) if matrix.ndim == 2 else 0
        with np.errstate(invalid="ignore"):
            means = np.nanmean(matrix, axis=0) if len(ids) else np.zeros(n_units)
        out: dict[str, Any] = {
            "layer": name,
            "kind": kind,
            "what": what,
            "step": at,
            "n_units": n_units,
            "n_samples": len(ids),
            "means": array_trait_payload(means, dtype="<f4"),
            "unit": -1,
            "notice": notice,
        }
        unit = int(self.unit)
        if 0 <= unit < n_units:
            values = matrix[:, unit].astype(np.float64)
            finite = np.isfinite(values)
            fid, fval = ids[finite], values[finite]
            most = np.lexsort((fid, -fval))[:UNIT_SAMPLES]
            least = np.lexsort((fid, fval))[:UNIT_SAMPLES]
            cards = self._unit_cards(np.concatenate([fid[most], fid[least]]), at)
            out.update(
                unit=unit,
                most=[{**cards[int(fid[k])], "value": float(fval[k])} for k in most],
                least=[{**cards[int(fid[k])], "value": float(fval[k])} for k in least],
            )
        elif unit >= n_units:
            out["notice"] = f"unit {unit} is outside 0..{n_units - 1} for {name!r}"
        self.unit_samples = out

    def _unit_cards(self, ids: np.ndarray, at: int) -> dict[int, dict[str, Any]]:
        from nbviz.widgets.gallery import SampleGallery

        run = self._run
        wanted = sorted({int(i) for i in ids})
        names = run.class_names
        cards: dict[int, dict[str, Any]] = {i: {"id": i} for i in wanted}
        stored = set(run.sample_ids(self.split).tolist())
        have = [i for i in wanted if i in stored]
        if have:
            for row in run.samples(have, split=self.split).to_dict("records"):
                card = cards[int(row["id"])]
                card.update(SampleGallery._payload(pd.Series(row)))
                if row["label"] is not None and not pd.isna(row["label"]):
                    card["label"] = int(row["label"])
        if at in set(run.prediction_steps(self.split).tolist()):
            preds = run.predictions(at, split=self.split).set_index("id")
            for i in wanted:
                if i in preds.index:
                    cards[i].update(label=int(preds.at[i, "label"]), pred=int(preds.at[i, "pred"]))
        for card in cards.values():
            for key in ("label", "pred"):
                if key in card:
                    c = card[key]
                    card[f"{key}_name"] = (
                        str(names[c]) if names is not None and 0 <= c < len(names) else str(c)
                    )
        return cards

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
        index = self._indexes[0]
        series = []
        notes = []
        wanted = [("activation", name, "activations")]
        wanted.append(("gradient", name, "gradient of the output"))
        for p in row["own_params"]:
            short = p.rpartition(".")[2]
            wanted.append(("gradient", p, f"gradient of {short}"))
        for p in row["own_params"]:
            short = p.rpartition(".")[2]
            wanted.append(("weight", p, f"{short}"))
            wanted.append(("update", p, f"update of {short}"))
        for signal, layer, label in wanted:
            steps = index.steps(signal)
            if len(steps) == 0 or layer not in self._recorded.get(signal, ()):
                continue
            try:
                if len(steps) <= FULL_READ_MAX:
                    frame = self._run.stats(signal, layer)
                    how = "captures in buckets (extremes kept)"
                else:
                    sample = evenly(steps, 2 * DETAIL_POINTS)
                    frame = self._run.stats(signal, layer, steps=[int(s) for s in sample])
                    how = "captures, sampled evenly"
            except (ValueError, KeyError):
                continue  # this layer has no rows for the signal
            if len(frame) == 0:
                continue
            data = bucket_stats(frame, DETAIL_POINTS)
            if len(data["step"]) < len(steps):
                notes.append(f"{label}: {count_text(len(data['step']), len(steps), how)}")
            series.append(
                {
                    "signal": signal,
                    "layer": layer,
                    "label": label,
                    "steps": steps_payload(data["step"]),
                    **{f: _f8(data[f]) for f in STAT_FIELDS},
                }
            )
        self.detail = {
            "layer": name,
            "type": row["type"],
            "shape": row["shape"],
            "params": row["params"],
            "series": series,
            "notice": "; ".join(notes),
            "empty": ""
            if series
            else f"No statistics recorded for {name!r} yet"
            + (
                "" if row["watched"] else f" (not watched: {row['note'] or 'skipped by the probe'})"
            ),
        }
        self.dead_map = self._dead_map(name)
        self._fill_detail_at()
        self._fill_units()

    def _dead_map(self, name: str) -> dict[str, Any]:
        index = self._indexes[0]
        steps = index.steps("activation")
        i = int(np.searchsorted(steps, self.step, "right")) - 1
        empty = {
            "layer": name,
            "steps": steps_payload([]),
            "values": _f8(np.zeros((0, 0))),
            "units": 0,
        }
        if len(steps) == 0:
            self._dead_window = None
            return {**empty, "notice": "no per-unit statistics yet"}
        full = len(steps) <= DEAD_WINDOW
        if full:
            lo, hi = int(steps[0]), int(steps[-1])
        else:
            i = max(i, 0)
            lo = int(steps[max(0, i - DEAD_WINDOW + 1)])
            hi = int(steps[min(len(steps) - 1, i + DEAD_WINDOW // 10)])
        try:
            ust, values = self._run.unit_stats(name, "zero_frac", step_range=(lo, hi))
        except (ValueError, KeyError):
            self._dead_window = None
            return {**empty, "notice": f"no per-unit zero fractions recorded for {name!r}"}
        self._dead_window = None if full else (lo, hi)
        n, units = values.shape
        if n == 0:
            return {**empty, "notice": f"no per-unit statistics for {name!r} near this step"}
        cols = max(1, min(DEAD_COLUMNS, DEAD_CELLS // max(units, 1)))
        keep = evenly(np.arange(n), cols)
        text = count_text(len(keep), n, "captures")
        window = "" if full else f"steps {lo:,}..{hi:,}"
        notice = ", ".join(t for t in (window, text) if t)
        return {
            "layer": name,
            "steps": steps_payload(ust[keep]),
            "values": array_trait_payload(values[keep], dtype="<f4"),
            "units": int(units),
            "notice": notice,
        }

    def _histogram_at(self, layer: str, signal: str) -> tuple[int, Any, Any] | None:
        key = (layer, signal)
        steps = self._hist_steps.get(key)
        if steps is None or (len(steps) and steps[-1] < self.step):
            steps = self._hist_steps[key] = self._run.histogram_steps(layer, signal)
        i = int(np.searchsorted(steps, self.step, "right")) - 1
        if i < 0:
            return None
        try:
            edges, counts = self._run.histogram(layer, signal, int(steps[i]))
        except (MissingStepError, ValueError):
            return None
        return int(steps[i]), edges, counts

    def _fill_detail_at(self) -> None:
        name = self.selected_layer
        row = self._row(name) if name else None
        if row is None:
            self.detail_at = {}
            return
        weight = f"{name}.weight" if f"{name}.weight" in row["own_params"] else None
        wanted = [("activation", name, "activations"), ("gradient", name, "output gradient")]
        if weight:
            wanted += [("weight", weight, "weight"), ("gradient", weight, "weight gradient")]
        hists = []
        for signal, layer, label in wanted:
            hit = self._histogram_at(layer, signal)
            if hit is None:
                continue
            at, edges, counts = hit
            hists.append(
                {
                    "signal": signal,
                    "layer": layer,
                    "label": label,
                    "step": at,
                    "lo": float(edges[0]),
                    "hi": float(edges[-1]),
                    "counts": array_trait_payload(counts, dtype="<f8"),
                }
            )
        self.detail_at = {"layer": name, "step": self.step, "histograms": hists}

    # -- reading back --------------------------------------------------------------------

    def values_at_step(self) -> dict[str, dict[str, float]]:
        """What the table shows at ``step``: ``{metric: {layer: value}}`` (NaN: none)."""
        from nbviz.widgets.base import array_from_payload

        out: dict[str, dict[str, float]] = {}
        for metric, entry in self.current.items():
            values = array_from_payload(entry["values"])
            out[metric] = {row["name"]: float(v) for row, v in zip(self._rows, values)}
        return out


LayerBrowser._css = (
    LayerBrowser._css
    + TRAINING_CSS
    + """
.nbviz-lb { display: flex; flex-direction: column; gap: 8px; }
.nbviz-lb-table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
.nbviz-lb-table th { text-align: left; font-weight: 600; padding: 2px 8px;
  border-bottom: 1px solid var(--jp-border-color1, #bdbdbd); white-space: nowrap; }
.nbviz-lb-table td { padding: 1px 8px; white-space: nowrap; vertical-align: middle; }
.nbviz-lb-row { cursor: pointer; }
.nbviz-lb-row:hover { background: var(--jp-layout-color2, #f5f5f5); }
.nbviz-lb-row.nbviz-selected { background: var(--jp-brand-color3, #bbdefb); }
.nbviz-lb-row.nbviz-unwatched { color: var(--jp-ui-font-color3, #9e9e9e); }
.nbviz-lb-metric { display: inline-flex; align-items: center; gap: 4px; }
.nbviz-lb-metric span { min-width: 4.5em; text-align: right; }
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
"""
)
