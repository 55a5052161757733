"""EmbeddingProjector: the recorded embeddings in 2-d, linked to the samples behind them.

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

import threading
import time
from collections.abc import Mapping
from typing import Any

import ipywidgets as W
import numpy as np
import pandas as pd
import traitlets

from nbviz.analysis import projection as proj
from nbviz.widgets.base import array_from_payload, array_trait_payload, esm
from nbviz.widgets.gallery import SampleGallery
from nbviz.widgets.live import TRAINING_CSS, LiveView
from nbviz.widgets.samples import sample_payload

__all__ = ["COLOR_BY", "EmbeddingProjector"]

COLOR_BY = ("label", "prediction", "correct", "confidence", "loss", "none")
GALLERY_MAX = 2_000
"""At most this many selected samples go to the gallery (highest loss first)."""
_PROGRESS_EVERY = 0.25  # seconds between progress updates sent to the browser


def _normalized(coords: np.ndarray) -> np.ndarray:
    """``coords`` shifted and scaled into [-1, 1] around the centre, aspect kept."""
    if not len(coords):
        return coords.astype(np.float32)
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    centre = (lo + hi) / 2.0
    half = float(np.max(hi - lo)) / 2.0 or 1.0
    return ((coords - centre) / (half * 1.05)).astype(np.float32)


class _Job:
    """One background projection: what it is for, and how to stop it."""

    def __init__(self, want: tuple[Any, ...]) -> None:
        self.want = want
        self.cancel = threading.Event()


class EmbeddingProjector(LiveView):
    """PCA / t-SNE / UMAP of a run's recorded embeddings, coloured by what the model did.

    Parameters
    ----------
    run
        A run with embeddings (``run.evaluate`` records them; or ``run.log_embeddings``).
    method
        ``"umap"`` (default), ``"tsne"`` or ``"pca"``; also chosen in the view.
    split, layer
        Which embeddings (layer None: the first recorded for the split).
    step
        Linked step: the latest embedding at or before it is shown (default: the latest).
    params
        The method's parameters (see :func:`nbviz.analysis.projection.resolve_params`):
        perplexity, n_neighbors, min_dist, metric, seed, fit_size.
    color_by
        One of ``COLOR_BY``.
    align
        Align each step's layout onto the previous one (default True).
    live
        Follow the run while it grows.
    """

    _esm = esm("projector")

    step = traitlets.Int(0, help="Linked step; the latest embedding at or before it is shown.").tag(
        sync=True
    )
    split = traitlets.Unicode("val").tag(sync=True)
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
    selected_ids = traitlets.List(traitlets.Int(), help="Ids of the selected points.").tag(
        sync=True
    )
    selection = traitlets.Dict(help="Point indices of selected_ids (binary).").tag(sync=True)
    picked = traitlets.Dict(help="Point indices selected in the browser (binary).").tag(sync=True)
    highlight_ids = traitlets.List(traitlets.Int(), help="Ids to highlight.").tag(sync=True)
    highlight = traitlets.Dict(help="Point indices of highlight_ids (binary).").tag(sync=True)
    hover_index = traitlets.Int(-1, help="Point under the pointer (-1: none).").tag(sync=True)
    hover_sample = traitlets.Dict(help="The sample of the point under the pointer.").tag(sync=True)
    gallery = traitlets.Instance(SampleGallery, allow_none=True).tag(
        sync=True, **W.widget_serialization
    )

    def __init__(
        self,
        run: Any,
        method: str = "umap",
        *,
        split: str = "val",
        layer: str | None = None,
        step: int | None = None,
        params: Mapping[str, Any] | None = None,
        color_by: str = "label",
        align: bool = True,
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        if method not in proj.METHODS:
            raise ValueError(
                f"EmbeddingProjector: method must be one of {', '.join(map(repr, proj.METHODS))}, "
                f"got {method!r}"
            )
        if color_by not in COLOR_BY:
            raise ValueError(
                f"EmbeddingProjector: color_by must be one of {', '.join(map(repr, COLOR_BY))}, "
                f"got {color_by!r}"
            )
        if not isinstance(split, str) or not split:
            raise ValueError(f"EmbeddingProjector: split must be a non-empty string, got {split!r}")
        if step is not None and (isinstance(step, bool) or not isinstance(step, (int, np.integer))):
            raise TypeError(f"EmbeddingProjector: step must be an int, got {step!r}")
        resolved = proj.resolve_params(method, params)
        layers = run.embedding_layers(split, "embedding")
        if layer is not None and layers and layer not in layers:
            raise ValueError(
                f"EmbeddingProjector: no embeddings of layer {layer!r} ({split}) in {run.name}; "
                f"recorded layers: {', '.join(map(repr, layers))}"
            )
        super().__init__(**kwargs)
        self._run = run
        self._ready = False
        self._ids = np.zeros(0, dtype=np.int64)  # ids of the points on screen, in order
        self._order = np.zeros(0, dtype=np.int64)  # argsort of _ids, for id -> index
        self._frame: pd.DataFrame | None = None
        self._job: _Job | None = None
        self._job_lock = threading.Lock()
        self._shown_key: tuple[Any, ...] | None = None
        self._init_live([run], live)
        with self._lock, self.hold_sync():
            self.split = split
            self.method = method
            self.params = resolved
            self.color_by = color_by
            self.align = bool(align)
            self.layers = list(layers)
            self.layer = layer or (layers[0] if layers else "")
            self._read_steps()
            steps = self.embedding_steps
            self.step = int(steps[-1]) if step is None and steps else int(step or 0)
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

    def _colours(self, ids: np.ndarray, step: int) -> pd.DataFrame:
        """label, pred, confidence, loss per id (NaN/-1 where unknown)."""
        frame = pd.DataFrame({"id": ids})
        evals = self._run.prediction_steps(self.split)
        at = [int(s) for s in evals if s <= step]
        if at or len(evals):
            preds = self._run.predictions(at[-1] if at else int(evals[0]), self.split)
            frame = frame.merge(preds.drop(columns=["step"]), on="id", how="left")
        if "label" not in frame or frame["label"].isna().all():
            stored = self._run.samples(None, self.split)[["id", "label"]]
            frame = frame.drop(columns=["label"], errors="ignore").merge(
                stored, on="id", how="left"
            )
        for col in ("label", "pred", "loss", "confidence"):
            if col not in frame:
                frame[col] = np.nan
        return frame

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
            self._cancel_job()
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
                self._start_job(want)
            else:
                self._cancel_job()
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
        frame = self._colours(ids, layout.step)
        same_points = len(ids) == len(self._ids) and np.array_equal(ids, self._ids)
        self._ids = ids
        self._order = np.argsort(ids, kind="stable")
        self._frame = frame
        self._shown_key = key
        n_classes = self._n_classes(frame)
        small = np.uint8 if n_classes < 255 else np.uint16
        missing = np.iinfo(small).max
        label = frame["label"].to_numpy(dtype=np.float64, na_value=np.nan)
        pred = frame["pred"].to_numpy(dtype=np.float64, na_value=np.nan)
        conf = frame["confidence"].to_numpy(dtype=np.float64, na_value=np.nan)
        loss = frame["loss"].to_numpy(dtype=np.float64, na_value=np.nan)
        loss_hi = float(np.nanpercentile(loss, 99)) if np.isfinite(loss).any() else 0.0
        loss_hi = loss_hi if loss_hi > 0 else 1.0

        def codes(values: np.ndarray) -> np.ndarray:
            out = np.full(len(values), missing, dtype=small)
            ok = np.isfinite(values)
            out[ok] = values[ok].astype(small)
            return out

        def byte(values: np.ndarray) -> np.ndarray:
            out = np.full(len(values), 255, dtype=np.uint8)  # 255: unknown
            ok = np.isfinite(values)
            out[ok] = np.clip(np.round(values[ok] * 254), 0, 254).astype(np.uint8)
            return out

        self.points = {
            "n": int(len(ids)),
            "xy": array_trait_payload(_normalized(coords[finite]), "<f4"),
            "label": array_trait_payload(codes(label)),
            "pred": array_trait_payload(codes(pred)),
            "confidence": array_trait_payload(byte(conf)),
            "loss": array_trait_payload(byte(np.log1p(np.maximum(loss, 0)) / np.log1p(loss_hi))),
            "loss_max": loss_hi,
            "n_classes": n_classes,
            "missing": int(missing),
            "has_predictions": bool(np.isfinite(pred).any()),
            "ids_min": int(ids.min()) if len(ids) else 0,
            "transition": bool(same_points),
            "method": layout.method,
            "step": int(layout.step),
        }
        self.shown_step = int(layout.step)
        self.shown_method = layout.method
        notes = []
        if layout.note:
            notes.append(layout.note + " and the rest placed into that map")
        if (~finite).any():
            notes.append(f"{int((~finite).sum()):,} points with NaN/Inf features are not shown")
        self.note = "; ".join(notes)
        self.notice = f"{len(ids):,} points, step {layout.step}"
        self._resync_ids()

    @staticmethod
    def _n_classes(frame: pd.DataFrame) -> int:
        top = 0.0
        for col in ("label", "pred"):
            values = frame[col].to_numpy(dtype=np.float64, na_value=np.nan)
            if np.isfinite(values).any():
                top = max(top, float(np.nanmax(values)))
        return int(top) + 1

    def _indices(self, ids: list[int]) -> np.ndarray:
        """Point indices of ``ids`` on screen (ids not on screen are skipped)."""
        if not len(self._ids) or not ids:
            return np.zeros(0, dtype=np.uint32)
        wanted = np.asarray(ids, dtype=np.int64)
        pos = np.searchsorted(self._ids[self._order], wanted)
        pos = np.clip(pos, 0, len(self._ids) - 1)
        hit = self._ids[self._order][pos] == wanted
        return np.sort(self._order[pos[hit]]).astype(np.uint32)

    def _resync_ids(self) -> None:
        self.selection = {"indices": array_trait_payload(self._indices(self.selected_ids))}
        self.highlight = {"indices": array_trait_payload(self._indices(self.highlight_ids))}

    # -- the background job --------------------------------------------------------------

    def _cancel_job(self) -> None:
        with self._job_lock:
            if self._job is not None:
                self._job.cancel.set()
                self._job = None
        self.progress = 1.0
        self.status = ""

    def _start_job(self, want: tuple[Any, ...]) -> None:
        with self._job_lock:
            if self._job is not None and self._job.want == want:
                return
            if self._job is not None:
                self._job.cancel.set()
            job = self._job = _Job(want)
        reason = proj.method_unavailable(want[3])
        if reason:
            self._cancel_job()
            self.status = f"{reason}; showing PCA"
            return
        self.progress = 0.0
        self.status = f"{proj.METHOD_LABELS[want[3]]}: queued"
        threading.Thread(
            target=self._run_job, args=(job,), name="nbviz-projector", daemon=True
        ).start()

    def _run_job(self, job: _Job) -> None:
        last = [0.0]

        def progress(fraction: float, message: str) -> None:
            now = time.monotonic()
            if now - last[0] >= _PROGRESS_EVERY and not job.cancel.is_set():
                last[0] = now
                with self.hold_sync():
                    self.progress = float(fraction)
                    self.status = message

        split, layer, step, method, params, align = job.want
        try:
            layout = proj.compute_layout(
                self._run,
                step,
                split=split,
                layer=layer,
                method=method,
                params=dict(params),
                align=align,
                progress=progress,
                cancel=job.cancel,
            )
        except proj.ProjectionCancelled:
            return
        except Exception as exc:  # shown in the view: the PCA layout stays
            with self._job_lock:
                if self._job is job:
                    self._job = None
                    self.status = f"{proj.METHOD_LABELS[method]} failed: {exc}; showing PCA"
            return
        with self._lock:
            with self._job_lock:
                if self._job is not job:
                    return
            try:
                with self.hold_sync():
                    self.progress = 1.0
                    self.status = ""
                    if self._want(self.method) == job.want:
                        self._put(layout)
            finally:
                with self._job_lock:
                    if self._job is job:
                        self._job = None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background projection (if any) is done; True when it is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._job_lock:
                if self._job is None:
                    return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)

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

    @traitlets.observe("step", "params", "align")
    def _on_change(self, change: Any) -> None:
        with self._lock, self.hold_sync():
            self._show()

    @traitlets.observe("layer", "split")
    def _on_source(self, change: Any) -> None:
        if not self._ready:
            return
        with self._lock, self.hold_sync():
            self._read_steps()
            self._shown_key = None
            if self.gallery is not None:
                self.gallery.split = self.split
            self._show()

    @traitlets.observe("picked")
    def _on_picked(self, change: Any) -> None:
        payload = change["new"] or {}
        if "indices" not in payload:
            return
        idx = np.asarray(array_from_payload(payload["indices"]), dtype=np.int64)
        idx = idx[(idx >= 0) & (idx < len(self._ids))]
        self.selected_ids = [int(i) for i in np.sort(self._ids[idx])]

    @traitlets.observe("selected_ids")
    def _on_selected(self, change: Any) -> None:
        self.selection = {"indices": array_trait_payload(self._indices(self.selected_ids))}
        if self.gallery is None:
            if not self.selected_ids:
                return
            # made on the first selection: reading the predictions costs ~0.4 s at 100k
            self.gallery = SampleGallery(self._run, ids=[], split=self.split, live=False)
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

    def close(self) -> None:
        """Stop the background projection and following the run; close the view."""
        if hasattr(self, "_job_lock"):  # not when __init__ refused its arguments
            self._cancel_job()
        if getattr(self, "gallery", None) is not None:
            self.gallery.close()
        super().close()


EmbeddingProjector._css = (
    EmbeddingProjector._css
    + TRAINING_CSS
    + """
.nbviz-projector-stage { position: relative; width: 100%; height: 460px;
  border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 4px; overflow: hidden;
  background: var(--jp-layout-color1, #fff); }
.nbviz-projector-stage canvas { display: block; }
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
