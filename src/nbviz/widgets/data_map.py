"""DataMap: every training sample placed by how the model learned it (Dataset Cartography).

Each point is a sample of a split (``"train"`` by default) at (variability,
confidence) of the probability the model gave its label over the logged
evaluations (:func:`nbviz.analysis.dynamics.sample_dynamics`): easy samples sit
top-left, ambiguous ones to the right, and samples the model confidently learns
as another class bottom-left, where mislabelled samples gather. Points are
drawn with WebGL and travel as binary arrays (float32 positions, one byte each
for correctness and suspicion); clicking a point, or a row of the list of the
most likely mislabelled samples, sets ``selected_ids`` and shows the sample in
the embedded :class:`SampleGallery`.

What feeds it: predictions of the split at several steps, e.g.
``run.evaluate(step, model, train_loader, split="train")`` once per epoch (an
unshuffled loader, or one that yields ids), or ``run.log_predictions(step,
logits, labels, ids=batch_ids, split="train")``. Thumbnails in the gallery
need the samples logged once (``run.evaluate`` does it on its first call).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import traitlets

from nbviz.analysis.checks.mislabeled import suspects as suspect_mask
from nbviz.analysis.dynamics import sample_dynamics
from nbviz.widgets.base import child_view
from nbviz.widgets.checks import check_choice, check_split
from nbviz.widgets.frontend import esm
from nbviz.widgets.gallery import SampleGallery
from nbviz.widgets.live import LiveView, reacts_to, view_css
from nbviz.widgets.point_selection import PointSelection
from nbviz.widgets.view_data import answer_table_requests, frame, scatter_figure
from nbviz.widgets.wire import array_from_payload, array_trait_payload

__all__ = ["COLOR_BY", "DataMap"]

COLOR_BY = ("correctness", "suspect")
#: Rows in the list of the most likely mislabelled samples.
LIST_SIZE = 20
#: Variability's axis ends here (the standard deviation of values in [0, 1]).
VARIABILITY_MAX = 0.5
#: The axes' ends sit this far inside the plot's sides (js/lib/data_map.js: INSET).
INSET = 0.96
#: What the embedded gallery says before a sample is selected.
GALLERY_PROMPT = "Click a point (or a row of the list) to see its sample here."


class DataMap(PointSelection, LiveView):
    """The training dynamics of a split as a map; a click opens a sample.

    Parameters
    ----------
    run
        A run with predictions of ``split`` at several steps.
    split
        Whose samples (default ``"train"``).
    color_by
        ``"correctness"`` (how often the model was right) or ``"suspect"`` (the
        samples the ``mislabeled_samples`` check flags).
    live
        Follow the run while it grows.

    Traits: ``selected_ids`` (the clicked sample, settable), ``color_by``,
    ``gallery`` (the embedded SampleGallery, made on the first selection).

    ``data()`` is the map's samples as a DataFrame (the view's menu downloads
    it as CSV), ``figure()`` a bqplot scatter of variability against confidence.
    """

    _esm = esm("data_map")

    split = traitlets.Unicode("train").tag(sync=True)
    color_by = traitlets.Enum(COLOR_BY, default_value="correctness").tag(sync=True)
    points = traitlets.Dict(help="Positions and codes of the samples, as binary arrays.").tag(
        sync=True
    )
    suspects = traitlets.List(
        traitlets.Dict(), help="The most likely mislabelled: id, index, label, predicted, score."
    ).tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    gallery = child_view(SampleGallery)

    def __init__(
        self,
        run: Any,
        *,
        split: str = "train",
        color_by: str = "correctness",
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        check_split("DataMap", split)
        check_choice("DataMap", "color_by", color_by, COLOR_BY)
        super().__init__(**kwargs)
        self._run = run
        self._ids = np.zeros(0, dtype=np.int64)
        self.dynamics = pd.DataFrame()
        answer_table_requests(self)
        with self._building([run], live):
            self.split = split
            self.color_by = color_by
            self._rebuild()

    def _rebuild(self) -> None:
        run, split = self._run, self.split
        steps = run.prediction_steps(split)
        if len(steps) and run.predicts_classes(split) is False:
            self.empty = (
                f"The data map places each sample by how confidently a classifier gets its "
                f"class right; the {split} predictions in {run.name} have no classes (a model "
                "evaluated by its loss, loss_fn=...): SampleGallery(run, split=..., "
                "sort_by='loss') shows the samples it errs on most."
            )
            self.points, self.suspects = {}, []
            return
        if len(steps) < 2:
            have = len(steps)
            self.empty = (
                f"The data map needs the {split} split evaluated at two steps or more "
                f"({have} so far in {run.name}): call run.evaluate(step, model, loader, "
                f"split={split!r}) once per epoch (an unshuffled loader, or one yielding ids), "
                f"or run.log_predictions(step, logits, labels, ids=batch_ids, split={split!r})."
            )
            self.points, self.suspects = {}, []
            return
        self.empty = ""
        dyn = sample_dynamics(run, split)
        self.dynamics = dyn
        self._ids = dyn["id"].to_numpy(dtype=np.int64)
        flagged = suspect_mask(dyn)
        var = np.clip(dyn["variability"].to_numpy(), 0, VARIABILITY_MAX)
        x = INSET * (2 * var / VARIABILITY_MAX - 1)
        y = INSET * (2 * np.clip(np.nan_to_num(dyn["confidence"].to_numpy()), 0, 1) - 1)
        xy = np.stack([x, y], axis=1).astype(np.float32)
        correct = np.round(254 * np.clip(dyn["correctness"].to_numpy(), 0, 1)).astype(np.uint8)
        order = np.argsort(-dyn["mislabel_score"].to_numpy(), kind="stable")
        top = [int(i) for i in order[:LIST_SIZE] if flagged[i]]
        names = run.class_names

        def name(c: int) -> str:
            return str(names[c]) if names and 0 <= c < len(names) else str(c)

        self.suspects = [
            {
                "id": int(dyn["id"].iloc[i]),
                "index": i,
                "label": name(int(dyn["label"].iloc[i])),
                "predicted": name(int(dyn["predicted"].iloc[i])),
                "score": float(dyn["mislabel_score"].iloc[i]),
            }
            for i in top
        ]
        self.points = {
            "n": int(len(dyn)),
            "xy": array_trait_payload(xy),
            "correctness": array_trait_payload(correct),
            "suspect": array_trait_payload(flagged.astype(np.uint8)),
            "first": top[0] if top else -1,
        }
        self.note = (
            f"{len(dyn):,} {split} samples over {len(steps)} evaluations (steps "
            f"{int(steps[0])}..{int(steps[-1])}); {int(flagged.sum()):,} likely mislabelled"
        )
        self._send_selection()

    def _indices(self, ids: list[int]) -> np.ndarray:
        if not len(ids) or not len(self._ids):
            return np.zeros(0, dtype=np.uint32)
        where = pd.Index(self._ids).get_indexer(np.asarray(ids, dtype=np.int64))
        return where[where >= 0].astype(np.uint32)

    def _ensure_gallery(self) -> SampleGallery:
        """The embedded gallery, made now if no sample was selected yet (a saved page
        makes it before recording the clicks: it holds only the views made by then)."""
        if self.gallery is None:
            self.gallery = SampleGallery(
                self._run, ids=[], split=self.split, live=False, prompt=GALLERY_PROMPT
            )
        return self.gallery

    def _show_selected(self) -> None:
        if self.gallery is None:
            if not self.selected_ids:
                return
            self._ensure_gallery()
        steps = self._run.prediction_steps(self.split)
        if len(steps):
            self.gallery.step = int(steps[-1])
        self.gallery.ids = list(self.selected_ids)

    @reacts_to("split")
    def _on_split(self, change: Any) -> None:
        self.selected_ids = []
        if self.gallery is not None:
            self.gallery.split = self.split
        self._rebuild()

    def data(self) -> pd.DataFrame:
        """One row per sample on the map: the columns of ``run.sample_dynamics``
        (``id, label, confidence, variability, correctness, aum, mislabel_score``, ...)
        and ``suspect`` (flagged as likely mislabelled). Empty before two evaluations."""
        dyn = getattr(self, "dynamics", None)
        if dyn is None or not len(dyn) or not self.points:
            return frame([], ["id", "label", "confidence", "variability", "suspect"])
        out = dyn.reset_index(drop=True).copy()
        out["suspect"] = np.asarray(array_from_payload(self.points["suspect"])).astype(bool)
        return out

    def figure(self) -> Any:
        """The map as a bqplot ``Scatter``: variability (x) against confidence (y),
        coloured by correctness."""
        table = self.data()
        if not len(table):
            why = self.empty or (
                f"no {self.split} sample has both a confidence and a variability to place"
            )
            raise ValueError(f"DataMap.figure: nothing on the map: {why}")
        return scatter_figure(
            table["variability"],
            table["confidence"],
            title=f"data map of {self.split}",
            x_label="variability",
            y_label="confidence",
            color=table["correctness"],
            color_label="correctness",
        )

    def close(self) -> None:
        if getattr(self, "gallery", None) is not None:
            self.gallery.close()
        super().close()


DataMap._css = view_css(
    """
.nbviz-dm-row { display: flex; gap: 12px; align-items: flex-start; flex-wrap: wrap; }
.nbviz-dm-plot { display: grid; grid-template-columns: 1.4em 2.4em 360px;
  grid-template-rows: 360px 1.4em 1.4em; }
.nbviz-dm-ylabel { writing-mode: vertical-rl; transform: rotate(180deg); text-align: center;
  font-size: 0.85em; color: var(--jp-ui-font-color2, #616161); }
.nbviz-dm-xlabel { text-align: center; font-size: 0.85em;
  color: var(--jp-ui-font-color2, #616161); }
.nbviz-dm-yaxis, .nbviz-dm-xaxis { position: relative; font-size: 0.8em;
  color: var(--jp-ui-font-color2, #616161); font-variant-numeric: tabular-nums; }
.nbviz-dm-yaxis span { position: absolute; right: 4px; transform: translateY(-50%); }
.nbviz-dm-xaxis span { position: absolute; top: 2px; transform: translateX(-50%); }
.nbviz-dm-stage { position: relative; width: 360px; height: 360px;
  border: 1px solid var(--jp-border-color2, #e0e0e0); }
.nbviz-dm-stage canvas { position: absolute; inset: 0; }
.nbviz-dm-region { position: absolute; font-size: 0.8em; pointer-events: none;
  color: var(--jp-ui-font-color3, #9e9e9e); }
.nbviz-dm-side { min-width: 220px; max-height: 380px; overflow: auto; }
.nbviz-dm-side-title { font-weight: 600; margin-bottom: 4px; }
.nbviz-dm-suspects { margin: 0; padding-left: 2.6em; }
.nbviz-dm-suspect { cursor: pointer; padding: 1px 2px; }
.nbviz-dm-suspect:hover { background: var(--jp-layout-color2, #eeeeee); }
.nbviz-dm-suspect.nbviz-active { outline: 2px solid var(--jp-brand-color1, #1976d2); }
.nbviz-dm-score { color: var(--jp-ui-font-color2, #616161); }
.nbviz-dm-legend { display: flex; gap: 10px; flex-wrap: wrap; font-size: 0.85em; margin: 4px 0; }
.nbviz-dm-swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px;
  border-radius: 50%; }
"""
)
