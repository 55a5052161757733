"""EmbeddingProjector: the recorded embeddings in 2-d, linked to the samples behind them.

A little over 500 lines because the traits, the layout on screen and the background job
share one view's state; the points on the wire (:mod:`.projector_points`), the job
(:mod:`.projector_job`) and the selection (:mod:`.point_selection`) are already apart.

Points are drawn with WebGL (regl-scatterplot) and travel as binary buffers:
float32 positions and one byte each for label, prediction, confidence and loss,
about 12 bytes a point, so a million points load and stay interactive.

What is on screen first is always a PCA layout (under a second at 100k
points); when the chosen method (t-SNE or UMAP) is not cached yet, it is
computed in a background thread with its progress shown, and replaces the PCA
layout with an animated transition when ready. Layouts are cached in the run
(:mod:`nbviz.analysis.projection`), so a second view of the same projection
costs nothing, and aligned over training so that moving ``step`` shows the
clusters forming in place.

Box or lasso selection sets ``selected_ids`` and shows those samples in the
embedded :class:`SampleGallery`; ``highlight_ids`` (set by a confusion-matrix
cell in the Dashboard) highlights points without selecting them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import traitlets

from nbviz.analysis import projection as proj
from nbviz.widgets.base import child_view
from nbviz.widgets.checks import check_choice, check_int, check_run, id_trait
from nbviz.widgets.frontend import esm
from nbviz.widgets.gallery import SampleGallery
from nbviz.widgets.live import LiveView, linked_step, opening_step, reacts_to, view_css
from nbviz.widgets.point_selection import PointSelection
from nbviz.widgets.projector_job import Job, LayoutJobs
from nbviz.widgets.projector_points import (
    color_values,
    indices_of,
    point_arrays,
    points_figure,
    prediction_frame,
)
from nbviz.widgets.samples import sample_payload
from nbviz.widgets.splits import check_switch, followed_split, opening_split, split_choices
from nbviz.widgets.view_data import answer_table_requests
from nbviz.widgets.wire import array_from_payload, array_trait_payload

__all__ = ["COLOR_BY", "EmbeddingProjector"]

COLOR_BY = ("label", "prediction", "correct", "confidence", "loss", "target", "none")
GALLERY_MAX = 2_000
"""At most this many selected samples go to the gallery (highest loss first)."""


class EmbeddingProjector(PointSelection, LiveView):
    """PCA / t-SNE / UMAP of a run's recorded embeddings, coloured by what the model did.

    Parameters
    ----------
    run
        A run with embeddings (``run.evaluate`` records them; or ``run.log_embeddings``).
    method
        ``"umap"`` (default), ``"tsne"`` or ``"pca"``; also chosen in the view.
    split, layer
        Which embeddings (split None: ``"val"``, else ``"test"``, else the first split
        with embeddings; layer None: the first recorded for the split). The split is
        also switched in the view.
    step
        Linked step: the latest embedding at or before it is shown (default: the latest).
    params
        The method's parameters (see :func:`nbviz.analysis.projection.resolve_params`):
        perplexity, n_neighbors, min_dist, metric, seed, fit_size.
    color_by
        One of ``COLOR_BY`` (``"target"``: a regression's target value). Default: the
        true class where the samples have classes, else the loss where there is one.
    align
        Align each step's layout onto the previous one (default True).
    live
        Follow the run while it grows.

    ``data()`` is the points on screen as a DataFrame (the view's menu downloads
    it as CSV), ``figure()`` a bqplot scatter of them.
    """

    _esm = esm("projector")
    _sort_picked = True

    step = linked_step("Linked step; the latest embedding at or before it is shown.")
    split = traitlets.Unicode("val").tag(sync=True)
    splits = split_choices("Splits with embeddings (the menu's choices).")
    layer = traitlets.Unicode("").tag(sync=True)
    layers = traitlets.List(traitlets.Unicode(), help="Layers with embeddings.").tag(sync=True)
    method = traitlets.Enum(proj.METHODS, default_value="umap").tag(sync=True)
    params = traitlets.Dict(help="Parameters of the method (defaults filled in).").tag(sync=True)
    align = traitlets.Bool(True).tag(sync=True)
    color_by = traitlets.Enum(COLOR_BY, default_value="label").tag(sync=True)
    filter_class = traitlets.Int(-1, help="Show one true class only (-1: all).").tag(sync=True)
    embedding_steps = traitlets.List(traitlets.Int()).tag(sync=True)
    shown_step = traitlets.Int(-1, help="Step of the embedding on screen (-1: none).").tag(
        sync=True
    )
    shown_method = traitlets.Unicode("", help="Method of the layout on screen.").tag(sync=True)
    class_names = traitlets.List(traitlets.Unicode()).tag(sync=True)
    points = traitlets.Dict(help="The points on screen, as binary arrays.").tag(sync=True)
    progress = traitlets.Float(1.0, help="Progress of the background projection in [0, 1].").tag(
        sync=True
    )
    status = traitlets.Unicode("", help="What the background projection is doing.").tag(sync=True)
    note = traitlets.Unicode("", help="What the layout is fitted on, points left out.").tag(
        sync=True
    )
    highlight_ids = traitlets.List(traitlets.Int(), help="Ids to highlight.").tag(sync=True)
    highlight = traitlets.Dict(help="Point indices of highlight_ids (binary).").tag(sync=True)
    hover_index = id_trait(-1, "Point under the pointer (-1: none).", high=2**31 - 1)
    hover_sample = traitlets.Dict(help="The sample of the point under the pointer.").tag(sync=True)
    gallery = child_view(SampleGallery)

    def __init__(
        self,
        run: Any,
        method: str = "umap",
        *,
        split: str | None = None,
        layer: str | None = None,
        step: int | None = None,
        params: Mapping[str, Any] | None = None,
        color_by: str | None = None,
        align: bool = True,
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        check_run("EmbeddingProjector", run)
        check_choice("EmbeddingProjector", "method", method, proj.METHODS)
        if color_by is not None:
            check_choice("EmbeddingProjector", "color_by", color_by, COLOR_BY)
        splits = _embedding_splits(run)
        self._split_chosen = split is None
        split = opening_split("EmbeddingProjector", split, splits, run.name, "embeddings")
        check_int("EmbeddingProjector", "step", step)
        resolved = proj.resolve_params(method, params)
        layers = run.embedding_layers(split, "embedding")
        if layer is not None and layers and layer not in layers:
            raise ValueError(
                f"EmbeddingProjector: no embeddings of layer {layer!r} ({split}) in {run.name}; "
                f"recorded layers: {', '.join(map(repr, layers))}"
            )
        super().__init__(**kwargs)
        self._run = run
        self._ids = np.zeros(0, dtype=np.int64)  # ids of the points on screen, in order
        self._nothing_finite = False  # the layout on screen had only NaN/inf embeddings
        self._order = np.zeros(0, dtype=np.int64)  # argsort of _ids, for id -> index
        self._frame: pd.DataFrame | None = None
        self._jobs = LayoutJobs(self, run, self._deliver)
        self._shown_key: tuple[Any, ...] | None = None
        self._auto_colour = color_by is None  # chosen once the points say what they have
        answer_table_requests(self)
        with self._building([run], live):
            self.splits = splits
            self.split = split
            self.method = method
            self.params = resolved
            self.color_by = color_by or "label"
            self.align = bool(align)
            self.layers = list(layers)
            self.layer = layer or (layers[0] if layers else "")
            self._read_steps()
            steps = self.embedding_steps
            self.step = opening_step(step, steps)
            self._ready = True
            self._show()

    # -- reading -------------------------------------------------------------------------

    def _read_steps(self) -> None:
        steps: list[int] = []
        if self.layer:
            steps = [int(s) for s in self._run.embedding_steps(self.split, self.layer)]
        self.embedding_steps = steps
        names = self._run.class_names
        self.class_names = [str(c) for c in names] if names else []
        if not steps:
            self.empty = (
                f"No {self.split} embeddings in {self._run.name} yet: record them with "
                f"run.evaluate(step, model, loader, split={self.split!r}) or "
                f"run.log_embeddings(step, features, ids=..., split={self.split!r}); "
                "this view fills in as they arrive."
            )
        else:
            self.empty = ""

    def _target_step(self) -> int | None:
        steps = self.embedding_steps
        if not steps:
            return None
        at = [s for s in steps if s <= self.step]
        return at[-1] if at else steps[0]

    # -- what is on screen ---------------------------------------------------------------

    def _want(self, method: str) -> tuple[Any, ...] | None:
        step = self._target_step()
        if step is None or not self.layer:
            return None
        params = self.params if method == self.method else None
        return (self.split, self.layer, step, method, self._params_key(params), self.align)

    @staticmethod
    def _params_key(params: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted((params or {}).items()))

    def _layout(self, want: tuple[Any, ...], compute: bool) -> proj.Layout | None:
        split, layer, step, method, params, align = want
        kwargs = dict(split=split, layer=layer, method=method, params=dict(params), align=align)
        if compute:
            return proj.compute_layout(self._run, step, **kwargs)
        return proj.cached_layout(self._run, step, **kwargs)

    def _show(self) -> None:
        """Put the best layout available now on screen; start the chosen method if needed."""
        if not self._ready:
            return
        want = self._want(self.method)
        if want is None:
            self._jobs.cancel()
            self.points = {}
            self.shown_step = -1
            return
        try:
            layout = self._layout(want, compute=self.method == "pca")
            if layout is None:
                quick = self._want("pca")
                assert quick is not None
                if self._shown_key is None or self._shown_key[:3] != want[:3]:
                    self._put(self._layout(quick, compute=True))
                if self._nothing_finite:
                    self._jobs.cancel()  # every embedding is NaN/inf: nothing to project
                else:
                    self._jobs.start(want)
            else:
                self._jobs.cancel()
                self._put(layout)
            self.error = ""
        except (ValueError, KeyError, proj.MethodUnavailableError) as exc:
            self.error = f"EmbeddingProjector: {exc}"

    def _put(self, layout: proj.Layout | None) -> None:
        """Send ``layout`` (and its colours) to the browser."""
        if layout is None:
            return
        key = (layout.split, layout.layer, layout.step, layout.method, layout.key)
        if key == self._shown_key:
            return
        coords = np.asarray(layout.coords, dtype=np.float64)
        finite = np.isfinite(coords).all(axis=1)
        ids = np.asarray(layout.ids, dtype=np.int64)[finite]
        n_bad = int((~finite).sum())
        self._nothing_finite = n_bad > 0 and not len(ids)
        frame = prediction_frame(self._run, self.split, ids, layout.step)
        same_points = len(ids) == len(self._ids) and np.array_equal(ids, self._ids)
        self._ids = ids
        self._order = np.argsort(ids, kind="stable")
        self._frame = frame
        self._shown_key = key
        self.points = {
            **point_arrays(coords[finite], ids, frame),
            "transition": bool(same_points),
            "method": layout.method,
            "step": int(layout.step),
            "nonfinite": n_bad,
            "total": int(len(finite)),
        }
        self.shown_step = int(layout.step)
        self.shown_method = layout.method
        if self._auto_colour and (self.points["has_labels"] or self.points["has_loss"]):
            self._auto_colour = False
            self.color_by = "label" if self.points["has_labels"] else "loss"
        self.note = _points_note(layout, len(ids), n_bad)
        left_out = f" ({n_bad:,} non-finite left out)" if n_bad else ""
        self.notice = f"{len(ids):,} points{left_out}, step {layout.step}"
        self._resync_ids()

    def _indices(self, ids: list[int]) -> np.ndarray:
        """Point indices of ``ids`` on screen (ids not on screen are skipped)."""
        return indices_of(self._ids, self._order, ids)

    def _resync_ids(self) -> None:
        self._send_selection()
        self.highlight = {"indices": array_trait_payload(self._indices(self.highlight_ids))}

    # -- the background job --------------------------------------------------------------

    @property
    def _job(self) -> Job | None:
        """The background projection running, if any."""
        return self._jobs.job

    def _deliver(self, want: tuple[Any, ...], layout: proj.Layout) -> None:
        """A background layout is done: shown if it is still what the view wants."""
        if self._want(self.method) == want:
            self._put(layout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background projection (if any) is done; True when it is."""
        return self._jobs.wait(timeout)

    # -- reacting ------------------------------------------------------------------------

    @traitlets.validate("params")
    def _check_params(self, proposal: Any) -> dict[str, Any]:
        try:
            return proj.resolve_params(self.method, proposal["value"])
        except (TypeError, ValueError) as exc:
            raise traitlets.TraitError(f"EmbeddingProjector: {exc}") from exc

    @traitlets.observe("method")
    def _on_method(self, change: Any) -> None:
        if not self._ready:
            return
        # the new method's defaults, keeping the seed and fit size
        keep = {k: self.params[k] for k in ("seed", "fit_size") if k in self.params}
        with self.hold_sync():
            self._ready = False
            self.params = proj.resolve_params(change["new"], keep)
            self._ready = True
            self._show()

    @reacts_to("step", "params", "align")
    def _on_change(self, change: Any) -> None:
        self._show()

    @traitlets.validate("split")
    def _check_split(self, proposal: Any) -> str:
        return check_switch("EmbeddingProjector", proposal["value"], self.splits)

    @reacts_to("layer", "split")
    def _on_source(self, change: Any) -> None:
        if change["name"] == "split":  # the layer of that split (the same name if it has one)
            layers = self._run.embedding_layers(self.split, "embedding")
            self._ready = False
            try:
                self.layers = list(layers)
                if self.layer not in layers:
                    self.layer = layers[0] if layers else ""
            finally:
                self._ready = True
        self._read_steps()
        self._shown_key = None
        if self.gallery is not None:
            self.gallery.split = self.split
        self._show()

    @traitlets.observe("color_by")
    def _on_color_by(self, change: Any) -> None:
        if self._ready:  # a colouring chosen (by a person or a notebook) stays chosen
            self._auto_colour = False

    def _show_selected(self) -> None:
        if self.gallery is None:
            if not self.selected_ids:
                return
            # made on the first selection: reading the predictions costs ~0.4 s at 100k
            # highest loss first, as the menu says (the ids below are cut in that order)
            self.gallery = SampleGallery(
                self._run, ids=[], split=self.split, live=False, sort_by="loss"
            )
            self.gallery.splits = []  # the split is this view's: no menu of its own
        ids = list(self.selected_ids)
        frame = self._frame
        if frame is not None and len(ids) > 1 and frame["loss"].notna().any():
            losses = frame.set_index("id")["loss"].reindex(ids).fillna(-np.inf)
            ids = [int(i) for i in losses.sort_values(ascending=False, kind="stable").index]
        self.gallery.step = self.shown_step if self.shown_step >= 0 else self.step
        self.gallery.ids = ids[:GALLERY_MAX]
        if len(ids) > GALLERY_MAX:
            self.gallery.note = f"showing the {GALLERY_MAX:,} highest-loss of {len(ids):,} selected"

    @traitlets.observe("highlight_ids")
    def _on_highlight(self, change: Any) -> None:
        self.highlight = {"indices": array_trait_payload(self._indices(self.highlight_ids))}

    @traitlets.observe("hover_index")
    def _on_hover(self, change: Any) -> None:
        i = change["new"]
        if i < 0 or i >= len(self._ids):
            return
        sid = int(self._ids[i])
        out: dict[str, Any] = {"index": int(i), "id": sid}
        try:
            row = self._run.samples([sid], self.split).iloc[0]
        except KeyError:
            out["kind"] = "none"
        else:
            out.update(sample_payload(row))
        self.hover_sample = out

    def _rebuild(self) -> None:
        """The run grew: new embeddings or predictions may have arrived."""
        self.splits = _embedding_splits(self._run)
        split = followed_split(self.split, self.splits, self._split_chosen)
        if split != self.split:
            self.split = split  # its layers and steps, read by _on_source
        layers = self._run.embedding_layers(self.split, "embedding")
        self.layers = list(layers)
        if not self.layer and layers:
            self.layer = layers[0]
        at_latest = self.embedding_steps and self.step >= self.embedding_steps[-1]
        self._read_steps()
        if at_latest and self.embedding_steps:
            self.step = max(self.step, self.embedding_steps[-1])
        self._shown_key = None
        self._show()

    # -- for notebooks -------------------------------------------------------------------

    def points_frame(self) -> pd.DataFrame:
        """The points on screen: id, x, y (as drawn, in [-1, 1]), label, pred, loss, confidence."""
        if self._frame is None or not self.points:
            return pd.DataFrame(columns=["id", "x", "y", "label", "pred", "loss", "confidence"])
        xy = np.asarray(array_from_payload(self.points["xy"]))
        out = self._frame[["id", "label", "pred", "loss", "confidence"]].copy()
        out.insert(1, "x", xy[:, 0])
        out.insert(2, "y", xy[:, 1])
        return out

    def data(self) -> pd.DataFrame:
        """The points on screen, one row per sample: ``id, x, y, label, pred, loss,
        confidence, color`` (``x, y`` as drawn, in [-1, 1]; ``color`` the value the
        point is coloured by under ``color_by``, NaN where unknown)."""
        out = self.points_frame()
        out["color"] = color_values(self._frame if len(out) else out, self.color_by)
        return out

    def figure(self) -> Any:
        """The points on screen as a bqplot ``Scatter`` coloured by ``color_by``."""
        return points_figure(self.data(), self)

    def close(self) -> None:
        """Stop the background projection and following the run; close the view."""
        if hasattr(self, "_jobs"):  # not when __init__ refused its arguments
            self._jobs.cancel()
        if getattr(self, "gallery", None) is not None:
            self.gallery.close()
        super().close()


def _points_note(layout: proj.Layout, shown: int, n_bad: int) -> str:
    """What the points on screen are: non-finite embeddings left out, a fit on a sample."""
    step = int(layout.step)
    if n_bad and not shown:
        return (
            f"all {n_bad:,} embeddings at step {step} are non-finite (NaN or inf): "
            "nothing to project"
        )
    notes = []
    if n_bad:
        notes.append(
            f"{n_bad:,} of {n_bad + shown:,} embeddings at step {step} are non-finite "
            "(NaN or inf) and not shown"
        )
    if layout.fitted_on < shown:
        notes.append(
            f"fitted on {layout.fitted_on:,} of the {shown:,} finite points and the rest "
            "placed into that map"
        )
    return "; ".join(notes)


def _embedding_splits(run: Any) -> list[str]:
    """Splits with embeddings to project (not only per-unit summaries)."""
    return [s for s in run.splits("embeddings") if run.embedding_layers(s, "embedding")]


EmbeddingProjector._css = view_css(
    """
.nbviz-pj-message.nbviz-nonfinite .nbviz-message-text { color: #c4103f; font-style: normal; }
/* never taller than wide: the scatterplot fits its [-1, 1] square to the stage's height,
   so a narrow, tall stage would cut off the points at the left and right */
.nbviz-projector-stage { position: relative; width: 100%; aspect-ratio: 1 / 1; max-height: 460px;
  box-sizing: border-box;
  border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 4px; overflow: hidden;
  background: var(--jp-layout-color1, #fff); }
.nbviz-projector-stage canvas { display: block; position: absolute; left: 0; top: 0; }
.nbviz-projector-box { position: absolute; inset: 0; cursor: crosshair; display: none; }
.nbviz-projector-box.nbviz-on { display: block; }
.nbviz-projector-rect { position: absolute; border: 1px dashed #1565c0;
  background: rgba(21, 101, 192, 0.12); pointer-events: none; }
.nbviz-projector-tip { position: absolute; pointer-events: none; z-index: 2; max-width: 220px;
  background: var(--jp-layout-color0, #fff); border: 1px solid var(--jp-border-color1, #bdbdbd);
  border-radius: 4px; padding: 4px 6px; font-size: 0.9em; box-shadow: 0 1px 4px rgba(0,0,0,.2); }
.nbviz-projector-tip img { width: 64px; height: 64px; image-rendering: pixelated;
  background: #000; display: block; margin-bottom: 2px; }
.nbviz-projector-legend { display: flex; flex-wrap: wrap; gap: 4px 10px; margin: 4px 0;
  font-size: 0.9em; }
.nbviz-projector-swatch { display: inline-block; width: 10px; height: 10px; border-radius: 50%;
  margin-right: 3px; vertical-align: middle; }
.nbviz-projector-bar { height: 4px; background: var(--jp-layout-color3, #e0e0e0); flex: 1;
  min-width: 80px; border-radius: 2px; overflow: hidden; }
.nbviz-projector-bar > div { height: 100%; background: #1565c0; transition: width .2s; }
.nbviz-projector-status { display: flex; align-items: center; gap: 8px; min-height: 1.4em;
  color: var(--jp-ui-font-color2, #616161); }
.nbviz-toolbar button.nbviz-on { background: var(--jp-brand-color1, #1976d2); color: #fff; }
"""
)
