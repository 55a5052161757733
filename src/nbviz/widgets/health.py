"""HealthReport: the verdict on a run first, then its findings, each a link.

The report opens with ``run.triage()``: the likely causes, most likely first,
each with how likely it is, one sentence and what to try. Below, each root
finding of ``run.diagnose()`` is listed with the findings that follow from it
folded under it (``expanded`` holds the roots opened). A finding shows its
severity, check, where (layer) and since when (step), and the message in plain
words; the evidence opens under it. Clicking a finding sets ``step`` to its
step and ``layer`` to its layer, so in the
:class:`~nbviz.widgets.dashboard.Dashboard` the scrubber moves there and the
LayerBrowser opens that layer; a finding about samples (mislabelled samples, a
class's errors) also sets ``selected_ids`` (and ``selected_split``) to them.
While the run grows the diagnosis is recomputed (at most every
``MIN_INTERVAL`` seconds).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np
import traitlets

from nbviz.analysis.checks.losses import outlines_shared
from nbviz.analysis.triage import triage
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import LiveView, linked_step, view_css
from nbviz.widgets.view_data import frame

__all__ = ["HealthReport", "badges_of"]

MIN_INTERVAL = 2.0
"""Seconds between two diagnoses of a growing run."""

_RANK = {"error": 0, "warning": 1, "info": 2}


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def badges_of(findings: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``{layer: [severity, text]}``: the worst finding of each layer, for LayerBrowser badges."""
    out: dict[str, list[str]] = {}
    for f in findings:
        layer = f.get("layer") or ""
        if not layer:
            continue
        known = out.get(layer)
        if known is None or _RANK[f["severity"]] < _RANK[known[0]]:
            out[layer] = [f["severity"], f["check"].replace("_", " ")]
    return out


FINDING_COLUMNS = [
    "id",
    "check",
    "layer",
    "step",
    "severity",
    "message",
    "cause",
    "root",
    "advice",
    "evidence",
]
"""The columns of ``HealthReport.data()`` (and of its CSV download)."""


class HealthReport(LiveView):
    """The findings of ``run.diagnose()``, worst first; a click goes to the finding.

    Parameters
    ----------
    run
        A run (``nbviz.Run`` or ``nbviz.open_run(...)``).
    live
        Diagnose again while the run grows.

    Traits: ``verdict`` (the rows of ``run.triage()``), ``findings``, ``step``
    (linked; set to a clicked finding's step), ``layer`` (the clicked finding's
    layer, "" for run-level findings), ``selected`` (index of the clicked finding,
    -1 for none), ``selected_ids`` and ``selected_split`` (the samples a clicked
    finding is about), ``expanded`` (ids of the roots shown with their
    consequences), ``show_info``.

    ``data()`` is the findings as a DataFrame, the table the view's menu
    downloads as CSV. The findings are a list, not a plot: ``figure()`` says so.
    """

    _esm = esm("health")

    step = linked_step("Linked step; a clicked finding sets it to its step.")
    layer = traitlets.Unicode("", help="Layer of the clicked finding.").tag(sync=True)
    selected = traitlets.Int(-1, help="Index of the clicked finding in `findings`.").tag(sync=True)
    show_info = traitlets.Bool(True, help="List info findings too.").tag(sync=True)
    findings = traitlets.List(
        traitlets.Dict(),
        help="id, check, layer, step, severity, message, evidence (JSON text), cause, root, advice",
    ).tag(sync=True)
    verdict = traitlets.List(
        traitlets.Dict(), help="cause, score, summary, advice, evidence, findings: run.triage()"
    ).tag(sync=True)
    expanded = traitlets.List(
        traitlets.Unicode(), help="Ids of the root findings shown with their consequences."
    ).tag(sync=True)
    selected_ids = traitlets.List(
        traitlets.Int(), help="Sample ids of the clicked finding (mislabelled samples, errors)."
    ).tag(sync=True)
    selected_split = traitlets.Unicode("", help="Split of selected_ids.").tag(sync=True)

    def __init__(self, run: Any, *, live: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._run = run
        self._last = 0.0
        with self._building([run], live):
            self._rebuild()

    @traitlets.observe("selected")
    def _on_selected(self, change: Any) -> None:
        i = change["new"]
        if 0 <= i < len(self.findings):
            finding = self.findings[i]
            split, ids = self._samples_of(finding)
            with self.hold_sync():
                self.layer = finding["layer"]
                if finding["step"] is not None:
                    self.step = int(finding["step"])
                self.selected_split = split
                self.selected_ids = ids

    def _samples_of(self, finding: dict[str, Any]) -> tuple[str, list[int]]:
        """(split, sample ids) a finding is about: its suspects, or a class's errors."""
        evidence = json.loads(finding["evidence"] or "{}")
        split = evidence.get("split") or ""
        if finding["check"] == "mislabeled_samples":
            return split, [int(i) for i in evidence.get("ids", [])]
        if finding["check"] in ("class_error_imbalance", "unlearned_classes") and split:
            preds = self._run.predictions(split=split)
            wrong = preds[
                (preds["label"] == evidence.get("class")) & (preds["pred"] != preds["label"])
            ]
            order = np.argsort(-wrong["loss"].fillna(-np.inf).to_numpy(), kind="stable")
            return split, [int(i) for i in wrong["id"].to_numpy()[order]]
        return "", []

    def data(self) -> Any:
        """The findings the view lists, worst first, as a tidy DataFrame.

        Columns ``id, check, layer, step, severity, message, cause, root, advice,
        evidence`` (``step`` None for run-level findings, ``evidence`` as JSON text).
        """
        return frame(self.findings, FINDING_COLUMNS)

    def figure(self) -> Any:
        """Not drawn: the findings are a list, not a plot. Raises ``TypeError``."""
        raise TypeError(
            "HealthReport.figure: the findings are a list, not a plot; "
            "HealthReport.data() gives them as a DataFrame"
        )

    def badges(self) -> dict[str, list[str]]:
        """The worst finding per layer, as ``LayerBrowser.badges`` takes them."""
        return badges_of(self.findings)

    def _on_run_grew(self) -> None:
        if time.monotonic() - self._last >= MIN_INTERVAL:
            super()._on_run_grew()

    def _rebuild(self) -> None:
        self._last = time.monotonic()
        with outlines_shared():  # the diagnosis and the verdict read each loss once
            frame = self._run.diagnose()
            verdict = triage(self._run, frame)
        self.verdict = [
            {
                "cause": str(v["cause"]),
                "score": float(v["score"]),
                "summary": str(v["summary"]),
                "advice": str(v["advice"]),
                "evidence": [str(e) for e in v["evidence"]],
                "findings": [str(i) for i in v["findings"]],
            }
            for v in verdict.to_dict("records")
        ]
        rows = []
        for f in frame.to_dict("records"):
            step = f["step"]
            rows.append(
                {
                    "id": str(f["id"]),
                    "cause": str(f["cause"]),
                    "root": str(f["root"]),
                    "advice": str(f["advice"]),
                    "check": str(f["check"]),
                    "layer": str(f["layer"] or ""),
                    "step": None if step is None or step != step else int(step),
                    "severity": str(f["severity"]),
                    "message": str(f["message"]),
                    "evidence": json.dumps(
                        {k: _jsonable(v) for k, v in (f["evidence"] or {}).items()},
                        default=str,
                        indent=1,
                    ),
                }
            )
        self.findings = rows
        ids = {r["id"] for r in rows}
        self.expanded = [i for i in self.expanded if i in ids]
        if self.selected >= len(rows):
            self.selected = -1
        recorded = self._run.scalar_names() or self._run.recorded_layers() or self._run.splits()
        self.empty = (
            ""
            if recorded
            else (
                f"Nothing to diagnose in {self._run.name} yet: the checks read what a probe "
                "(run.watch(model)), run.log(step, train_loss=...) and run.evaluate(...) "
                "record; this list fills in as they arrive."
            )
        )


HealthReport._css = view_css(
    """
.nbviz-hr-list { list-style: none; margin: 0; padding: 0; max-height: 360px; overflow: auto; }
.nbviz-hr-item { padding: 4px 6px; border-bottom: 1px solid var(--jp-border-color2, #e0e0e0);
  cursor: pointer; }
.nbviz-hr-item:hover { background: var(--jp-layout-color2, #eeeeee); }
.nbviz-hr-item.nbviz-active { outline: 2px solid var(--jp-brand-color1, #1976d2);
  outline-offset: -2px; }
.nbviz-hr-head { display: flex; gap: 0.6em; align-items: baseline; }
.nbviz-hr-check { font-weight: 600; }
.nbviz-hr-where { color: var(--jp-ui-font-color2, #616161); font-variant-numeric: tabular-nums; }
.nbviz-hr-message { margin-top: 2px; }
.nbviz-hr-evidence { margin: 4px 0 0 0; font-size: 0.85em; white-space: pre-wrap;
  color: var(--jp-ui-font-color2, #616161); }
.nbviz-hr-healthy { color: #2e7d32; }
.nbviz-hr-verdicts { display: flex; flex-direction: column; gap: 6px; margin-bottom: 8px; }
.nbviz-hr-verdict { padding: 6px 10px; border-radius: 4px; border-left: 4px solid #9e9e9e;
  background: var(--jp-layout-color2, #f5f5f5); }
.nbviz-hr-verdict.nbviz-hr-first { border-left-color: #e65100; }
.nbviz-hr-verdict.nbviz-hr-cause-healthy { border-left-color: #2e7d32; }
.nbviz-hr-verdict-head { display: flex; gap: 0.8em; align-items: baseline; }
.nbviz-hr-cause { font-weight: 700; text-transform: capitalize; }
.nbviz-hr-score { color: var(--jp-ui-font-color2, #616161); font-variant-numeric: tabular-nums; }
.nbviz-hr-sentence { margin-top: 2px; }
.nbviz-hr-advice { margin-top: 2px; color: var(--jp-ui-font-color1, #212121); }
.nbviz-hr-try { font-weight: 600; }
.nbviz-hr-toggle { font: inherit; font-size: 0.9em; margin-top: 4px; padding: 0 6px;
  cursor: pointer; border: 1px solid var(--jp-border-color1, #bdbdbd); border-radius: 3px;
  background: var(--jp-layout-color1, #fff); color: inherit; }
.nbviz-hr-children { list-style: none; margin: 4px 0 0 1.2em; padding: 0;
  border-left: 2px solid var(--jp-border-color2, #e0e0e0); }
.nbviz-hr-children .nbviz-hr-item { border-bottom: none; }
"""
)
