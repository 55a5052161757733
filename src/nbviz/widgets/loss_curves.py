"""LossCurves: every scalar of one or more runs over steps, train and validation overlaid.

Series that share a name stem (``train_loss``/``val_loss``, ``loss/train``)
are drawn on one panel; every other scalar gets its own. Long series travel as
a min/max summary (at most ``max_points`` points each, the extremes of every
bucket kept, so spikes survive); zooming in asks Python for that window at
full resolution. NaN/Inf are never dropped silently: each stretch of
non-finite values is sent as a break and drawn as a mark on the axis.

The chart is a canvas anywidget rather than a bqplot figure: bqplot's Lines
have per-line (not per-point) tooltips and a figure has one interaction at a
time, so a step/value read-out under the pointer and pan/zoom cannot coexist;
drawing in the browser also lets smoothing and the log axis work without a
kernel round trip (and in a static HTML export).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import traitlets

from nbviz.widgets.checks import check_int, check_known, check_run_name, check_run_names
from nbviz.widgets.curve_data import curves_figure, curves_frame
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import LiveView, linked_step, reacts_to, view_css
from nbviz.widgets.run_groups import Band, bucket_means, flat_configs, group_band, group_runs
from nbviz.widgets.sampling import count_text
from nbviz.widgets.scalar_names import split_name, unique_names
from nbviz.widgets.scalar_points import (
    minmax_downsample,
    nonfinite_breaks,
    summary_points,
    window_points,
)
from nbviz.widgets.time_axes import X_AXES, times_x
from nbviz.widgets.wire import array_trait_payload, floats_payload, steps_payload

__all__ = ["LossCurves", "minmax_downsample", "nonfinite_breaks", "split_name"]

MAX_BREAKS = 500
#: Points sent for all series together at most: many runs get fewer points each.
POINT_BUDGET = 150_000
#: Fewest points a series is summarised to, however many runs are shown.
MIN_POINTS = 200


def _panel_order(stem: str) -> tuple[int, str]:
    low = stem.lower()
    rank = 0 if "loss" in low else 1 if "acc" in low else 2
    return rank, low


class LossCurves(LiveView):
    """Every scalar of a run (or several runs, overlaid) over steps.

    Parameters
    ----------
    run_or_runs
        A run (``nbviz.Run`` or ``nbviz.open_run(...)``) or a list of runs.
    max_points
        Most points per series sent at once (longer series are summarised).
    live
        Follow the runs while they grow (a few updates a second).

    group_by
        A configuration key (dotted for nested config, e.g. ``"opt.lr"``): draw
        one mean line and min/max band per value instead of every run.
    x_axis
        ``"step"``, ``"wall"`` (wall-clock time) or ``"relative"`` (seconds since
        each run's first record); also chosen in the view's menu.

    Traits: ``step`` (marker; clicking the chart sets it), ``highlight`` (a
    run or group name to emphasise, "" for none), ``log_y``, ``smoothing`` (EMA
    weight in [0, 1); the raw series stays faint behind), ``x_axis``,
    ``group_by``, and ``selected_runs`` (the runs drawn; empty draws every run).
    ``RunsTable.link(curves)`` drives ``selected_runs`` and ``highlight`` from a
    table's selection; any other widget can set them (``traitlets.dlink``).

    ``data()`` gives the curves as a DataFrame at full resolution and
    ``figure()`` as a bqplot Figure for layouts of your own; the view's menu
    downloads them as CSV, PNG or SVG. Many runs share a point budget
    (``POINT_BUDGET``): each series is summarised to fewer buckets, zooming in
    still reads the window at full resolution.
    """

    _esm = esm("loss_curves")

    step = linked_step("Linked step, marked on every panel.")
    highlight = traitlets.Unicode("", help="Run name drawn in front; '' for none.").tag(sync=True)
    log_y = traitlets.Bool(False, help="Logarithmic value axis.").tag(sync=True)
    smoothing = traitlets.Float(
        0.6,
        help="EMA weight in [0, 1) for dense series (step-shaped and sparse ones are drawn "
        "as recorded); 0 shows the raw series.",
    ).tag(sync=True)
    runs = traitlets.List(traitlets.Unicode(), help="Run names, in legend order.").tag(sync=True)
    panels = traitlets.List(traitlets.Unicode(), help="Name stems, one panel each.").tag(sync=True)
    series = traitlets.List(traitlets.Dict(), help="One entry per run and scalar.").tag(sync=True)
    x_axis = traitlets.Enum(X_AXES, default_value="step", help="step | wall | relative").tag(
        sync=True
    )
    selected_runs = traitlets.List(
        traitlets.Unicode(), help="The runs drawn; empty draws every run."
    ).tag(sync=True)
    group_by = traitlets.Unicode("", help="Config key to group runs by; '' for none.").tag(
        sync=True
    )
    group_keys = traitlets.List(
        traitlets.Unicode(), help="Config keys runs can be grouped by."
    ).tag(sync=True)
    groups = traitlets.List(traitlets.Unicode(), help="Group names, in legend order.").tag(
        sync=True
    )

    def __init__(
        self,
        run_or_runs: Any,
        *,
        max_points: int = 4000,
        live: bool = True,
        group_by: str = "",
        x_axis: str = "step",
        **kwargs: Any,
    ) -> None:
        runs = list(run_or_runs) if isinstance(run_or_runs, (list, tuple)) else [run_or_runs]
        if not runs:
            raise ValueError("LossCurves: no runs given; pass a run or a list of runs")
        if max_points is None:
            raise TypeError("LossCurves: max_points must be an int >= 16, got None")
        check_int("LossCurves", "max_points", max_points)
        if max_points < 16:
            raise ValueError(f"LossCurves: max_points must be >= 16, got {max_points}")
        super().__init__(**kwargs)
        self._runs = runs
        self.max_points = int(max_points)
        self._raw: dict[str, tuple[Any, str, int | None]] = {}  # id -> (run, name, last step)
        self._origins: dict[str, float] = {}
        self._bands: dict[str, tuple[str, str, Band, int]] = {}
        with self._building(runs, live):
            self.runs = unique_names(runs)
            self._configs, self.group_keys = flat_configs(runs)
            self.x_axis = x_axis
            self.group_by = group_by
            self._rebuild()
            ends = [last for _run, _name, last in self._raw.values() if last is not None]
            self.step = max(ends, default=0)
        self.on_msg(self._on_msg)

    @traitlets.validate("highlight")
    def _check_highlight(self, proposal: Any) -> str:
        known = [*self.runs, *self.groups]
        return check_run_name("LossCurves.highlight", proposal["value"], known)

    @traitlets.validate("selected_runs")
    def _check_selected_runs(self, proposal: Any) -> list[str]:
        return check_run_names("LossCurves.selected_runs", proposal["value"], self.runs)

    @traitlets.validate("group_by")
    def _check_group_by(self, proposal: Any) -> str:
        key = proposal["value"]
        return check_known(
            key, self.group_keys, f"LossCurves.group_by: no config key {key!r}", "keys: "
        )

    @reacts_to("x_axis", "group_by")
    def _regroup(self, change: Any) -> None:
        self._rebuild()

    @reacts_to("selected_runs")
    def _reselect(self, change: Any) -> None:
        if self.group_by:  # bands are over the selected runs; single runs are hidden in JS
            self._rebuild()

    @traitlets.validate("smoothing")
    def _check_smoothing(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if not 0 <= value < 1:
            raise traitlets.TraitError(f"LossCurves.smoothing must be in [0, 1), got {value}")
        return value

    # -- building ------------------------------------------------------------------------

    def _rebuild(self) -> None:
        counts = [index.scalar_counts() for index in self._indexes]
        n_series = sum(len(c) for c in counts)
        self._raw = {}
        self._origins = {}
        if self.x_axis != "step":
            for run_name, index in zip(self.runs, self._indexes):
                self._origins[run_name] = index.run.first_wall_time()
        if self.group_by:
            series, shown, total = self._group_series(counts)
        else:
            series, shown, total = self._run_series(counts, n_series)
        self.series = series
        self.panels = sorted({e["stem"] for e in series}, key=_panel_order)
        if not series:
            names = ", ".join(self.runs)
            self.empty = (
                f"No scalars logged yet in {names}: call run.log(step, train_loss=...) in the "
                "training loop (this view updates as they arrive)."
            )
        else:
            self.empty = ""
        if self.group_by:
            self.notice = (
                f"{len(self.groups)} groups of {len(self._member_indexes())} runs by "
                f"{self.group_by}: mean line, min/max band"
            )
        else:
            self.notice = count_text(
                shown, total, "points (min/max per bucket; zoom in for detail)"
            )

    def _cap(self, n_series: int) -> int:
        """Points per series: ``max_points``, less when many series share the budget."""
        return max(MIN_POINTS, min(self.max_points, POINT_BUDGET // max(n_series, 1)))

    def _x_of(self, run: Any, run_name: str, name: str, steps: np.ndarray) -> np.ndarray:
        """Each step's x on the view's time axis (a bounded read of the times of ``steps``)."""
        times = run.scalar_times(name, steps)
        return times_x(times, self.x_axis, self._origins.get(run_name, float("nan")))

    def _run_series(
        self, counts: list[dict[str, int]], n_series: int
    ) -> tuple[list[dict[str, Any]], int, int]:
        series: list[dict[str, Any]] = []
        shown = total = 0
        cap = self._cap(n_series)
        self.groups = []
        for i, (run_name, index) in enumerate(zip(self.runs, self._indexes)):
            for name, count in counts[i].items():
                stem, split = split_name(name)
                key = f"{run_name}\u241f{name}"
                # a bounded read: the rows, or min/max buckets, never the whole series
                summary = index.run.scalar_summary(name, cap // 2)
                steps, values, breaks = summary_points(summary)
                self._raw[key] = (index.run, name, int(steps[-1]) if len(steps) else None)
                shown += len(steps)
                total += count
                entry = {
                    "id": key,
                    "run": run_name,
                    "run_index": i,
                    "name": name,
                    "stem": stem,
                    "split": split,
                    "steps": steps_payload(steps),
                    "values": floats_payload(values),
                    "stride": count / max(len(steps), 1),
                    "total": count,
                    "breaks": array_trait_payload(breaks[:MAX_BREAKS]),
                    "n_breaks": len(breaks),
                }
                if self.x_axis != "step":
                    entry["x"] = floats_payload(self._x_of(index.run, run_name, name, steps))
                series.append(entry)
        return series, shown, total

    def _member_indexes(self) -> list[int]:
        chosen = set(self.selected_runs)
        return [i for i, name in enumerate(self.runs) if not chosen or name in chosen]

    def _group_series(self, counts: list[dict[str, int]]) -> tuple[list[dict[str, Any]], int, int]:
        members = self._member_indexes()
        groups = group_runs([self._configs[i] for i in members], self.group_by)
        self.groups = [label for label, _ in groups]
        self._bands = {}
        series: list[dict[str, Any]] = []
        shown = total = 0
        buckets = max(MIN_POINTS, self.max_points // 4)
        # each member read as bucket means: bounded per run, whatever its length
        per_member = max(MIN_POINTS // 2, min(buckets, POINT_BUDGET // max(len(members), 1)))
        no_breaks = array_trait_payload(np.zeros((0, 3), dtype=np.float64))
        for g, (label, rows) in enumerate(groups):
            runs = [members[r] for r in rows]
            names = sorted({n for i in runs for n in counts[i]})
            for name in names:
                parts = []
                for i in runs:
                    if name not in counts[i]:
                        continue
                    run = self._indexes[i].run
                    steps, means = bucket_means(run.scalar_summary(name, per_member))
                    x = (
                        steps.astype(np.float64)
                        if self.x_axis == "step"
                        else self._x_of(run, self.runs[i], name, steps)
                    )
                    parts.append((x, means, steps))
                band = group_band(parts, buckets)
                key = f"group\u241f{label}\u241f{name}"
                self._bands[key] = (label, name, band, len(parts))
                stem, split = split_name(name)
                n_points = sum(counts[i].get(name, 0) for i in runs)
                shown += len(band)
                total += n_points
                entry = {
                    "id": key,
                    "run": label,
                    "run_index": g,
                    "name": name,
                    "stem": stem,
                    "split": split,
                    "steps": steps_payload(band.steps),
                    "values": floats_payload(band.mean),
                    "lo": floats_payload(band.lo),
                    "hi": floats_payload(band.hi),
                    "members": len(parts),
                    "stride": n_points / max(len(parts), 1) / max(len(band), 1),
                    "total": n_points,
                    "breaks": no_breaks,
                    "n_breaks": 0,
                }
                if self.x_axis != "step":
                    entry["x"] = floats_payload(band.x)
                series.append(entry)
        return series, shown, total

    # -- the data, for people and other tools ----------------------------------------------

    def data(self) -> Any:
        """The curves as a tidy DataFrame at full resolution (the selected runs, or all).

        Columns ``run, name, step, wall_time, relative_time, value``; grouped
        (``group_by``), one row per group, scalar and bucket: ``group, name,
        step, x, mean, min, max, runs``. Reads the whole series: for people,
        not for drawing.
        """
        with self._lock:
            return curves_frame(self)

    def figure(self, panel: str | None = None) -> Any:
        """One panel (a name stem; default the first, usually the loss) as a bqplot
        ``Figure``: one line per run (or per group, over its min/max band), on the
        view's x axis, with the points the view draws; for ipywidgets layouts of
        your own."""
        with self._lock:
            return curves_figure(self, panel)

    # -- windows ---------------------------------------------------------------------------

    def window(self, lo: float, hi: float) -> tuple[dict[str, Any], list[bytes]]:
        """Full-resolution data of every summarised series between steps ``lo`` and ``hi``
        (always steps: on a time axis the browser asks for the steps in view).

        Returns the message content and its binary buffers, as sent to the
        browser when the user zooms in.
        """
        lo, hi = float(lo), float(hi)
        if not hi >= lo:
            raise ValueError(f"LossCurves.window: need lo <= hi, got {lo} and {hi}")
        out: list[dict[str, Any]] = []
        buffers: list[bytes] = []
        with self._lock:
            for entry in self.series:
                raw = self._raw.get(entry["id"])
                if raw is None or entry["stride"] <= 1:
                    continue
                run, name, _last = raw
                # the rows in the window (one beyond each edge), or finer buckets of it
                total, steps, values = window_points(run, name, self.max_points // 2, lo, hi)
                item: dict[str, Any] = {"id": entry["id"], "total": total}
                item["stride"] = total / max(len(steps), 1)
                parts = [("steps", steps_payload(steps)), ("values", floats_payload(values))]
                if self.x_axis != "step":
                    x = self._x_of(run, entry["run"], name, steps)
                    parts.append(("x", floats_payload(x)))
                for field, payload in parts:
                    item[field] = {
                        "dtype": payload["dtype"],
                        "shape": payload["shape"],
                        "buffer": len(buffers),
                    }
                    buffers.append(payload["data"])
                out.append(item)
        return {"type": "window", "lo": lo, "hi": hi, "series": out}, buffers

    def _on_msg(self, _widget: Any, content: Any, _buffers: Sequence[Any]) -> None:
        if not isinstance(content, dict) or content.get("type") != "window":
            return
        try:
            reply, buffers = self.window(content["lo"], content["hi"])
        except (KeyError, TypeError, ValueError) as exc:
            self.error = f"LossCurves: bad window request {content!r:.80}: {exc}"
            return
        reply["request"] = content.get("request")
        self.send(reply, buffers)


LossCurves._css = view_css(
    """
.nbviz-lc-grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr));
  gap: 10px; }
.nbviz-lc-panel { min-width: 0; }
.nbviz-lc-title { font-weight: 600; margin-bottom: 2px; }
.nbviz-lc-canvas { cursor: crosshair; touch-action: none; }
.nbviz-lc-readout { font-variant-numeric: tabular-nums; min-height: 1.3em;
  color: var(--jp-ui-font-color1, #1f1f1f); font-size: 0.92em; }
.nbviz-lc-breaks { color: #c62828; font-size: 0.92em; }
.nbviz-lc-legend { display: flex; flex-wrap: wrap; gap: 0.3em 0.8em; margin-bottom: 0.3em;
  align-items: center; }
.nbviz-lc-run { font: inherit; border: 1px solid transparent; border-radius: 3px;
  background: transparent; color: inherit; cursor: pointer; padding: 0 4px; }
.nbviz-lc-run.nbviz-active { border-color: var(--jp-brand-color1, #1976d2); font-weight: 600; }
.nbviz-lc-notice { color: var(--jp-ui-font-color2, #616161); font-style: italic; }
.nbviz-lc-hint { color: var(--jp-ui-font-color2, #616161); font-size: 0.85em;
  margin-bottom: 0.3em; }
"""
)
