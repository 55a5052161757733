"""SampleGallery: the samples behind a list of ids, with what the model said about each.

Each card shows the sample as it was logged with ``run.log_samples`` (a PNG
thumbnail for an image, the text for a text sample, the first values for an
array row) beside its true label, the prediction, the confidence and the loss
at the evaluation in view: the latest one at or before the linked ``step``.
Only the page in view travels to the browser, so a gallery of thousands of ids
stays light. Without logged samples the cards show ids and labels, and
``note`` says how to log the samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import traitlets

from nbviz.analysis.metrics import evaluation_at
from nbviz.store import from_blob
from nbviz.widgets.base import array_trait_payload, esm
from nbviz.widgets.live import TRAINING_CSS, LiveView

__all__ = ["SampleGallery"]

SORTS = ("given", "loss", "confidence")
MAX_PAGE_SIZE = 200
ARRAY_VALUES = 16
"""Values of an array sample shown on its card (the rest are counted)."""


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
        Which split's samples and predictions.
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

    step = traitlets.Int(
        0, help="Linked step; the evaluation shown is the latest at or before it."
    ).tag(sync=True)
    ids = traitlets.List(traitlets.Int(), help="Sample ids in the gallery, in order.").tag(
        sync=True
    )
    split = traitlets.Unicode("val").tag(sync=True)
    sort_by = traitlets.Enum(SORTS, default_value="given").tag(sync=True)
    descending = traitlets.Bool(True, help="Sort highest first.").tag(sync=True)
    page = traitlets.Int(0, help="Page in view (0-based).").tag(sync=True)
    page_size = traitlets.Int(24).tag(sync=True)
    n_pages = traitlets.Int(0).tag(sync=True)
    eval_step = traitlets.Int(-1, help="Evaluation the predictions come from (-1: none).").tag(
        sync=True
    )
    items = traitlets.List(help="The cards of the page in view.").tag(sync=True)
    note = traitlets.Unicode("", help="Why some cards lack their sample, and how to log it.").tag(
        sync=True
    )
    prompt = traitlets.Unicode("No samples to show.", help="Shown when ``ids`` is empty.").tag(
        sync=True
    )

    def __init__(
        self,
        run: Any,
        ids: Sequence[int] | None = None,
        split: str = "val",
        *,
        step: int | None = None,
        sort_by: str = "given",
        descending: bool = True,
        page_size: int = 24,
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        if sort_by not in SORTS:
            raise ValueError(
                f"SampleGallery: sort_by must be one of {', '.join(map(repr, SORTS))}, "
                f"got {sort_by!r}"
            )
        if not isinstance(split, str) or not split:
            raise ValueError(f"SampleGallery: split must be a non-empty string, got {split!r}")
        super().__init__(**kwargs)
        self._run = run
        self._ready = False
        self._frames: dict[int, pd.DataFrame] = {}
        self._init_live([run], live)
        with self._lock, self.hold_sync():
            self.split = split
            self.page_size = page_size
            self.sort_by = sort_by
            self.descending = bool(descending)
            self._read_run()
            if ids is None:
                stored = self._stored
                self.ids = [int(i) for i in (stored if len(stored) else self._evaluated_ids())]
            else:
                self.ids = _ids_list(ids, "SampleGallery")
            self.step = (
                int(self._steps[-1]) if step is None and len(self._steps) else int(step or 0)
            )
            self._ready = True
            self._fill()

    # -- reading -------------------------------------------------------------------------

    def _read_run(self) -> None:
        self._steps = np.asarray(self._run.prediction_steps(self.split), dtype=np.int64)
        self._stored = np.asarray(self._run.sample_ids(self.split), dtype=np.int64)
        names = self._run.class_names
        self._names = [str(n) for n in names] if names is not None else None
        self._frames = {s: f for s, f in self._frames.items() if s in set(self._steps.tolist())}

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

    def _name(self, cls: Any) -> str:
        if cls is None or pd.isna(cls):
            return ""
        c = int(cls)
        if self._names is not None and 0 <= c < len(self._names):
            return self._names[c]
        return str(c)

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

    @traitlets.observe("step", "ids", "sort_by", "descending", "page_size", "split")
    def _on_change(self, change: Any) -> None:
        if not self._ready:
            return
        with self._lock, self.hold_sync():
            if change["name"] == "split":
                self._frames.clear()
                self._read_run()
            if change["name"] in ("ids", "sort_by", "descending", "page_size", "split"):
                self.page = 0
            self._fill()

    @traitlets.observe("page")
    def _on_page(self, change: Any) -> None:
        if self._ready:
            with self._lock:
                self._fill()

    def _rebuild(self) -> None:
        old_last = int(self._steps[-1]) if len(self._steps) else None
        self._read_run()
        if len(self._steps) and (old_last is None or self.step >= old_last):
            self.step = int(self._steps[-1])  # was showing the newest: keep following it
        self._fill()

    # -- the page ------------------------------------------------------------------------

    def ordered_ids(self) -> list[int]:
        """Every id of the gallery in the order shown (after ``sort_by``)."""
        ids = np.asarray(self.ids, dtype=np.int64)
        at = evaluation_at(self._steps, self.step) if len(self._steps) else None
        if self.sort_by == "given" or at is None or not len(ids):
            return ids.tolist()
        frame = self._frame(at)
        values = frame[self.sort_by].reindex(ids).to_numpy(dtype=np.float64)
        key = -values if self.descending else values
        key = np.where(np.isnan(key), np.inf, key)  # not evaluated: last
        return ids[np.lexsort((np.arange(len(ids)), key))].tolist()

    def _fill(self) -> None:
        at = evaluation_at(self._steps, self.step) if len(self._steps) else None
        self.eval_step = -1 if at is None else at
        ordered = self.ordered_ids()
        self.n_pages = -(-len(ordered) // self.page_size)
        if self.page >= max(self.n_pages, 1):
            self.page = max(self.n_pages - 1, 0)
            return  # the page observer fills
        shown = ordered[self.page * self.page_size : (self.page + 1) * self.page_size]
        frame = self._frame(at) if at is not None else None
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
                item.update(self._payload(row))
            if frame is not None and i in frame.index:
                p = frame.loc[i]
                label = p["label"]
                item.update(
                    evaluated=True,
                    pred=int(p["pred"]),
                    pred_name=self._name(p["pred"]),
                    loss=float(p["loss"]),
                    confidence=float(p["confidence"]),
                )
            if label is not None and not pd.isna(label):
                item.update(label=int(label), label_name=self._name(label))
            items.append(item)
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

    @staticmethod
    def _payload(row: pd.Series) -> dict[str, Any]:
        kind = str(row["kind"])
        if kind == "image":
            return {"kind": "image", "png": bytes(row["payload"])}
        if kind == "text":
            return {"kind": "text", "text": str(row["text"] or "")}
        values = np.asarray(from_blob(row["payload"], row["dtype"], row["shape"])).ravel()
        shown = values[:ARRAY_VALUES].astype(np.float64)
        return {
            "kind": "array",
            "values": array_trait_payload(shown),
            "size": int(values.size),
        }


SampleGallery._css = (
    SampleGallery._css
    + TRAINING_CSS
    + """
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
.nbviz-gallery-values { font-family: var(--jp-code-font-family, monospace); font-size: 0.85em;
  overflow-wrap: anywhere; }
.nbviz-gallery-line { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.nbviz-gallery-pred-wrong { color: #c62828; font-weight: 600; }
.nbviz-gallery-num { font-variant-numeric: tabular-nums; color: var(--jp-ui-font-color2, #616161); }
.nbviz-gallery-note { margin: 0.3em 0; }
.nbviz-toolbar select { font: inherit; }
"""
)
