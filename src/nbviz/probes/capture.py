"""One sample's activations through the layers of a model.

:func:`capture_sample` runs one forward pass of a single sample with temporary
forward hooks and returns a summary per layer (in forward order): the output's
shape and statistics, each unit's (channel's) mean, and for spatial outputs
(convolutions) the feature maps themselves, one per channel. The hooks are
global state on someone else's model: they are removed in ``finally``, the model
runs in eval mode under ``torch.no_grad()`` and its training flag is restored,
so nothing about the model changes.

:func:`capture_rows` turns a capture into rows of the run store's ``captures``
table (what ``run.capture`` records, for the SampleGallery's detail): per layer
at most ``MAX_UNITS`` unit means (float32) and ``MAX_MAPS`` feature maps of at
most ``MAX_MAP_SIDE`` squared pixels (float16), so one capture stays well under
a megabyte per layer whatever the model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from nbviz.probes.outputs import find_tensor
from nbviz.probes.select import LayerPattern, select_modules, unit_dim

__all__ = ["LayerActivation", "capture_rows", "capture_sample"]

#: At most this many feature maps are kept per layer (the first channels).
MAX_MAPS = 64
#: Feature maps larger than this on a side are average-pooled down to it.
MAX_MAP_SIDE = 32
#: At most this many per-unit values are kept per layer.
MAX_UNITS = 4096


@dataclass
class LayerActivation:
    """What one layer output for one sample."""

    name: str
    type: str
    shape: tuple[int, ...]
    """The output's shape without the batch dimension."""
    mean: float
    std: float
    min: float
    max: float
    zero_frac: float
    nonfinite: int
    units: np.ndarray | None
    """float32 per-unit (channel) mean over positions; the first ``MAX_UNITS``."""
    maps: np.ndarray | None
    """float32 ``(channels, H, W)`` feature maps of a spatial output, else None."""
    n_units: int
    """Units (channels) the layer has; ``units``/``maps`` may hold fewer."""
    note: str = ""


def _summarise(name: str, module: nn.Module, t: torch.Tensor) -> LayerActivation:
    x = t.detach()[0].float().cpu()
    finite = torch.isfinite(x)
    nonfinite = int((~finite).sum())
    vals = x[finite]
    if vals.numel():
        mean, std = float(vals.mean()), float(vals.std(unbiased=False))
        lo, hi = float(vals.min()), float(vals.max())
        zero = float((vals == 0).float().mean())
    else:
        mean = std = lo = hi = zero = float("nan")
    shape = tuple(int(d) for d in x.shape)
    clean = torch.where(finite, x, torch.zeros_like(x))
    ud = unit_dim(module, t.dim())
    units = maps = None
    n_units = 0
    notes = []
    if ud is not None:
        per = clean.movedim(ud - 1, 0) if x.dim() >= 1 else clean.reshape(1)
        n_units = int(per.shape[0])
        units = per.reshape(n_units, -1).mean(dim=1)[:MAX_UNITS].numpy().astype(np.float32)
        if n_units > MAX_UNITS:
            notes.append(f"first {MAX_UNITS} of {n_units} units")
        if t.dim() == 4:  # (batch, channels, H, W): feature maps
            fm = clean[:MAX_MAPS]
            h, w = fm.shape[-2:]
            if max(h, w) > MAX_MAP_SIDE:
                fm = nn.functional.adaptive_avg_pool2d(
                    fm[None], (min(h, MAX_MAP_SIDE), min(w, MAX_MAP_SIDE))
                )[0]
                notes.append(f"maps pooled from {h}x{w}")
            maps = np.ascontiguousarray(fm.numpy(), dtype=np.float32)
            if n_units > MAX_MAPS:
                notes.append(f"first {MAX_MAPS} of {n_units} maps")
    return LayerActivation(
        name=name,
        type=type(module).__name__,
        shape=shape,
        mean=mean,
        std=std,
        min=lo,
        max=hi,
        zero_frac=zero,
        nonfinite=nonfinite,
        units=units,
        maps=maps,
        n_units=n_units,
        note="; ".join(notes),
    )


def _as_batch(sample: Any, device: torch.device) -> Any:
    if isinstance(sample, np.ndarray):
        sample = torch.from_numpy(np.ascontiguousarray(sample))
    if isinstance(sample, torch.Tensor):
        return sample.unsqueeze(0).to(device)
    if isinstance(sample, dict):
        return {k: _as_batch(v, device) for k, v in sample.items()}
    if isinstance(sample, tuple | list):
        return type(sample)(_as_batch(v, device) for v in sample)
    raise TypeError(
        f"capture_sample: the sample must be a tensor, an array, or a dict/tuple of them; "
        f"got {type(sample).__name__}"
    )


def capture_sample(
    model: nn.Module,
    sample: Any,
    layers: LayerPattern | list[LayerPattern] | None = None,
) -> tuple[list[LayerActivation], torch.Tensor | None]:
    """One forward pass of ``sample`` (one input, without the batch dimension).

    Returns the per-layer summaries in the order the layers ran, and the model's
    output for the sample (its first float tensor, batch dimension dropped; None
    if it returned none). ``layers`` chooses modules as ``run.watch`` does (default:
    every leaf module except pass-through ones, modules with parameters of their own,
    and the blocks of a stack of repeated blocks). A layer whose output holds no
    float tensor is left out. The model is left as it was.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"capture_sample: model must be a torch.nn.Module, got {type(model).__name__}"
        )
    chosen = select_modules(model, layers, max_layers=None).modules
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    batch = _as_batch(sample, device)
    out: list[LayerActivation] = []
    handles = []

    def hook_for(name: str) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            _, t = find_tensor(output)
            if t is not None and t.dim() > 0 and t.shape[0] == 1:
                out.append(_summarise(name, module, t))

        return hook

    modes = [(m, m.training) for m in model.modules()]
    try:
        for name, module in chosen:
            handles.append(module.register_forward_hook(hook_for(name)))
        model.eval()
        with torch.no_grad():
            result = model(batch)
    finally:
        for h in handles:
            h.remove()
        for m, training in modes:  # each module's own flag (a frozen BatchNorm stays in eval)
            m.training = training
    _, logits = find_tensor(result)
    if logits is not None and logits.dim() >= 1 and logits.shape[0] == 1:
        logits = logits.detach()[0].float().cpu()
    return out, logits


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def capture_rows(
    split: str, id: int, step: int, layers: list[LayerActivation], prefix: str = ""
) -> list[tuple[Any, ...]]:
    """Rows of the ``captures`` table (its column order) for one sample's capture.

    ``prefix`` starts each layer name (the ``name=`` of the probe watching the model).
    """
    rows = []
    for position, a in enumerate(layers):
        summary = {
            "shape": list(a.shape),
            "mean": _finite(a.mean),
            "std": _finite(a.std),
            "min": _finite(a.min),
            "max": _finite(a.max),
            "zero_frac": _finite(a.zero_frac),
            "nonfinite": a.nonfinite,
            "n_units": a.n_units,
            "note": a.note,
        }
        units = None if a.units is None else np.ascontiguousarray(a.units, dtype="<f4").tobytes()
        maps = maps_shape = None
        if a.maps is not None:
            # float16 keeps a map's picture; values beyond its range are clipped
            fm = np.clip(a.maps, -65504.0, 65504.0).astype("<f2")
            maps, maps_shape = fm.tobytes(), json.dumps(list(fm.shape))
        rows.append(
            (
                split,
                int(id),
                int(step),
                position,
                prefix + a.name,
                a.type,
                json.dumps(summary),
                units,
                maps,
                maps_shape,
            )
        )
    return rows
