"""The LayerBrowser's table: one row per module, and three signs of health per row.

A row is a module of the model summary (qualified name, type, output shape,
parameter count) or, without a summary, a module the probe recorded. Its signs
of health are the activation zero fraction, the gradient norm (of the layer's
weight, else of its output) and the update/weight ratio: as sparklines over
about ``SPARK_POINTS`` captures, and as the value at the linked step. The zero
fraction is measured with the distributions (:func:`metric_source`), the others
at every capture. Beside
each value goes the count of non-finite values it leaves out, so that a layer
full of NaN reads as non-finite, never as a gradient norm of 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.param_names import module_of, short_name
from nbviz.widgets.sampling import count_text, evenly
from nbviz.widgets.wire import floats_payload, steps_payload

__all__ = [
    "METRICS",
    "SPARK_POINTS",
    "head_layers",
    "layer_rows",
    "metric_source",
    "recorded_layers",
    "sparklines",
    "values_at",
    "with_head_rows",
]

SPARK_POINTS = 100

#: The three health signs: name -> (signal, column, which layer row provides it)
METRICS = {
    "zero_frac": ("activation", "zero_frac", "module"),
    "grad_norm": ("gradient", "norm", "weight_or_module"),
    "update_ratio": ("update", "rel", "weight"),
}


def _shape_text(shape: Any) -> str:
    if shape is None or (isinstance(shape, float) and np.isnan(shape)):
        return ""
    if isinstance(shape, (list, tuple)):
        return "[" + ", ".join(str(d) for d in shape) + "]"
    return str(shape)


def recorded_layers(run: Any, index: Any) -> dict[str, set[str]]:
    """Layer names with stats at the latest capture of each signal (cheap: one step each).

    Detail queries only ask for pairs that exist (asking for a missing one is slow).
    """
    out: dict[str, set[str]] = {}
    for signal in ("activation", "gradient", "weight", "update"):
        steps = index.steps(signal)
        names: set[str] = set()
        if len(steps):
            names = set(run.stats(signal, steps=int(steps[-1]))["layer"].tolist())
        out[signal] = names
    return out


def _row(name: str, own: list[str], rec: dict[str, Any] | None, recorded: set[str]) -> dict:
    rec = rec or {}
    return {
        "name": name,
        "type": str(rec.get("type") or ""),
        "depth": int(rec.get("depth") or 1),
        "shape": _shape_text(rec.get("shape")),
        "params": int(rec.get("params") or 0),
        "watched": bool(rec.get("watched", True)),
        "note": str(rec.get("note") or ""),
        "own_params": own,
        "recorded": name in recorded,
    }


def layer_rows(
    frame: Any,
    params: list[str],
    recorded: set[str],
    shapes: dict[str, list[int]] | None = None,
) -> list[dict[str, Any]]:
    """The table's rows, from the model summary ``frame`` (``run.layers()``).

    ``params`` are the parameter names the probe watched (``shapes`` their
    shapes) and ``recorded`` the names with stats. Without a summary, the modules
    the probe recorded. A parameter of the model itself (``nn.Parameter`` on the
    root module: a scale, a class token) has no module of its own: it gets a row.
    """
    rows = []
    for rec in frame.to_dict("records"):
        name = str(rec.get("name") or "")
        if not name:
            continue  # the root module: its numbers are the model's
        own = [p for p in params if module_of(p) == name] or sorted(
            p for p in recorded if module_of(p) == name and p not in frame["name"].values
        )
        rows.append(_row(name, own, rec, recorded))
    if not rows:

        def is_param(n: str) -> bool:
            owner, _, leaf = n.rpartition(".")
            return n in params or (owner in recorded and leaf in ("weight", "bias"))

        for name in sorted(n for n in recorded if not is_param(n)):
            own = sorted(p for p in recorded if module_of(p) == name and is_param(p))
            rows.append(_row(name, own, None, recorded))
    if rows or recorded:
        taken = {r["name"] for r in rows}
        for name in params:
            if "." not in name and name not in taken:
                shape = (shapes or {}).get(name)
                size = int(np.prod(shape)) if shape is not None else 0
                rec = {"type": "Parameter", "depth": 1, "shape": shape, "params": size}
                rows.append(_row(name, [name], rec, recorded))
    return rows


def _count(value: Any) -> int | None:
    """``value`` as a count (a non-negative int, not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        return None
    return int(value)


def head_layers(heads: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The well-formed ``<module>/heads`` entries of the meta ``heads`` (name -> module,
    heads, head size), and in words what was left out as malformed (a meta that is not
    ``{"layers": {name: {...}}}``, an entry without a positive head count)."""
    if heads is None:
        return {}, []
    if not isinstance(heads, dict):
        return {}, [f"the meta 'heads' is a {type(heads).__name__}, not a mapping: left out"]
    layers = heads.get("layers")
    if layers is None:
        return {}, []
    if not isinstance(layers, dict):
        return {}, [
            f"the meta 'heads' layers are a {type(layers).__name__}, not a mapping: left out"
        ]
    out: dict[str, dict[str, Any]] = {}
    bad: list[str] = []
    for name, info in layers.items():
        if not isinstance(info, dict):
            bad.append(str(name))
            continue
        n, size = _count(info.get("heads")), _count(info.get("head_dim", 0))
        if not n or size is None:
            bad.append(str(name))
            continue
        module = info.get("module")
        out[str(name)] = {"module": module if isinstance(module, str) else "", "heads": n}
        out[str(name)]["head_dim"] = size
    notes = []
    if bad:
        shown = ", ".join(repr(b[:80]) for b in bad[:3]) + (" ..." if len(bad) > 3 else "")
        notes.append(
            f"{len(bad)} malformed entr{'y' if len(bad) == 1 else 'ies'} of the meta 'heads' "
            f"left out ({shown}): each needs a positive head count"
        )
    return out, notes


def with_head_rows(rows: list[dict[str, Any]], heads: Any) -> tuple[list[dict[str, Any]], str]:
    """``rows`` with a row for each ``<module>/heads`` pseudo-layer of the meta ``heads``
    (per-head statistics of attention outputs), right after its module's row; and what
    of the meta was malformed and left out, in words (empty when nothing was)."""
    layers, notes = head_layers(heads)
    if not layers:
        return rows, "; ".join(notes)
    by_module: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for name, info in layers.items():
        by_module.setdefault(info["module"].partition("#")[0], []).append((name, info))
    out: list[dict[str, Any]] = []
    placed: set[str] = set()

    def head_row(name: str, info: dict[str, Any], depth: int) -> dict[str, Any]:
        n, size = info["heads"], info["head_dim"]
        rec = {
            "type": "heads",
            "depth": depth,
            "shape": f"{n} \u00d7 {size}",
            "params": 0,
            "note": "per-head output statistics of the attention call in "
            f"{info['module'] or 'the model'}",
        }
        row = _row(name, [], rec, set())
        row["heads"] = n
        row["recorded"] = True  # its statistics are unit_stats rows
        return row

    for row in rows:
        out.append(row)
        for name, info in sorted(by_module.get(row["name"], [])):
            out.append(head_row(name, info, row["depth"] + 1))
            placed.add(name)
    for name, info in sorted(layers.items()):
        if name not in placed:
            out.append(head_row(name, info, 1))
    return out, "; ".join(notes)


def is_parameter_row(row: dict[str, Any]) -> bool:
    """A row of a parameter of the model itself (not a module)."""
    return row["own_params"] == [row["name"]]


def _metric_layer(row: dict[str, Any], metric: str) -> str | None:
    """Which layer or parameter gives ``row`` its value of ``metric`` (None: none)."""
    _signal, _column, which = METRICS[metric]
    if is_parameter_row(row):  # its own stats: no output, so no activations
        return None if which == "module" else row["name"]
    weight = main_weight(row)
    if which == "module":
        return row["name"]
    if which == "weight":
        return weight
    return weight or row["name"]


def main_weight(row: dict[str, Any]) -> str | None:
    """The parameter that stands for a layer's weights: ``<layer>.weight``, else its first
    own parameter named as a weight (attention's ``in_proj_weight``, a recurrent layer's
    ``weight_ih_l0``), else its one own parameter that is not a bias; None if none."""
    own = row["own_params"]
    if f"{row['name']}.weight" in own:
        return f"{row['name']}.weight"
    leaves = [(p, short_name(p)) for p in own]
    named = [p for p, leaf in leaves if "weight" in leaf]
    if named:
        return named[0]
    others = [p for p, leaf in leaves if "bias" not in leaf]
    return others[0] if len(others) == 1 else None


def metric_source(index: Any, metric: str) -> str:
    """Where the steps ``metric`` has values at are listed (a key of ``index.steps``):
    its signal's captures; for the zero fraction, which the probe measures with the
    distributions, the activations' histograms (a run without them, or with histograms
    alone such as an imported one: the captures)."""
    signal = METRICS[metric][0]
    source = f"histograms:{signal}"
    if metric == "zero_frac" and len(index.steps(signal)) and len(index.steps(source)):
        return source
    return signal


def sparklines(run: Any, index: Any, rows: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """Per metric, sampled steps and a [rows, steps] matrix; and what was sampled, in words."""
    spark: dict[str, Any] = {}
    shown = 0
    total = 0
    for metric, (signal, column, _which) in METRICS.items():
        steps = index.steps(metric_source(index, metric))
        sample = evenly(steps, SPARK_POINTS)
        matrix = np.full((len(rows), len(sample)), np.nan)
        bad = np.zeros((len(rows), len(sample)))
        if len(sample):
            frame = run.stats(signal, steps=[int(s) for s in sample])
            col = {s: j for j, s in enumerate(sample.tolist())}
            by_layer = {la: i for i, la in enumerate(_metric_layer(r, metric) for r in rows)}
            li = frame["layer"].map(by_layer)
            ok = li.notna().to_numpy()
            if ok.any():
                rows_i = li[ok].to_numpy(dtype=np.int64)
                cols_j = frame["step"][ok].map(col).to_numpy(dtype=np.int64)
                matrix[rows_i, cols_j] = frame[column][ok].to_numpy(dtype=np.float64)
                bad[rows_i, cols_j] = frame["nonfinite"][ok].to_numpy(dtype=np.float64)
        spark[metric] = {
            "steps": steps_payload(sample),
            "values": floats_payload(matrix),
            "nonfinite": floats_payload(bad),
        }
        shown = max(shown, len(sample))
        total = max(total, len(steps))
    notice = f"sparklines: {count_text(shown, total, 'captures')}" if shown < total else ""
    return spark, notice


def values_at(run: Any, index: Any, rows: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """Per metric, the capture step shown, one value per row (NaN: none) and the count of
    non-finite values behind it (left out of the value; all of them when it is NaN; for
    a layer whose value is its main weight's and that weight is finite, those of its
    other parameters: a layer holding NaN never reads as finite)."""
    out: dict[str, Any] = {}
    for metric, (signal, column, _which) in METRICS.items():
        at = index.capture_at(metric_source(index, metric), step)
        values = np.full(len(rows), np.nan)
        bad = np.zeros(len(rows))
        if at is not None:
            frame = run.stats(signal, steps=[at])
            lookup = dict(zip(frame["layer"], frame[column].to_numpy(dtype=np.float64)))
            counts = dict(zip(frame["layer"], frame["nonfinite"].to_numpy(dtype=np.float64)))
            for i, row in enumerate(rows):
                name = _metric_layer(row, metric)
                if name in lookup:
                    values[i] = lookup[name]
                    bad[i] = counts[name]
                    if name != row["name"] and not bad[i]:  # the main weight's value is
                        # finite: a NaN/Inf in another parameter (a bias) is still counted
                        others = (counts.get(p, 0.0) for p in row["own_params"] if p != name)
                        bad[i] = float(np.nansum(list(others)))
        out[metric] = {
            "step": -1 if at is None else at,
            "values": floats_payload(values),
            "nonfinite": floats_payload(bad),
        }
    return out
