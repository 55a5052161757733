"""Histograms: one layer's value distribution over steps, as a ridge plot and a heatmap.

The ridge plot is TensorBoard's offset view (one curve per step, later steps in
front); the heatmap has a row per step and a column per bin. Both mark the
linked step. Long histories are sampled (at most ``MAX_ROWS`` steps, first
and last included; ``notice`` says so), and the histogram at the linked step
itself is always sent exactly.

The view draws uniform bins: a histogram logged with unequal bins (a
TensorBoard log's exponential buckets) is drawn re-binned onto uniform bins
over its step's range, each bucket's count spread evenly across its width;
``run.histogram(layer, signal, step)`` returns the bins as they were logged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import traitlets

from nbviz.param_names import module_of
from nbviz.store import MissingStepError, RunFileError
from nbviz.widgets.checks import check_choice, check_known
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import LiveView, linked_step, reacts_to, view_css
from nbviz.widgets.sampling import count_text, evenly
from nbviz.widgets.view_data import bars_figure, frame
from nbviz.widgets.wire import array_from_payload, array_trait_payload

__all__ = ["Histograms", "common_bins"]

MAX_ROWS = 400
SIGNALS = {"weights": "weight", "gradients": "gradient", "activations": "activation"}


def common_bins(
    lo: np.ndarray, hi: np.ndarray, counts: np.ndarray
) -> tuple[float, float, np.ndarray]:
    """Histograms with per-row ranges ``[lo_i, hi_i]`` re-binned onto one shared range.

    Returns ``(lo, hi, counts)`` with the same bin count; rows whose range is
    already the shared one are returned unchanged. Mass is spread uniformly
    within a source bin (the cumulative counts are interpolated).
    """
    counts = np.asarray(counts, dtype=np.float64)
    ok = np.isfinite(lo) & np.isfinite(hi)
    if not ok.any():
        return 0.0, 1.0, np.zeros_like(counts)
    glo, ghi = float(np.min(lo[ok])), float(np.max(hi[ok]))
    if np.all(lo[ok] == glo) and np.all(hi[ok] == ghi):
        return glo, ghi, counts
    n_bins = counts.shape[1]
    if ghi <= glo:
        ghi = glo + 1.0
    edges = np.linspace(glo, ghi, n_bins + 1)
    out = np.zeros_like(counts)
    for i in np.flatnonzero(ok):
        if hi[i] <= lo[i]:  # all values equal: one spike
            j = min(int((lo[i] - glo) / (ghi - glo) * n_bins), n_bins - 1)
            out[i, j] = counts[i].sum()
            continue
        src = np.linspace(lo[i], hi[i], n_bins + 1)
        cdf = np.concatenate([[0.0], np.cumsum(counts[i])])
        out[i] = np.diff(np.interp(edges, src, cdf))
    return glo, ghi, out


class Histograms(LiveView):
    """Distributions of a layer's weights, gradients or activations over steps.

    Drawn on uniform bins per step; histograms logged with unequal bins (an
    imported TensorBoard log) are drawn re-binned, their own bins being what
    ``run.histogram`` returns.

    Parameters
    ----------
    run
        A run recorded with a probe (histograms every ``hist_every`` steps).
    signal
        ``"weights"``, ``"gradients"`` or ``"activations"`` (also chosen in the view).
    layer
        Layer or parameter name (``"fc1.weight"`` for weights); default: the first.
    live
        Follow the run while it grows.

    ``histogram()`` is the histogram at the step as a DataFrame (the view's
    menu downloads it as CSV, the plots as PNG), ``ridge()`` the history the
    ridge and heatmap draw, ``figure()`` the histogram at the step as a bqplot
    bar chart. (The ``data`` trait is the history as sent to the browser.)
    """

    _esm = esm("histograms")

    step = linked_step("Linked step, highlighted in both plots.")
    signal = traitlets.Enum(tuple(SIGNALS), default_value="weights").tag(sync=True)
    layer = traitlets.Unicode("", help="The layer or parameter shown.").tag(sync=True)
    layer_choices = traitlets.List(traitlets.Unicode()).tag(sync=True)
    missing = traitlets.Unicode("", help="Why the chosen signal shows nothing (yet).").tag(
        sync=True
    )
    data = traitlets.Dict(help="Sampled history: steps, shared range, [steps, bins] counts.").tag(
        sync=True
    )
    current = traitlets.Dict(help="The histogram at the linked step.").tag(sync=True)

    def __init__(
        self,
        run: Any,
        signal: str = "weights",
        *,
        layer: str = "",
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        check_choice("Histograms", "signal", signal, SIGNALS)
        super().__init__(**kwargs)
        self._run = run
        self._steps = np.zeros(0, dtype=np.int64)
        self._damage: RunFileError | None = None  # the last stored histogram that did not decode
        with self._building([run], live):
            self.signal = signal
            self._choose_layers(prefer=layer)
            self._fill()
            self.step = int(self._steps[-1]) if len(self._steps) else 0
            self._fill_current()

    # -- choices -------------------------------------------------------------------------

    def _order(self) -> dict[str, int]:
        names = [str(n) for n in self._run.layers()["name"].tolist()]
        return {n: i for i, n in enumerate(names)}

    def _choose_layers(self, prefer: str = "") -> None:
        sig = SIGNALS[self.signal]
        layers = self._run.recorded_layers(sig, table="histograms")
        order = self._order()

        def key(name: str) -> tuple[int, str]:
            owner = name if name in order else module_of(name)
            return order.get(owner, len(order)), name

        self.layer_choices = sorted(layers, key=key)
        all_layers = self._run.recorded_layers(table="histograms")
        if not all_layers:
            self.empty = (
                f"No histograms recorded in {self._run.name} yet: a probe "
                "(run.watch(model, every=10)) records them every hist_every steps; "
                "this view fills in as they arrive."
            )
        else:
            self.empty = ""
        if prefer and prefer not in self.layer_choices:
            raise traitlets.TraitError(
                f"Histograms: no {self.signal} histograms for layer {prefer!r}; "
                f"layers with {self.signal} histograms: {', '.join(self.layer_choices) or 'none'}"
            )
        if prefer:
            self.layer = prefer
        elif self.layer not in self.layer_choices:
            weights = [n for n in self.layer_choices if n.endswith(".weight")]
            self.layer = (weights or self.layer_choices or [""])[0]
        if not self.layer_choices and all_layers:
            others = [
                name
                for name, s in SIGNALS.items()
                if self._run.recorded_layers(s, table="histograms")
            ]
            self.missing = f"No {self.signal} histograms in this run; recorded: {', '.join(others)}"
        else:
            self.missing = ""

    @traitlets.validate("layer")
    def _check_layer(self, proposal: Any) -> str:
        name = proposal["value"]
        if not self.layer_choices:
            return name
        problem = f"Histograms.layer: no {self.signal} histograms for {name!r}"
        return check_known(name, self.layer_choices, problem, "choose one of ")

    @reacts_to("signal", "layer")
    def _on_choice(self, change: Any) -> None:
        if change["name"] == "signal":
            self._choose_layers()
        self._fill()
        self._fill_current()

    @reacts_to("step", hold=False)
    def _on_step(self, change: Any) -> None:
        self._fill_current()

    # -- data ----------------------------------------------------------------------------

    def _rebuild(self) -> None:
        before = self._steps
        self._choose_layers()
        self._fill()
        self.step = self._followed(self.step, before, self._steps)  # on its own: the newest
        self._fill_current()

    def _fill(self) -> None:
        sig = SIGNALS[self.signal]
        if not self.layer:
            self._steps = np.zeros(0, dtype=np.int64)
            self.data = {}
            self.notice = ""
            return
        # the steps any layer has this signal's histograms at (runs of steps: a few rows)
        self._steps = np.asarray(self._run.recorded_steps(f"histograms:{sig}"), dtype=np.int64)
        sample = [int(s) for s in evenly(self._steps, MAX_ROWS)]
        try:
            rows, damaged = self._run.histogram_rows(self.layer, sig, steps=sample), []
        except RunFileError:  # a damaged row: the others read one by one, the rest drawn
            rows, damaged = self._readable_rows(sig, sample)
        lo, hi, counts = common_bins(rows.lo, rows.hi, rows.counts)
        self.data = {
            "layer": self.layer,
            "signal": self.signal,
            "steps": array_trait_payload(rows.steps, dtype="<f8"),
            "lo": lo,
            "hi": hi,
            "counts": array_trait_payload(counts, dtype="<f4"),
            "nonfinite": array_trait_payload(rows.nonfinite, dtype="<f8"),
        }
        self.notice = count_text(len(rows.steps), len(self._steps), "histograms (sampled evenly)")
        if damaged:
            shown = ", ".join(str(s) for s in damaged[:5]) + (", ..." if len(damaged) > 5 else "")
            self.notice += (
                f"; {len(damaged)} stored histogram(s) do not decode and are left out "
                f"(step {shown}): {damaged_reason(self._damage)}"
            )

    def _readable_rows(self, sig: str, steps: list[int]) -> tuple[Any, list[int]]:
        """The rows at ``steps`` that decode, one read each, and the steps that do not."""
        good, damaged = [], []
        for step in steps:
            try:
                self._run.histogram_rows(self.layer, sig, steps=step)
            except RunFileError as exc:
                damaged.append(step)
                self._damage = exc
            except (MissingStepError, ValueError):
                continue
            else:
                good.append(step)
        return self._run.histogram_rows(self.layer, sig, steps=good), damaged

    def _fill_current(self) -> None:
        sig = SIGNALS[self.signal]
        i = int(np.searchsorted(self._steps, self.step, "right")) - 1
        if not self.layer or i < 0:
            self.current = {}
            return
        at = int(self._steps[i])
        try:
            rows = self._run.histogram_rows(self.layer, sig, steps=at)
        except RunFileError as exc:  # said in the view; the next readable step clears it
            self.current = {}
            self.error = f"Histograms: the histogram at step {at}: {damaged_reason(exc)}"
            return
        except (MissingStepError, ValueError):
            self.current = {}
            return
        if self.error.startswith("Histograms: the histogram at step "):
            self.error = ""
        self.current = {
            "layer": self.layer,
            "step": at,
            "lo": float(rows.lo[0]),
            "hi": float(rows.hi[0]),
            "counts": array_trait_payload(rows.counts[0], dtype="<f8"),
            "underflow": int(rows.underflow[0]),
            "overflow": int(rows.overflow[0]),
            "nonfinite": int(rows.nonfinite[0]),
        }

    # -- the data, for people and other tools ----------------------------------------------

    def histogram(self) -> Any:
        """The histogram at ``step`` (the latest at or before it), one row per bin.

        Columns ``layer, signal, step, bin, lo, hi, count``: ``lo``/``hi`` are the
        bin's edges on the uniform bins the view draws. Empty before the first
        histogram.
        """
        columns = ["layer", "signal", "step", "bin", "lo", "hi", "count"]
        cur = self.current
        if not cur:
            return frame([], columns)
        counts = np.asarray(array_from_payload(cur["counts"]), dtype=np.float64)
        edges = np.linspace(cur["lo"], cur["hi"], len(counts) + 1)
        n = len(counts)
        return frame(
            {
                "layer": [cur["layer"]] * n,
                "signal": [self.signal] * n,
                "step": np.full(n, int(cur["step"]), dtype=np.int64),
                "bin": np.arange(n),
                "lo": edges[:-1],
                "hi": edges[1:],
                "count": counts,
            },
            columns,
        )

    def ridge(self) -> Any:
        """The history the ridge plot and heatmap draw: one row per step and bin.

        Columns ``step, bin, lo, hi, count``, on the bins the steps share (each
        step's histogram re-binned onto them); long histories are sampled
        (``notice`` says so).
        """
        columns = ["step", "bin", "lo", "hi", "count"]
        d = self.data
        if not d:
            return frame([], columns)
        steps = np.asarray(array_from_payload(d["steps"]), dtype=np.float64).astype(np.int64)
        counts = np.asarray(array_from_payload(d["counts"]), dtype=np.float64)
        counts = counts.reshape(len(steps), -1)
        bins = counts.shape[1]
        edges = np.linspace(d["lo"], d["hi"], bins + 1)
        return frame(
            {
                "step": np.repeat(steps, bins),
                "bin": np.tile(np.arange(bins), len(steps)),
                "lo": np.tile(edges[:-1], len(steps)),
                "hi": np.tile(edges[1:], len(steps)),
                "count": counts.reshape(-1),
            },
            columns,
        )

    def figure(self) -> Any:
        """The histogram at ``step`` as a bqplot bar chart (bins labelled by their centre)."""
        table = self.histogram()
        if not len(table):
            raise ValueError(
                f"Histograms.figure: no {self.signal} histogram at or before step {self.step}"
            )
        centres = (table["lo"] + table["hi"]) / 2
        step = int(table["step"].iloc[0])
        return bars_figure(
            [f"{c:.3g}" for c in centres],
            table["count"].to_numpy(),
            title=f"{self.layer} {self.signal} at step {step}",
            y_label="count",
        )


Histograms._css = view_css(
    """
.nbviz-hist-plots { display: flex; flex-wrap: wrap; gap: 12px; }
.nbviz-hist-plot { display: flex; flex-direction: column; }
.nbviz-hist-title { font-weight: 600; font-size: 0.92em; }
.nbviz-hist-caption { font-size: 0.9em; color: var(--jp-ui-font-color2, #616161);
  font-variant-numeric: tabular-nums; min-height: 1.3em; }
.nbviz-hist-heat { cursor: pointer; }
.nbviz-hist-heatwrap { display: flex; }
.nbviz-hist-nonfinite { color: #c62828; font-weight: 600; }
.nbviz-toolbar select { font: inherit; }
"""
)


def damaged_reason(exc: RunFileError | None) -> str:
    """What is wrong with a stored value, without the file's path and the remedy."""
    return exc.problem if exc is not None else "it does not decode"
