"""SampleGallery: the samples behind a list of ids, with what the model said about each.

Each card shows the sample as it was logged with ``run.log_samples`` (a PNG
thumbnail for an image, the text for a text sample, the first values for an
array row) beside its true label, the prediction, the confidence and the loss
at the evaluation in view: the latest one at or before the linked ``step``.
Only the page in view travels to the browser, so a gallery of thousands of ids
stays light. Without logged samples the cards show ids and labels, and
``note`` says how to log the samples.

For a language model (``run.evaluate`` on ``(N, T, vocabulary)`` outputs) a card
shows the sample's tokens coloured by their loss, on one scale for the evaluation
(``token_scale``, with its legend), and a token's hover shows its loss and the
model's top predictions there; the detail shows every token, and a click pins one
(:mod:`nbviz.widgets.token_losses`).

For a model that is not a classifier (``run.evaluate(..., loss_fn=...)``) a card
shows the loss and, beside the sample, what the model gave for it: a
reconstruction beside its input, a predicted mask beside the true one, a
regression's predicted value(s) beside the target (:mod:`nbviz.widgets.outputs`).

Clicking a card sets ``detail_id`` and fills ``detail``: the sample at full
size, its label and prediction, the top-k class probabilities of the
evaluation in view (from the probabilities ``run.log_predictions`` keeps for
logits), its per-unit summary where ``run.evaluate(..., units_layer=...)``
recorded one, and its activations through the layers where ``run.capture``
(or ``run.evaluate(..., capture_ids=...)``) recorded them: per layer the
statistics, each unit's mean and, for a convolution, its feature maps
(:mod:`nbviz.widgets.sample_detail`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import traitlets

from nbviz.analysis.metrics import evaluation_at
from nbviz.widgets.checks import check_choice, check_run, id_trait
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import (
    LiveView,
    followed_step,
    linked_step,
    opening_step,
    reacts_to,
    view_css,
)
from nbviz.widgets.outputs import SampleOutputs
from nbviz.widgets.sample_detail import ClassProbabilities, activations_of, units_of
from nbviz.widgets.samples import label_fields, prediction_fields, sample_payload
from nbviz.widgets.splits import check_switch, followed_split, opening_split, split_choices
from nbviz.widgets.token_losses import DETAIL_TOKENS, TOKEN_CSS, SampleTokens

__all__ = ["SampleGallery"]

SORTS = ("given", "loss", "confidence")
DETAIL_VALUES = 4096
"""Values of an array sample shown in its detail."""
MAX_PAGE_SIZE = 200


def _ids_list(ids: Any, what: str) -> list[int]:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray, pd.Series)):
        raise TypeError(f"{what}: ids must be a list of int sample ids, got {ids!r:.80}")
    arr = np.asarray(ids)
    if arr.size and arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.trunc(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{what}: ids must be integers, got {list(arr[:5])!r}")
    return [int(i) for i in arr.ravel()]


#: What the toolbar calls an evaluation, after what it recorded (see ``eval_what``).
EVAL_WHAT = ("predictions", "losses", "evaluation")


def _what_was_recorded(frame: pd.DataFrame | None) -> str:
    """``"predictions"`` where the evaluation predicted classes, ``"losses"`` where it
    recorded per-sample losses alone (a model evaluated with ``loss_fn=...``)."""
    if frame is None or not len(frame):
        return "evaluation"
    if frame["pred"].notna().any():
        return "predictions"
    if frame["loss"].notna().any():
        return "losses"
    return "evaluation"


class SampleGallery(LiveView):
    """Thumbnails (or text, or rows) of samples with their label, prediction, confidence, loss.

    Parameters
    ----------
    run
        A run with samples logged by ``run.log_samples`` (or ``run.evaluate``) and/or
        predictions.
    ids
        The sample ids to show, in this order; default: every logged sample of the split
        (or every id evaluated, when no samples are logged).
    split
        Which split's samples and predictions (default: ``"val"``, else ``"test"``, else
        the first split with samples or predictions); also switched in the view, where a
        gallery of every sample then shows every sample of the new split.
    step
        Linked step: predictions come from the latest evaluation at or before it
        (default: the latest evaluation).
    sort_by
        ``"given"`` (the order of ``ids``), ``"loss"`` or ``"confidence"``; also chosen in
        the view. ``descending`` orders highest first.
    page_size
        Cards per page (1..200).
    live
        Follow the run while it grows.
    """

    _esm = esm("gallery")

    step = linked_step("Linked step; the evaluation shown is the latest at or before it.")
    ids = traitlets.List(traitlets.Int(), help="Sample ids in the gallery, in order.").tag(
        sync=True
    )
    split = traitlets.Unicode("val").tag(sync=True)
    splits = split_choices(
        "Splits with samples or predictions (the menu's choices; empty in a view that "
        "chooses the split for its gallery)."
    )
    sort_by = traitlets.Enum(SORTS, default_value="given").tag(sync=True)
    sort_choices = traitlets.List(
        traitlets.Unicode(), list(SORTS), help="The orders that mean something for this split."
    ).tag(sync=True)
    descending = traitlets.Bool(True, help="Sort highest first.").tag(sync=True)
    page = traitlets.Int(0, help="Page in view (0-based).").tag(sync=True)
    page_size = traitlets.Int(24).tag(sync=True)
    n_pages = traitlets.Int(0).tag(sync=True)
    eval_step = traitlets.Int(-1, help="Evaluation the predictions come from (-1: none).").tag(
        sync=True
    )
    eval_what = traitlets.Enum(
        EVAL_WHAT,
        default_value="evaluation",
        help="What that evaluation recorded: classes (predictions), per-sample losses alone "
        "(losses), or neither known (evaluation).",
    ).tag(sync=True)
    token_scale = traitlets.Dict(
        help="A language model's evaluation in view: the token colour scale {lo, hi, nonfinite}."
    ).tag(sync=True)
    items = traitlets.List(help="The cards of the page in view.").tag(sync=True)
    note = traitlets.Unicode("", help="Why some cards lack their sample, and how to log it.").tag(
        sync=True
    )
    prompt = traitlets.Unicode("No samples to show.", help="Shown when ``ids`` is empty.").tag(
        sync=True
    )
    detail_id = id_trait(-1, "The sample whose detail is open (-1: none).")
    detail = traitlets.Dict(
        help="The open sample: payload, label, prediction, top-k, units and activations."
    ).tag(sync=True)

    def __init__(
        self,
        run: Any,
        ids: Sequence[int] | None = None,
        split: str | None = None,
        *,
        step: int | None = None,
        sort_by: str = "given",
        descending: bool = True,
        page_size: int = 24,
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        check_run("SampleGallery", run)
        check_choice("SampleGallery", "sort_by", sort_by, SORTS)
        splits = sorted(set(run.splits()) | set(run.splits("samples")))
        self._split_chosen = split is None
        # ids given: the caller says what to show (a view's selection may be in any split)
        known = splits if ids is None else []
        split = opening_split("SampleGallery", split, known, run.name, "samples or predictions")
        if splits and split not in splits:
            splits = sorted({*splits, split})
        super().__init__(**kwargs)
        self._run = run
        self._frames: dict[int, pd.DataFrame] = {}
        self._probs = ClassProbabilities(run)
        self._outputs = SampleOutputs(run)
        self._tokens = SampleTokens(run)
        self._every_sample = ids is None
        with self._building([run], live):
            self.splits = splits
            self.split = split
            self.page_size = page_size
            self.sort_by = sort_by
            self.descending = bool(descending)
            self._read_run()
            if ids is None:
                self.ids = self._every_id()
            else:
                self.ids = _ids_list(ids, "SampleGallery")
            self.step = opening_step(step, self._steps)
            self._ready = True
            self._fill()

    # -- reading -------------------------------------------------------------------------

    def _read_run(self) -> None:
        self._steps = np.asarray(self._run.prediction_steps(self.split), dtype=np.int64)
        self._stored = np.asarray(self._run.sample_ids(self.split), dtype=np.int64)
        names = self._run.class_names
        self._names = [str(n) for n in names] if names is not None else None
        self._frames = {s: f for s, f in self._frames.items() if s in set(self._steps.tolist())}
        self._probs.keep(self._steps.tolist())
        self._outputs.clear()
        self._tokens.clear()
        classes = self._run.predicts_classes(self.split)
        # without classes there is no confidence to sort by
        self.sort_choices = [s for s in SORTS if s != "confidence" or classes is not False]

    def _every_id(self) -> list[int]:
        """Every sample of the split: those logged, else those evaluated."""
        stored = self._stored
        return [int(i) for i in (stored if len(stored) else self._evaluated_ids())]

    def _evaluated_ids(self) -> np.ndarray:
        if not len(self._steps):
            return np.zeros(0, dtype=np.int64)
        return self._frame(int(self._steps[-1]))["id"].to_numpy(dtype=np.int64)

    def _frame(self, at: int) -> pd.DataFrame:
        frame = self._frames.get(at)
        if frame is None:
            frame = self._run.predictions(at, split=self.split).set_index("id", drop=False)
            if len(self._frames) > 8:
                self._frames.clear()
            self._frames[at] = frame
        return frame

    # -- validation ----------------------------------------------------------------------

    @traitlets.validate("page_size")
    def _check_page_size(self, proposal: Any) -> int:
        size = int(proposal["value"])
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise traitlets.TraitError(
                f"SampleGallery.page_size must be in 1..{MAX_PAGE_SIZE}, got {size}"
            )
        return size

    @traitlets.validate("page")
    def _check_page(self, proposal: Any) -> int:
        return max(0, int(proposal["value"]))

    @traitlets.validate("split")
    def _check_split(self, proposal: Any) -> str:
        return check_switch("SampleGallery", proposal["value"], self.splits)

    @reacts_to("step", "ids", "sort_by", "descending", "page_size", "split")
    def _on_change(self, change: Any) -> None:
        if change["name"] == "split":
            self._frames.clear()
            self._read_run()
            if self._every_sample:
                self._ready = False  # one fill below, not one for the ids too
                try:
                    self.ids = self._every_id()
                finally:
                    self._ready = True
        if change["name"] in ("ids", "sort_by", "descending", "page_size", "split"):
            self.page = 0
        self._fill()
        if change["name"] in ("step", "split"):
            self._fill_detail()

    @reacts_to("page", hold=False)
    def _on_page(self, change: Any) -> None:
        self._fill()

    @reacts_to("detail_id", hold=False)
    def _on_detail(self, change: Any) -> None:
        self._fill_detail()

    def capture(self, model: Any, sample: Any, **options: Any) -> dict[str, Any]:
        """Record the open sample's activations (``run.capture``) and show them.

        ``sample`` is the input of the sample in ``detail_id`` (without the batch
        dimension); ``options`` go to ``run.capture`` (``step``, ``layers``).
        """
        if self.detail_id < 0:
            raise ValueError("SampleGallery.capture: no sample is open; click one (or show(id))")
        if not hasattr(self._run, "capture"):
            raise TypeError(
                "SampleGallery.capture: this gallery reads a run opened read-only; record with "
                f"nbviz.Run({str(self._run.path)!r}).capture(model, sample, id={self.detail_id})"
            )
        self._run.capture(model, sample, int(self.detail_id), split=self.split, **options)
        with self._lock:
            self._fill_detail()
        return dict(self.detail)

    def show(self, id: int) -> dict[str, Any]:
        """Open the detail of sample ``id`` (as a click on its card does) and return it."""
        self.detail_id = int(id)
        return dict(self.detail)

    def _rebuild(self) -> None:
        before = self._steps
        if self._every_sample:
            self.splits = sorted(set(self._run.splits()) | set(self._run.splits("samples")))
            split = followed_split(self.split, self.splits, self._split_chosen)
            if split != self.split:
                self.split = split  # its samples, read by _on_change
        self._read_run()
        self.step = followed_step(self.step, before, self._steps)
        self._fill()
        self._fill_detail()

    # -- the page ------------------------------------------------------------------------

    def ordered_ids(self) -> list[int]:
        """Every id of the gallery in the order shown (after ``sort_by``)."""
        ids = np.asarray(self.ids, dtype=np.int64)
        at = evaluation_at(self._steps, self.step)
        if self.sort_by == "given" or at is None or not len(ids):
            return ids.tolist()
        frame = self._frame(at)
        if self.sort_by not in frame.columns:  # nothing to sort by: the given order
            return ids.tolist()
        values = frame[self.sort_by].reindex(ids).to_numpy(dtype=np.float64)
        key = -values if self.descending else values
        key = np.where(np.isnan(key), np.inf, key)  # not evaluated: last
        return ids[np.lexsort((np.arange(len(ids)), key))].tolist()

    def _fill(self) -> None:
        at = evaluation_at(self._steps, self.step)
        self.eval_step = -1 if at is None else at
        ordered = self.ordered_ids()
        self.n_pages = -(-len(ordered) // self.page_size)
        if self.page >= max(self.n_pages, 1):
            self.page = max(self.n_pages - 1, 0)
            return  # the page observer fills
        shown = ordered[self.page * self.page_size : (self.page + 1) * self.page_size]
        frame = self._frame(at) if at is not None else None
        self.eval_what = _what_was_recorded(frame)
        stored = set(self._stored.tolist())
        have = [i for i in shown if i in stored]
        samples = (
            self._run.samples(have, split=self.split).set_index("id", drop=False) if have else None
        )
        items = []
        for i in shown:
            item: dict[str, Any] = {"id": i, "kind": "", "evaluated": False}
            label = None
            if samples is not None and i in samples.index:
                row = samples.loc[i]
                label = row["label"]
                item.update(sample_payload(row))
            if frame is not None and i in frame.index:
                p = frame.loc[i]
                label = p["label"] if not pd.isna(p["label"]) else label
                tokens = self._tokens.payload(self.split, at, i)
                counted = None if tokens is None else tokens["counted"]
                item.update(prediction_fields(p, self._names, counted))
                panels = [] if tokens is not None else self._outputs.panels(self.split, at, i)
                if tokens is not None:
                    item["tokens"] = tokens
                if panels:
                    item["outputs"] = panels
            item.update(label_fields(label, self._names))
            items.append(item)
        self.token_scale = (self._tokens.scale(self.split, at) or {}) if at is not None else {}
        self.items = items
        missing = sum(1 for i in ordered if i not in stored)
        if not ordered:
            self.note = ""
        elif not len(self._stored):
            self.note = (
                f"No {self.split} samples are logged in this run, so only ids and labels are "
                f"shown. Log them to see each sample: run.log_samples(data, labels, "
                f"split={self.split!r}) with the same ids (default 0..N-1 in the order given), "
                "or run.evaluate(step, model, loader) once."
            )
        elif missing:
            self.note = (
                f"{missing:,} of {len(ordered):,} ids have no logged sample; log them with "
                f"run.log_samples(data, labels, ids=..., split={self.split!r})."
            )
        else:
            self.note = ""

    # -- the detail of one sample -------------------------------------------------------

    def _fill_detail(self) -> None:
        id = int(self.detail_id)
        if id < 0:
            self.detail = {}
            return
        at = evaluation_at(self._steps, self.step)
        out: dict[str, Any] = {"id": id, "kind": "", "evaluated": False, "step": -1}
        label = None
        if id in set(self._stored.tolist()):
            row = self._run.samples([id], split=self.split).iloc[0]
            label = row["label"]
            out.update(sample_payload(row, DETAIL_VALUES))
            if row["kind"] == "image" and row["shape"]:
                out["shape"] = list(json.loads(row["shape"]))
        frame = self._frame(at) if at is not None else None
        if frame is not None and id in frame.index:
            p = frame.loc[id]
            label = p["label"] if not pd.isna(p["label"]) else label
            counted = self._tokens.counted(self.split, at, id)
            out.update(step=at, **prediction_fields(p, self._names, counted))
            if "pred" in out:
                out["top_k"], out["top_k_note"] = self._probs.top_k(at, id, self.split, self._names)
            else:  # a model that is not a classifier: what it gave instead
                tokens = self._tokens.payload(self.split, at, id, DETAIL_TOKENS)
                if tokens is not None:  # a language model: its tokens, each with its loss
                    out["tokens"] = tokens
                else:
                    out["outputs"] = self._outputs.panels(self.split, at, id, DETAIL_VALUES)
                out["top_k"], out["top_k_note"] = [], ""
        elif at is not None:
            out["top_k"], out["top_k_note"] = [], f"Sample {id} was not evaluated at step {at}."
        else:
            out["top_k"], out["top_k_note"] = [], "No evaluation at or before this step."
        out.update(label_fields(label, self._names))
        if out["kind"] == "" and not out["evaluated"] and label is None:
            out["missing"] = f"No {self.split} sample or prediction has id {id}."
        units = units_of(self._run, self.split, at, id)
        if units is not None:
            out["units"] = units
        acts, note = activations_of(self._run, self.split, self.step, id)
        out["activations"] = acts
        out["activations_note"] = note
        self.detail = out


SampleGallery._css = view_css(
    """
.nbviz-gallery-grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(128px, 1fr));
  gap: 8px; }
.nbviz-gallery-card { border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 4px;
  padding: 4px; display: flex; flex-direction: column; gap: 2px; font-size: 0.9em;
  background: var(--jp-layout-color1, #fff); min-width: 0; }
.nbviz-gallery-card.nbviz-wrong { border-color: #e57373; }
.nbviz-gallery-thumb { width: 96px; height: 96px; object-fit: contain; image-rendering: pixelated;
  align-self: center; background: #000; }
.nbviz-gallery-text { max-height: 7.5em; overflow: auto; white-space: pre-wrap; margin: 0;
  font-family: var(--jp-code-font-family, monospace); font-size: 0.9em; }
/* whole words: JupyterLab's ".jp-OutputArea-output pre" breaks them anywhere */
.nbviz pre.nbviz-gallery-text { word-break: normal; overflow-wrap: break-word; }
.nbviz-gallery-values { font-family: var(--jp-code-font-family, monospace); font-size: 0.85em;
  overflow-wrap: anywhere; }
.nbviz-sample-damaged { color: #b71c1c; font-size: 0.85em; overflow-wrap: anywhere; }
.nbviz-gallery-line { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.nbviz-gallery-pred-wrong { color: #c62828; font-weight: 600; }
.nbviz-gallery-num { font-variant-numeric: tabular-nums; color: var(--jp-ui-font-color2, #616161); }
.nbviz-gallery-note { margin: 0.3em 0; }
.nbviz-toolbar select { font: inherit; }
.nbviz-gallery-card { cursor: pointer; }
.nbviz-gallery-card.nbviz-active { outline: 2px solid var(--jp-brand-color1, #1976d2); }
.nbviz-gallery-detail { border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 4px;
  padding: 6px; margin: 6px 0; display: flex; flex-direction: column; gap: 6px; }
.nbviz-gallery-detail-bar { display: flex; justify-content: space-between; align-items: center; }
.nbviz-gallery-detail-head { display: flex; gap: 12px; align-items: flex-start; flex-wrap: wrap; }
.nbviz-gallery-big { width: 192px; height: 192px; object-fit: contain; image-rendering: pixelated;
  background: #000; }
.nbviz-gallery-topk { border-collapse: collapse; font-variant-numeric: tabular-nums; }
.nbviz-gallery-topk td { padding: 1px 6px; white-space: nowrap; }
.nbviz-gallery-bar { height: 10px; background: var(--jp-brand-color1, #1976d2); }
.nbviz-gallery-layer { border-top: 1px solid var(--jp-border-color3, #eeeeee); padding-top: 4px; }
.nbviz-gallery-maps { display: flex; flex-wrap: wrap; gap: 3px; }
.nbviz-gallery-map { image-rendering: pixelated; }
.nbviz-gallery-layers { max-height: 520px; overflow: auto; }
.nbviz-gallery-pair { display: flex; gap: 4px; justify-content: center; }
.nbviz-gallery-panel { display: flex; flex-direction: column; align-items: center;
  font-size: 0.85em; min-width: 0; }
.nbviz-gallery-card .nbviz-gallery-panel { flex: 1 1 0; max-width: 64px; }
.nbviz-gallery-card .nbviz-gallery-pair .nbviz-gallery-thumb { width: 100%; height: auto;
  aspect-ratio: 1; }
.nbviz-gallery-detail .nbviz-gallery-pair .nbviz-gallery-big { width: 160px; height: 160px; }
"""
    + TOKEN_CSS
)
