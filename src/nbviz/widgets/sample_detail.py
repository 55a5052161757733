"""The detail of one sample in the gallery: what the model thought of it, and what it did.

Beside the sample at full size: the top-k class probabilities of the evaluation
in view (from the probabilities ``run.log_predictions`` keeps for logits), its
per-unit summary where ``run.evaluate(..., units_layer=...)`` recorded one, and
its activations through the layers where ``run.capture`` (or
``run.evaluate(..., capture_ids=...)``) recorded them: per layer the statistics,
each unit's mean and, for a convolution, its feature maps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nbviz.analysis.metrics import evaluation_at
from nbviz.widgets.samples import capture_arrays, class_name
from nbviz.widgets.wire import array_trait_payload

__all__ = ["TOP_K", "ClassProbabilities", "activations_of", "units_of"]

TOP_K = 5
"""Classes listed in a sample's detail (the most probable first)."""


class ClassProbabilities:
    """The class probabilities of a few evaluations, read once each, for the top-k of a sample."""

    def __init__(self, run: Any) -> None:
        self._run = run
        self._at: dict[int, tuple[dict[int, int], np.ndarray] | None] = {}

    def keep(self, steps: Sequence[int]) -> None:
        """Forget the evaluations that are not among ``steps`` (the split changed)."""
        wanted = set(steps)
        self._at = {s: p for s, p in self._at.items() if s in wanted}

    def top_k(
        self, at: int, id: int, split: str, names: Sequence[str] | None
    ) -> tuple[list[dict[str, Any]], str]:
        """The ``TOP_K`` most probable classes of sample ``id`` at evaluation ``at``, and a
        note saying why there are none."""
        if at not in self._at:
            got = self._run.probabilities(at, split=split)
            if len(self._at) > 4:
                self._at.clear()
            self._at[at] = (
                None if got is None else ({int(i): k for k, i in enumerate(got[0])}, got[1])
            )
        entry = self._at[at]
        if entry is None:
            return [], (
                f"No class probabilities at step {at}: they are kept when "
                "run.log_predictions gets (N, classes) logits (run.evaluate does)."
            )
        where, probs = entry
        if id not in where:
            return [], f"Sample {id} has no class probabilities at step {at}."
        row = np.asarray(probs[where[id]], dtype=np.float64)
        order = np.lexsort((np.arange(len(row)), -row))[:TOP_K]
        top = [{"class": int(c), "name": class_name(names, c), "p": float(row[c])} for c in order]
        return top, ""


def units_of(run: Any, split: str, at: int | None, id: int) -> dict[str, Any] | None:
    """Sample ``id``'s per-unit summary at the evaluation at or before ``at`` (None: none)."""
    layers = run.embedding_layers(split, kind="units")
    if not layers or at is None:
        return None
    layer = layers[0]
    steps = run.embedding_steps(split, layer, kind="units")
    got = evaluation_at(steps, at)
    if got is None:
        return None
    ids, matrix = run.embeddings(got, split=split, layer=layer, kind="units")
    hit = np.nonzero(np.asarray(ids) == id)[0]
    if not len(hit):
        return None
    values = np.asarray(matrix[int(hit[0])], dtype=np.float32)
    return {"layer": layer, "step": got, "values": array_trait_payload(values, dtype="<f4")}


def activations_of(run: Any, split: str, step: int, id: int) -> tuple[dict[str, Any] | None, str]:
    """Sample ``id``'s captured activations, layer by layer, at the capture at or before
    ``step`` (else the first), and a note on what is missing."""
    steps = run.capture_steps(id, split)
    how = (
        f"run.capture(model, sample, id={id}, split={split!r}) records them, "
        f"or run.evaluate(step, model, loader, capture_ids=[{id}])"
    )
    if not len(steps):
        return None, f"No activations recorded for sample {id}: {how}."
    at = evaluation_at(steps, step)
    note = ""
    if at is None:
        at = int(steps[0])
        note = f"captured at step {at}, after the step in view"
    frame = run.captures(id, split, at)
    layers = []
    for r in frame.to_dict("records"):
        entry: dict[str, Any] = {
            "layer": str(r["layer"]),
            "type": str(r["type"]),
            "shape": [int(d) for d in r["shape"]],
            "n_units": int(r["n_units"]),
            "note": str(r["note"]),
            **{
                k: None if pd.isna(r[k]) else float(r[k])
                for k in ("mean", "std", "min", "max", "zero_frac")
            },
        }
        entry.update(capture_arrays(r))
        layers.append(entry)
    return {"step": int(at), "steps": [int(s) for s in steps], "layers": layers}, note
