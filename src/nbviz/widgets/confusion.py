"""ConfusionMatrix: where a classifier errs at one evaluation, opening onto the samples.

Close to 500 lines because the matrix, the list mode, the comparison and the
selection all follow one evaluation and one selected cell; the list mode's rows are
already apart (:mod:`.confusion_lists`).

Rows are the true class, columns the predicted one. The matrix shows counts,
or each row as fractions of the true class (the diagonal is then recall), or
each column as fractions of the predictions (precision). Beside it: accuracy,
macro/weighted F1, a sortable per-class table and the most-confused pairs.
Samples whose logits were non-finite have no predicted class: the view counts
them in words, and the matrix and scores are over the others (said so).

Clicking a cell (or a pair) sets ``selected = [true, predicted]``; Python fills
``selected_ids`` with the ids of that cell's samples, highest loss first, and
shows them in :attr:`ConfusionMatrix.gallery`, a :class:`SampleGallery`
embedded under the matrix. The linked ``step`` picks the latest evaluation at
or before it; a selection survives a change of step and its ids follow.

Large label sets (more than :data:`MAX_MATRIX_CLASSES` classes: a vocabulary, a
label space of thousands) are shown as lists instead of a matrix (``mode ==
"pairs"``): the most confused ``(true, predicted)`` pairs with their counts, and the
classes ranked by their errors (support, errors, error rate, what they are most
mistaken for). Counting is sparse, so the cost follows the samples, not the
square of the largest class index. A click on a pair selects it as a cell does; a
click on a class selects ``[class, -1]``: its samples predicted as any other class.

The view opens on a split that has predictions (``"val"``, else ``"test"``, else
the first) and ``split`` switches it, from Python or the menu in the view; a
selection survives the switch.

Comparing two evaluations: set ``compare_step`` (or pick it in the view) and the
matrix shows the change of each cell since that evaluation, and ``compare``
counts the samples that flipped between the two: right then and wrong now
(``to_wrong``), wrong then and right now (``to_right``). Setting ``selected_flip``
to one of those names (a click on its button) puts its samples, highest loss
now first, in ``selected_ids`` and the gallery, in place of a cell's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import traitlets

from nbviz.analysis import metrics
from nbviz.widgets.base import child_view
from nbviz.widgets.checks import check_choice, check_int, check_run
from nbviz.widgets.confusion_data import confusion_figure, confusion_frame
from nbviz.widgets.confusion_lists import LIST_ROWS, class_error_rows, list_scores, pair_rows
from nbviz.widgets.frontend import esm
from nbviz.widgets.gallery import SampleGallery
from nbviz.widgets.live import (
    LiveView,
    followed_step,
    linked_step,
    opening_step,
    reacts_to,
    view_css,
)
from nbviz.widgets.splits import (
    check_switch,
    choose_split,
    followed_split,
    opening_split,
    split_choices,
)
from nbviz.widgets.wire import array_trait_payload

__all__ = ["ConfusionMatrix"]

NORMALIZE = ("counts", "row", "column")
FLIPS = ("", "to_wrong", "to_right")
MODES = ("matrix", "pairs")
MOST_CONFUSED = 10
MAX_MATRIX_CLASSES = 100
"""Past this many classes the view lists pairs and classes instead of drawing a matrix."""


class ConfusionMatrix(LiveView):
    """A confusion matrix with per-class metrics and the samples of a selected cell.

    Parameters
    ----------
    run
        A run with predictions (``run.evaluate`` or ``run.log_predictions``).
    split
        Which split's evaluations (default: ``"val"``, else ``"test"``, else the first
        split with predictions); also switched in the view.
    step
        Linked step: the latest evaluation at or before it is shown (default: the latest).
    normalize
        ``"counts"``, ``"row"`` (fractions of the true class: recall) or ``"column"``
        (fractions of the predicted class: precision); also chosen in the view.
    live
        Follow the run while it grows.

    ``data()`` is the matrix (or, in list mode, the most-confused pairs) as a
    DataFrame, the table the view's menu downloads as CSV; ``figure()`` the
    matrix as a bqplot ``GridHeatMap``.
    """

    _esm = esm("confusion")

    step = linked_step("Linked step; the evaluation shown is the latest at or before it.")
    split = traitlets.Unicode("val").tag(sync=True)
    splits = split_choices("Splits with predictions (the menu's choices).")
    mode = traitlets.Enum(
        MODES, default_value="matrix", help="'matrix', or 'pairs' for a large label set."
    ).tag(sync=True)
    normalize = traitlets.Enum(NORMALIZE, default_value="counts").tag(sync=True)
    selected = traitlets.List(
        traitlets.Int(),
        help="The selected cell as [true, predicted] ([true, -1]: the class's errors), or empty.",
    ).tag(sync=True)
    selected_ids = traitlets.List(
        traitlets.Int(), help="Ids of the selected cell's samples, highest loss first."
    ).tag(sync=True)
    eval_step = traitlets.Int(-1, help="The evaluation shown (-1: none at or before step).").tag(
        sync=True
    )
    eval_steps = traitlets.List(traitlets.Int(), help="Every evaluation of the split.").tag(
        sync=True
    )
    class_names = traitlets.List(traitlets.Unicode()).tag(sync=True)
    matrix = traitlets.Dict(help="[true, predicted] counts of the evaluation shown.").tag(sync=True)
    class_table = traitlets.List(
        help="Per class: class, name, precision, recall, f1, support."
    ).tag(sync=True)
    scores = traitlets.Dict(
        help="n, accuracy, macro_f1, weighted_f1 (over the n samples with finite logits; "
        "None when n is 0), "
        "nonfinite (samples whose logits were NaN/inf: no class, not in the matrix)."
    ).tag(sync=True)
    confused = traitlets.List(
        help="Most-confused pairs: true, pred, count, rate, true_name, pred_name."
    ).tag(sync=True)
    class_errors = traitlets.List(
        help="List mode: classes by errors: class, name, support, errors, error_rate, top_pred, "
        "top_pred_name, top_count."
    ).tag(sync=True)
    compare_step = traitlets.Int(
        -1, help="Compare with the latest evaluation at or before this step (-1: no comparison)."
    ).tag(sync=True)
    compare = traitlets.Dict(
        help="The comparison: step compared with, per-cell change, to_wrong, to_right, common."
    ).tag(sync=True)
    selected_flip = traitlets.Enum(
        FLIPS, default_value="", help="'to_wrong' or 'to_right': show those flipped samples."
    ).tag(sync=True)
    gallery = child_view(SampleGallery)

    def __init__(
        self,
        run: Any,
        split: str | None = None,
        *,
        step: int | None = None,
        normalize: str = "counts",
        compare_step: int | None = None,
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        check_run("ConfusionMatrix", run)
        check_int("ConfusionMatrix", "compare_step", compare_step)
        check_choice("ConfusionMatrix", "normalize", normalize, NORMALIZE)
        self._split_chosen = split is None
        if split is None:  # a split whose model predicted classes, if there is one
            split = choose_split(run.class_splits()) or choose_split(run.splits()) or "val"
        split = opening_split("ConfusionMatrix", split, run.splits(), run.name, "predictions")
        check_int("ConfusionMatrix", "step", step)
        super().__init__(**kwargs)
        self._run = run
        self._preds: pd.DataFrame | None = None
        self._flips: metrics.Flips | None = None
        self._n_classes = 0
        with self._building([run], live):
            self._indexes[0].positions()  # so that the index notices new evaluations
            self.splits = _menu(run, split)
            self.split = split
            self.normalize = normalize
            self.compare_step = -1 if compare_step is None else int(compare_step)
            self._read_steps()
            self.step = opening_step(step, self._steps)
            # a cell's ids come highest loss first: the menu says so
            self.gallery = SampleGallery(
                run, ids=[], split=split, step=self.step, live=False, page_size=24, sort_by="loss"
            )
            self.gallery.splits = []  # the split is this view's: no menu of its own
            self.gallery.prompt = "Click a cell of the matrix to see its samples here."
            self._ready = True
            self._fill()

    # -- reading -------------------------------------------------------------------------

    def _read_steps(self) -> None:
        self._steps = np.asarray(self._run.prediction_steps(self.split), dtype=np.int64)
        if len(self._steps) and self._run.predicts_classes(self.split) is False:
            self._steps = self._steps[:0]
            self.eval_steps = []
            self.empty = (
                f"The {self.split} predictions in {self._run.name} have no classes (a model "
                "evaluated by its loss, loss_fn=...), and a confusion matrix counts classes: "
                "SampleGallery(run, sort_by='loss') shows the samples it errs on most."
            )
            return
        self.eval_steps = [int(s) for s in self._steps]
        if not len(self._steps):
            self.empty = (
                f"No {self.split} predictions in {self._run.name} yet: record them with "
                f"run.evaluate(step, model, loader, split={self.split!r}) or "
                f"run.log_predictions(step, logits, labels, split={self.split!r}); "
                "this view fills in as they arrive."
            )
        else:
            self.empty = ""

    def predictions(self) -> pd.DataFrame:
        """The predictions frame of the evaluation in view (empty before the first one)."""
        return (
            self._preds
            if self._preds is not None
            else pd.DataFrame(columns=["step", "id", "label", "pred", "loss", "confidence"])
        )

    def data(self) -> pd.DataFrame:
        """The evaluation in view as a tidy DataFrame, one row per (true, predicted) pair.

        Columns ``step, true, predicted, true_name, predicted_name, count, rate``
        (``rate``: the count over the true class's samples). Matrix mode: every
        cell; list mode: the most-confused pairs the view lists.
        """
        return confusion_frame(self)

    def figure(self) -> Any:
        """The matrix as a bqplot ``GridHeatMap`` (rows: true class), normalised as shown;
        a ``ValueError`` in list mode, where there is no matrix."""
        return confusion_figure(self)

    # -- validation and events -----------------------------------------------------------

    @traitlets.validate("selected")
    def _check_selected(self, proposal: Any) -> list[int]:
        value = list(proposal["value"])
        if not value:
            return []
        if len(value) != 2:
            raise traitlets.TraitError(
                f"ConfusionMatrix.selected must be [true, predicted] or [], got {value!r}"
            )
        n = self._n_classes
        true, pred = (int(v) for v in value)
        inside = (lambda c: 0 <= c < n) if n else (lambda c: c >= 0)
        if not (inside(true) and (inside(pred) or pred == metrics.ANY_OTHER)):
            where = f"the {n} classes (0..{n - 1})" if n else "the classes (>= 0)"
            raise traitlets.TraitError(
                f"ConfusionMatrix.selected: {value!r} is outside {where}; "
                "predicted -1 stands for any other class"
            )
        return [true, pred]

    @traitlets.validate("split")
    def _check_split(self, proposal: Any) -> str:
        return check_switch("ConfusionMatrix", proposal["value"], self.splits)

    @reacts_to("split")
    def _on_split(self, change: Any) -> None:
        self._read_steps()
        if self.gallery is not None:
            self.gallery.split = self.split
        self._fill()

    @reacts_to("step", "compare_step")
    def _on_step(self, change: Any) -> None:
        self._fill()

    @reacts_to("selected")
    def _on_selected(self, change: Any) -> None:
        if self.selected:
            self.selected_flip = ""
        self._fill_selection()

    @reacts_to("selected_flip")
    def _on_selected_flip(self, change: Any) -> None:
        if self.selected_flip:
            self.selected = []
        self._fill_selection()

    def compare_with(self, step: int) -> dict[str, Any]:
        """Compare the evaluation in view with the one at or before ``step``; the counts."""
        self.compare_step = int(step)
        return {k: v for k, v in self.compare.items() if k != "delta"}

    def flipped_ids(self, which: str) -> list[int]:
        """Ids of the samples that flipped ``"to_wrong"`` or ``"to_right"`` (highest loss
        now first); empty without a comparison."""
        if which not in FLIPS[1:]:
            raise ValueError(f"flipped_ids: which must be 'to_wrong' or 'to_right', got {which!r}")
        if self._flips is None:
            return []
        return getattr(self._flips, which).tolist()

    def select(self, true: int, pred: int) -> list[int]:
        """Select the cell ``[true, pred]`` and return its sample ids (highest loss first)."""
        self.selected = [int(true), int(pred)]
        return list(self.selected_ids)

    def _rebuild(self) -> None:
        split = followed_split(self.split, self._run.class_splits(), self._split_chosen)
        self.splits = _menu(self._run, split)
        before = self._steps
        if split != self.split:
            before = np.zeros(0, dtype=np.int64)  # the step goes to the new split's latest
            self.split = split
        self._read_steps()
        self.step = followed_step(self.step, before, self._steps)
        self._fill()

    # -- state ---------------------------------------------------------------------------

    def _fill(self) -> None:
        at = metrics.evaluation_at(self._steps, self.step)
        names = self._run.class_names
        if at is None:
            self._preds = None
            self._flips = None
            self.eval_step = -1
            self.matrix, self.class_table, self.scores, self.confused = {}, [], {}, []
            self.class_errors = []
            self.compare = {}
            self._n_classes = len(names) if names is not None else 0
            if names is not None and len(names) > MAX_MATRIX_CLASSES:
                self.mode, self.class_names = "pairs", []
            else:
                self.class_names = [str(n) for n in names] if names is not None else []
            self._fill_selection()
            return
        preds = self._run.predictions(at, split=self.split)
        n = metrics.class_count(preds, names)
        self._preds = preds
        self._n_classes = n
        self.eval_step = at
        if n > MAX_MATRIX_CLASSES:
            self._fill_lists(preds, names)
        else:
            self._fill_matrix(preds, names, n, at)
        self._fill_compare(preds, n)
        self._fill_selection()

    def _fill_matrix(self, preds: pd.DataFrame, names: Any, n: int, at: int) -> None:
        self.mode = "matrix"
        self.class_names = (
            [str(c) for c in names] if names is not None else [str(i) for i in range(n)]
        )
        matrix = metrics.confusion_matrix(preds, n)
        self.matrix = {"step": at, "counts": array_trait_payload(matrix, dtype="<i4")}
        table = metrics.class_metrics(preds, n, self.class_names)
        self.class_table = [
            {
                "class": int(r["class"]),
                "name": str(r["name"]),
                # None (JSON null) where the score is undefined (nothing to divide by)
                "precision": _score(float(r["precision"])),
                "recall": _score(float(r["recall"])),
                "f1": _score(float(r["f1"])),
                "support": int(r["support"]),
            }
            for r in table.to_dict("records")
        ]
        s = metrics.summary(preds, n)
        self.scores = {
            "n": s.n,
            # None (JSON null) where there is no score: no sample had finite logits
            "accuracy": _score(s.accuracy),
            "macro_f1": _score(s.macro_f1),
            "weighted_f1": _score(s.weighted_f1),
            "nonfinite": s.nonfinite,
        }
        top = metrics.most_confused(matrix, MOST_CONFUSED)
        self.confused = pair_rows(top, self.class_names)
        self.class_errors = []

    def _fill_lists(self, preds: pd.DataFrame, names: Any) -> None:
        """A label set too large for a matrix: ranked pairs and classes, counted sparsely."""
        self.mode = "pairs"
        self.class_names = []
        self.matrix, self.class_table = {}, []
        self.scores = list_scores(preds)
        self.confused = pair_rows(metrics.top_confusions(preds, LIST_ROWS), names)
        self.class_errors = class_error_rows(preds, names)

    def _fill_compare(self, preds: pd.DataFrame, n: int) -> None:
        base = (
            metrics.evaluation_at(self._steps, self.compare_step)
            if self.compare_step >= 0 and len(self._steps)
            else None
        )
        if base is None:
            self._flips = None
            notice = f"no evaluation at or before step {self.compare_step} to compare with"
            self.compare = {} if self.compare_step < 0 else {"step": -1, "notice": notice}
            return
        before = self._run.predictions(base, split=self.split)
        self._flips = metrics.flips(before, preds)
        compare: dict[str, Any] = {
            "step": base,
            "to_wrong": len(self._flips.to_wrong),
            "to_right": len(self._flips.to_right),
            "common": self._flips.common,
        }
        if self.mode == "matrix" and metrics.class_count(before) <= n:
            delta = metrics.confusion_matrix(preds, n) - metrics.confusion_matrix(before, n)
            compare["delta"] = array_trait_payload(delta, dtype="<i4")
        self.compare = compare

    def _fill_selection(self) -> None:
        ids: list[int] = []
        if self.selected and self._preds is not None:
            true, pred = self.selected
            ids = metrics.cell_ids(self._preds, true, pred).tolist()
        elif self.selected_flip and self._flips is not None:
            ids = getattr(self._flips, self.selected_flip).tolist()
        self.selected_ids = ids
        gallery = self.gallery
        if gallery is not None:
            with gallery.hold_sync():
                gallery.step = self.eval_step if self.eval_step >= 0 else self.step
                gallery.ids = ids
                if self.selected and self.selected[1] == metrics.ANY_OTHER:
                    gallery.prompt = "No errors of this class at this step."
                elif self.selected:
                    gallery.prompt = "No samples in this cell at this step."
                elif self.selected_flip:
                    gallery.prompt = "No samples flipped this way between the two evaluations."
                else:
                    gallery.prompt = "Click a cell of the matrix to see its samples here."

    def close(self) -> None:
        """Stop following the run; close the view and its gallery."""
        if self.gallery is not None:
            self.gallery.close()
        super().close()


def _score(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _menu(run: Any, split: str) -> list[str]:
    """The splits the menu offers: those whose model predicted classes, and ``split``."""
    splits = list(run.class_splits())
    return splits if split in splits else [*splits, split]


ConfusionMatrix._css = view_css(
    """
.nbviz-cm-main { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.nbviz-cm-scroll { max-width: 100%; max-height: 640px; overflow: auto; position: relative;
  border: 1px solid var(--jp-border-color2, #e0e0e0); }
.nbviz-cm-grid { display: grid; }
.nbviz-cm-axis-title { font-size: 0.85em; color: var(--jp-ui-font-color2, #616161); }
.nbviz-cm-rowlabel { overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  text-align: right; padding-right: 4px; font-size: 11px; box-sizing: border-box; }
.nbviz-cm-collabel { overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  writing-mode: vertical-rl; transform: rotate(180deg); font-size: 11px; box-sizing: border-box;
  padding-top: 4px; }
.nbviz-cm-rowlabel.nbviz-active, .nbviz-cm-collabel.nbviz-active { font-weight: 700; }
.nbviz-cm-canvas { cursor: pointer; }
.nbviz-cm-readout { min-height: 1.3em; font-size: 0.9em; font-variant-numeric: tabular-nums; }
.nbviz-cm-side { display: flex; flex-direction: column; gap: 8px; min-width: 260px; }
.nbviz-cm-scores { font-variant-numeric: tabular-nums; }
.nbviz-cm-scores b { font-weight: 600; }
.nbviz-cm-nonfinite { color: #b2182b; font-weight: 600; max-width: 420px; }
.nbviz-cm-confused { list-style: none; margin: 0; padding: 0; max-height: 180px; overflow: auto; }
.nbviz-cm-confused button { font: inherit; border: none; background: transparent; color: inherit;
  cursor: pointer; padding: 1px 4px; text-align: left; width: 100%; border-radius: 3px;
  overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.nbviz-cm-confused button:hover, .nbviz-cm-confused button.nbviz-active {
  background: var(--jp-layout-color3, #e0e0e0); }
.nbviz-cm-tablewrap { max-height: 260px; overflow: auto; }
.nbviz-cm-table { border-collapse: collapse; font-variant-numeric: tabular-nums;
  font-size: 0.92em; }
.nbviz-cm-table th { cursor: pointer; position: sticky; top: 0; user-select: none;
  background: var(--jp-layout-color2, #f5f5f5); }
.nbviz-cm-table th, .nbviz-cm-table td { padding: 1px 6px; text-align: right; }
.nbviz-cm-table th:first-child, .nbviz-cm-table td:first-child { text-align: left;
  max-width: 140px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.nbviz-cm-table tbody tr { cursor: pointer; }
.nbviz-cm-table tbody tr:hover { background: var(--jp-layout-color2, #f5f5f5); }
.nbviz-cm-title { font-weight: 600; font-size: 0.92em; }
.nbviz-cm-gallery { margin-top: 10px; }
.nbviz-cm-flips { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }
.nbviz-cm-flips button.nbviz-active { background: var(--jp-brand-color3, #bbdefb); }
.nbviz-toolbar select { font: inherit; }
.nbviz-confusion [hidden] { display: none !important; }
.nbviz-cm-lists { display: flex; flex-direction: column; gap: 6px; max-width: 100%; }
.nbviz-cm-lists-row { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.nbviz-cm-caption { max-width: 760px; }
.nbviz-cm-tablewrap.nbviz-cm-list { max-height: 420px; }
.nbviz-cm-table tbody tr.nbviz-active { background: var(--jp-brand-color3, #bbdefb); }
"""
)
