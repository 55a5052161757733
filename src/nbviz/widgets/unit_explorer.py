"""What each unit of a layer responds to: the samples that excite it most and least.

For a layer whose per-sample unit summaries ``run.evaluate(..., units_layer=...)``
recorded (or the embedding layer, whose input ``run.evaluate`` keeps for the
projector), a chosen unit lists the samples that excite it most and least at
the evaluation in view (the latest at or before the step). A click on one of
those samples shows its activations of the layer channel by channel (feature
maps of a convolution) where ``run.capture`` recorded them.

For a language model's layer whose units' top tokens an evaluation recorded
(:mod:`nbviz.recording.unit_tokens`), a chosen unit lists instead the tokens it was
most active on, each in its context (:func:`token_strips`); a click on one opens
its sample as a click on a sample card does. A unit whose activations were not all
finite says how many positions were not; a layer left out of the top tokens says why.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nbviz.analysis.metrics import evaluation_at
from nbviz.recording.unit_tokens import LEFT_OUT_KEY, LEFT_OUT_REASONS
from nbviz.store import RunFileError
from nbviz.widgets.samples import capture_arrays, class_name, sample_payload
from nbviz.widgets.wire import array_trait_payload

__all__ = ["UNIT_SAMPLES", "UnitExplorer", "token_strips"]

UNIT_SAMPLES = 8
"""Samples listed per unit, for each end (most and least excited)."""


class UnitExplorer:
    """Reads a run's per-sample unit values and captures for one view (keeps a few matrices)."""

    def __init__(self, run: Any) -> None:
        self._run = run
        self._cache: dict[tuple[str, str, str, int], tuple[np.ndarray, np.ndarray]] = {}

    def clear(self) -> None:
        self._cache.clear()

    def _source(self, name: str, split: str) -> tuple[str, str] | None:
        """(kind, description) of the per-sample unit values recorded for ``name``."""
        run = self._run
        if name in run.embedding_layers(split, kind="units"):
            return "units", f"mean activation of each unit of {name} per sample"
        if name in run.embedding_layers(split, kind="embedding"):
            return "embedding", f"input of {name} per sample (the embedding run.evaluate records)"
        return None

    def _matrix(self, name: str, split: str, kind: str, at: int) -> tuple[np.ndarray, np.ndarray]:
        key = (name, split, kind, at)
        hit = self._cache.get(key)
        if hit is None:
            ids, matrix = self._run.embeddings(at, split=split, layer=name, kind=kind)
            hit = (np.asarray(ids, dtype=np.int64), np.asarray(matrix, dtype=np.float32))
            if len(self._cache) > 4:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def samples(self, name: str, split: str, step: int, unit: int) -> dict[str, Any]:
        """Per-unit means of layer ``name`` at the evaluation in view; with ``unit`` in
        range, the samples that excite it most and least (as cards), or for a language
        model's layer the tokens it was most active on (as strips)."""
        token_layers = self._run.top_token_layers(split)
        if name in token_layers:
            return token_strips(self._run, name, split, step, unit)
        how = (
            f"record them with run.evaluate(step, model, loader, units_layer={name!r}, "
            f"split={split!r})"
        )
        source = self._source(name, split)
        if source is None:
            notice = f"No per-sample unit values of {name!r} for split {split!r}: {how}."
            if token_layers:
                notice = _no_top_tokens(self._run, name, split)
            return {"layer": name, "n_units": 0, "notice": notice}
        kind, what = source
        at, notice = _evaluation_in_view(self._run.embedding_steps(split, name, kind=kind), step)
        try:
            ids, matrix = self._matrix(name, split, kind, at)
        except RunFileError as exc:  # one damaged matrix: said in the panel, the view goes on
            said = f"The per-sample unit values of {name!r} at step {at} cannot be read: {exc}"
            return {"layer": name, "n_units": 0, "notice": said}
        n_units = int(matrix.shape[1]) if matrix.ndim == 2 else 0
        finite = np.isfinite(matrix) if len(ids) else np.ones((0, n_units), dtype=bool)
        counts = finite.sum(axis=0)
        sums = np.where(finite, matrix, 0.0).sum(axis=0) if len(ids) else np.zeros(n_units)
        # a unit with no finite value has no mean (NaN), never 0
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan) if len(ids) else sums
        bad = int((~finite).sum())
        if bad:
            said = f"{bad:,} of {finite.size:,} unit values at step {at} are non-finite (NaN/inf)"
            notice = f"{notice}; {said}" if notice else said
        out: dict[str, Any] = {
            "layer": name,
            "kind": kind,
            "what": what,
            "step": at,
            "n_units": n_units,
            "n_samples": len(ids),
            "means": array_trait_payload(means, dtype="<f4"),
            "unit": -1,
            "notice": notice,
        }
        if 0 <= unit < n_units:
            values = matrix[:, unit].astype(np.float64)
            finite = np.isfinite(values)
            fid, fval = ids[finite], values[finite]
            most = np.lexsort((fid, -fval))[:UNIT_SAMPLES]
            least = np.lexsort((fid, fval))[:UNIT_SAMPLES]
            cards = self._cards(np.concatenate([fid[most], fid[least]]), split, at)
            out.update(
                unit=unit,
                most=[{**cards[int(fid[k])], "value": float(fval[k])} for k in most],
                least=[{**cards[int(fid[k])], "value": float(fval[k])} for k in least],
            )
        elif unit >= n_units:
            out["notice"] = f"unit {unit} is outside 0..{n_units - 1} for {name!r}"
        return out

    def _cards(self, ids: np.ndarray, split: str, at: int) -> dict[int, dict[str, Any]]:
        """Each sample as a card: its payload, label and prediction at ``at``, by name."""
        run = self._run
        wanted = sorted({int(i) for i in ids})
        names = run.class_names
        cards: dict[int, dict[str, Any]] = {i: {"id": i} for i in wanted}
        stored = set(run.sample_ids(split).tolist())
        have = [i for i in wanted if i in stored]
        if have:
            for row in run.samples(have, split=split).to_dict("records"):
                card = cards[int(row["id"])]
                card.update(sample_payload(pd.Series(row)))
                if row["label"] is not None and not pd.isna(row["label"]):
                    card["label"] = int(row["label"])
        if at in set(run.prediction_steps(split).tolist()):
            preds = run.predictions(at, split=split).set_index("id")
            for i in wanted:
                if i in preds.index:  # a model that is not a classifier has no classes
                    for key in ("label", "pred"):
                        if not pd.isna(preds.at[i, key]):
                            cards[i][key] = int(preds.at[i, key])
        for card in cards.values():
            for key in ("label", "pred"):
                if key in card:
                    card[f"{key}_name"] = class_name(names, card[key])
        return cards

    def sample_maps(self, name: str, split: str, step: int, id: int) -> dict[str, Any]:
        """Sample ``id``'s captured output of layer ``name``: per-unit values, feature maps."""
        out: dict[str, Any] = {"id": id, "layer": name, "step": -1}
        frame = self._run.captures(id, split, step)
        if not len(frame):
            frame = self._run.captures(id, split)  # only later captures: the latest
        rows = frame[frame["layer"] == name] if len(frame) else frame
        if not len(rows):
            out["notice"] = (
                f"No activations of {name!r} recorded for sample {id}: "
                f"run.capture(model, sample, id={id}, split={split!r}) records them."
            )
            return out
        r = rows.iloc[0]
        out.update(step=int(r["step"]), shape=[int(d) for d in r["shape"]], notice=str(r["note"]))
        out.update(capture_arrays(r))
        return out


def token_strips(run: Any, name: str, split: str, step: int, unit: int) -> dict[str, Any]:
    """Each unit's highest activation of layer ``name`` at the evaluation in view (the
    latest at or before ``step``); with ``unit`` in range, the tokens it was most active
    on, each with the input tokens around it as text, the token's place among them and
    the activation."""
    at, notice = _evaluation_in_view(run.top_token_steps(name, split), step)
    got = run.unit_tokens(name, at, split)
    n_units, k = got.values.shape
    with np.errstate(invalid="ignore"):
        peaks = np.where(got.ids[:, 0] >= 0, got.values[:, 0], np.nan) if k else np.zeros(0)
    has_text = bool(run.token_texts())
    out: dict[str, Any] = {
        "layer": name,
        "kind": "tokens",
        "what": f"activation of each unit of {name} at each token",
        "step": at,
        "n_units": int(n_units),
        "k": int(k),
        "means": array_trait_payload(peaks, dtype="<f4"),
        "unit": -1,
        "notice": notice,
    }
    said = []
    if not has_text:
        said.append(
            "tokens shown by id: evaluate with tokens= (a vocabulary or tokenizer) for text"
        )
    bad_units = int((got.nonfinite > 0).sum())
    if bad_units:
        said.append(
            f"{bad_units:,} of {n_units:,} units had non-finite activations (NaN/inf): "
            "+inf is ranked, NaN and -inf are not"
        )
    out["notice"] = "; ".join([notice, *said] if notice else said)
    if 0 <= unit < n_units:
        rows = run.top_tokens(name, unit=unit, step=at, split=split)
        out["unit"] = unit
        out["nonfinite"] = int(got.nonfinite[unit])
        out["tokens"] = [
            {
                "id": int(r.id),
                "position": int(r.position),
                # JSON has no inf: a non-finite value travels as its name, never a number
                "value": float(r.value) if np.isfinite(r.value) else None,
                **({} if np.isfinite(r.value) else {"nonfinite": _nonfinite_name(r.value)}),
                "token": str(r.token),
                "context": [str(t) for t in r.context],
                "focus": int(r.focus),
            }
            for r in rows.itertuples(index=False)
        ]
    elif unit >= n_units:
        out["notice"] = f"unit {unit} is outside 0..{n_units - 1} for {name!r}"
    return out


def _evaluation_in_view(steps: np.ndarray, step: int) -> tuple[int, str]:
    """The evaluation step shown at ``step`` (the latest at or before it, else the first)
    and the notice that says so when it comes after."""
    at = evaluation_at(steps, step)
    if at is None:
        at = int(steps[0])
        return at, f"the first evaluation (step {at}) comes after this step"
    return at, ""


def _nonfinite_name(value: float) -> str:
    return "NaN" if np.isnan(value) else "+Inf" if value > 0 else "-Inf"


def _no_top_tokens(run: Any, name: str, split: str) -> str:
    """Why layer ``name`` has no top tokens at the ``split`` evaluations: left out of the
    last one (the reason, and the other layers left out), or not a token layer."""
    how = f"run.evaluate(..., units_layer={name!r}) records it"
    last = (run.meta(LEFT_OUT_KEY) or {}).get(split)
    layers = last.get("layers") if isinstance(last, dict) else None
    if isinstance(layers, dict) and name in layers:
        reason = LEFT_OUT_REASONS.get(str(layers[name]), str(layers[name]))
        others = [str(n) for n in layers if n != name]
        shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
        also = f" Also left out: {shown}." if others else ""
        budget = last.get("max_units")
        budget = f"{budget:,}" if type(budget) is int else "a bounded number of"
        if layers[name] == "width":
            how = (
                "name a narrower layer with units_layer= (a block's output, an MLP's hidden units)"
            )
        return (
            f"No top tokens of {name!r}: the evaluation of step {last.get('step')} left it "
            f"out ({reason}; {budget} units in all); {how}.{also}"
        )
    return (
        f"No top tokens of {name!r} at the {split!r} evaluations: its output is not "
        "(samples, tokens, features), or the evaluation did not watch it; "
        f"{how}."
    )
