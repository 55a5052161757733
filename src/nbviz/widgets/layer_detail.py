"""The LayerBrowser's detail of one layer: its statistics over steps, its histograms at
the step, and its dead-unit map.

Long runs are summarised, never sent whole: the statistics in at most
``DETAIL_POINTS`` buckets (min of the minima, max of the maxima, peak norm, so
spikes survive); the dead map (units x steps of the fraction of the batch on
which a unit was zero) the captures up to the step within a window.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.analysis.dead_heads import dead_heads
from nbviz.param_names import short_name
from nbviz.store import MissingStepError
from nbviz.widgets.layer_table import main_weight
from nbviz.widgets.sampling import count_text, evenly
from nbviz.widgets.wire import (
    array_from_payload,
    array_trait_payload,
    floats_payload,
    steps_payload,
)

__all__ = [
    "DEAD_WINDOW",
    "DETAIL_POINTS",
    "STAT_FIELDS",
    "HistogramsAtStep",
    "bucket_stats",
    "dead_map",
    "heads_map",
    "stats_detail",
]

DETAIL_POINTS = 1000
DEAD_WINDOW = 2000  # captures before the step searched for per-unit stats
DEAD_COLUMNS = 400
DEAD_CELLS = 250_000
STAT_FIELDS = ("mean", "std", "min", "max", "norm", "zero_frac", "rel", "nonfinite")


def bucket_stats(frame: Any, max_points: int) -> dict[str, np.ndarray]:
    """layer_stats rows of one layer (sorted by step) as at most ``max_points`` buckets.

    Minimum of ``min``, maximum of ``max`` and of ``norm`` (peaks survive),
    mean of the rest, sum of ``nonfinite``; a bucket's step is its last step.
    """
    steps = frame["step"].to_numpy(dtype=np.int64)
    cols = {f: frame[f].to_numpy(dtype=np.float64) for f in STAT_FIELDS}
    n = len(steps)
    if n <= max_points:
        return {"step": steps, **cols}
    bounds = (np.arange(max_points) * n) // max_points
    ends = np.append(bounds[1:], n) - 1
    out: dict[str, np.ndarray] = {"step": steps[ends]}
    with np.errstate(invalid="ignore"):
        for f, v in cols.items():
            if f == "min":
                out[f] = np.fmin.reduceat(v, bounds)
            elif f in ("max", "norm"):
                out[f] = np.fmax.reduceat(v, bounds)
            elif f == "nonfinite":
                out[f] = np.add.reduceat(np.nan_to_num(v), bounds)
            else:
                finite = np.isfinite(v)
                total = np.add.reduceat(np.where(finite, v, 0.0), bounds)
                count = np.add.reduceat(finite.astype(np.float64), bounds)
                out[f] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return out


def _wanted_series(row: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(signal, layer or parameter, label) of each series the detail of ``row`` shows."""
    name = row["name"]
    wanted = [("activation", name, "activations"), ("gradient", name, "gradient of the output")]
    shorts = [(p, short_name(p)) for p in row["own_params"]]
    wanted += [("gradient", p, f"gradient of {short}") for p, short in shorts]
    for p, short in shorts:
        wanted += [("weight", p, f"{short}"), ("update", p, f"update of {short}")]
    return wanted


def stats_detail(
    run: Any, index: Any, recorded: dict[str, set[str]], row: dict[str, Any]
) -> dict[str, Any]:
    """The layer of ``row``: its activation, gradient, weight and update statistics over steps.

    ``recorded`` names, per signal, the layers that have statistics.
    """
    name = row["name"]
    series = []
    notes = []
    for signal, layer, label in _wanted_series(row):
        if len(index.steps(signal)) == 0 or layer not in recorded.get(signal, ()):
            continue
        try:
            # the captures, or min/max/mean buckets of them: a bounded read
            summary = run.stats_summary(signal, layer, DETAIL_POINTS)
        except (ValueError, KeyError):
            continue  # this layer has no rows for the signal
        frame = summary.frame
        if len(frame) == 0:
            continue
        data = {"step": frame["step"].to_numpy(dtype=np.int64)}
        data.update({f: frame[f].to_numpy(dtype=np.float64) for f in STAT_FIELDS})
        if summary.width:
            how = "captures in buckets (extremes kept)"
            notes.append(f"{label}: {count_text(len(frame), summary.total, how)}")
        series.append(
            {
                "signal": signal,
                "layer": layer,
                "label": label,
                "steps": steps_payload(data["step"]),
                **{f: floats_payload(data[f]) for f in STAT_FIELDS},
            }
        )
    unwatched = "" if row["watched"] else f" (not watched: {row['note'] or 'skipped by the probe'})"
    return {
        "layer": name,
        "type": row["type"],
        "shape": row["shape"],
        "params": row["params"],
        "note": row["note"],  # what the probe says of it (a part of its output, shared calls)
        "series": series,
        "notice": "; ".join(notes),
        "empty": "" if series else f"No statistics recorded for {name!r} yet" + unwatched,
    }


def dead_map(
    run: Any, steps: np.ndarray, step: int, name: str
) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """The per-unit zero fractions of ``name`` near ``step``, and the window of steps read.

    ``steps`` are the activation captures. The window is None when every capture
    was read (or none), so that a move of the step needs no new read.
    """
    return _unit_map(run, steps, step, name, ("zero_frac",), "per-unit zero fractions")


#: What a heads map says, beside the map ("axis" labels its rows).
HEADS_MAP = {
    "axis": "head",
    "title": "heads: fraction of each head's output that is ~0 (heads \u00d7 steps; "
    "a dead head is ~0 at every capture)",
}


def heads_map(
    run: Any, steps: np.ndarray, step: int, name: str
) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """:func:`dead_map` of a ``<module>/heads`` pseudo-layer: heads x steps of the
    fraction of each head's output that is ~0, with each head's output RMS and
    largest ``|value|`` beside (``rms``, ``max_abs``: same shape as ``values``)."""
    payload, window = _unit_map(
        run, steps, step, name, ("head_zero_frac", "head_rms", "head_max_abs"), "head statistics"
    )
    return {**payload, **HEADS_MAP, "dead": _dead_throughout(payload)}, window


def _dead_throughout(payload: dict[str, Any]) -> list[int]:
    """The heads dead (:func:`nbviz.analysis.dead_heads.dead_heads`, from their output
    RMS) at every capture of a heads map's ``payload``."""
    units = int(payload.get("units") or 0)
    if "rms" not in payload or not units:
        return []
    rms = np.asarray(array_from_payload(payload["rms"]), dtype=np.float64).reshape(-1, units)
    if not len(rms):
        return []
    return [int(h) for h in np.flatnonzero(dead_heads(rms).all(axis=0))]


def _unit_map(
    run: Any, steps: np.ndarray, step: int, name: str, signals: tuple[str, ...], what: str
) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """``signals[0]`` of ``name`` per unit near ``step`` (captures x units, at most
    ``DEAD_COLUMNS`` captures), the other signals beside it, and the window read."""
    i = int(np.searchsorted(steps, step, "right")) - 1
    empty = {
        "layer": name,
        "steps": steps_payload([]),
        "values": floats_payload(np.zeros((0, 0))),
        "units": 0,
    }
    if len(steps) == 0:
        return {**empty, "notice": "no per-unit statistics yet"}, None
    full = len(steps) <= DEAD_WINDOW
    if full:
        lo, hi = int(steps[0]), int(steps[-1])
    else:
        i = max(i, 0)
        lo = int(steps[max(0, i - DEAD_WINDOW + 1)])
        hi = int(steps[min(len(steps) - 1, i + DEAD_WINDOW // 10)])
    try:
        read = [run.unit_stats(name, s, step_range=(lo, hi)) for s in signals]
    except (ValueError, KeyError):
        return {**empty, "notice": f"no {what} recorded for {name!r}"}, None
    ust, values = read[0]
    window = None if full else (lo, hi)
    n, units = values.shape
    if n == 0:
        return {**empty, "notice": f"no per-unit statistics for {name!r} near this step"}, window
    cols = max(1, min(DEAD_COLUMNS, DEAD_CELLS // max(units, 1)))
    keep = evenly(np.arange(n), cols)
    text = count_text(len(keep), n, "captures")
    where = "" if full else f"steps {lo:,}..{hi:,}"
    notice = ", ".join(t for t in (where, text) if t)
    payload = {
        "layer": name,
        "steps": steps_payload(ust[keep]),
        "values": array_trait_payload(values[keep], dtype="<f4"),
        "units": int(units),
        "notice": notice,
    }
    for signal, (other_steps, other) in zip(signals[1:], read[1:], strict=True):
        if other.shape == values.shape and np.array_equal(other_steps, ust):
            payload[signal.removeprefix("head_")] = array_trait_payload(other[keep], dtype="<f4")
    return payload, window


class HistogramsAtStep:
    """A layer's histograms at a step (the latest at or before it), for the detail.

    Each is one index seek (``run.histogram_before``), however many histograms
    the layer has.
    """

    def __init__(self, run: Any) -> None:
        self._run = run

    def clear(self) -> None:
        """Nothing is cached: each read is one index seek."""

    def _at(self, layer: str, signal: str, step: int) -> tuple[int, Any, Any, int] | None:
        """``(step, edges, counts, nonfinite)`` of the latest histogram at or before ``step``."""
        try:
            hit = self._run.histogram_before(layer, signal, int(step))
            if hit is None:
                return None
            at, edges, counts = hit
            # the NaN/inf values are not in the bars: their count goes beside them
            rows = self._run.histogram_rows(layer, signal, steps=at)
        except (MissingStepError, ValueError):
            return None
        nonfinite = int(rows.nonfinite[0]) if len(rows.steps) else 0
        return at, edges, counts, nonfinite

    def detail_at(self, row: dict[str, Any], step: int) -> dict[str, Any]:
        """Activations and output gradient of ``row``'s layer, and its weight and weight
        gradient where it has a weight, at ``step``."""
        name = row["name"]
        weight = main_weight(row)
        wanted = [("activation", name, "activations"), ("gradient", name, "output gradient")]
        if weight:
            wanted += [("weight", weight, "weight"), ("gradient", weight, "weight gradient")]
        hists = []
        for signal, layer, label in wanted:
            hit = self._at(layer, signal, step)
            if hit is None:
                continue
            at, edges, counts, nonfinite = hit
            hists.append(
                {
                    "signal": signal,
                    "layer": layer,
                    "label": label,
                    "step": at,
                    "lo": float(edges[0]),
                    "hi": float(edges[-1]),
                    "counts": array_trait_payload(counts, dtype="<f8"),
                    "nonfinite": nonfinite,  # NaN/inf values, not in the bars
                }
            )
        return {"layer": name, "step": step, "histograms": hists}
