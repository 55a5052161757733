"""Signals by depth: how activations, output gradients and weights scale from layer to layer.

The depth checks compare the *main* layers of each watched model: modules that
own a weight of rank >= 2 (linear, convolution, recurrent kernels; embeddings
excepted: their output is a row of the weight, not a product with the input),
in the order the forward pass reached them.

- Activation scale: the root mean square of a layer's output over the batch
  (``norm / sqrt(count)``). An initialisation that preserves the signal keeps
  it within a small factor from the first layer to the last (a default PyTorch
  MLP of eight ReLU layers: 3x; Kaiming: 2x).
- Output gradient: the norm of the gradient of the loss with respect to a
  layer's output, summed over the batch (every layer of one step sees the same
  batch, so norms compare directly). This is the gradient that backpropagation
  carries toward the input; parameter gradients are it times the layer's
  input, so they can stay level by depth while activations grow one way and
  output gradients the other.
- Weight gain: ``rms(W) * sqrt(fan_in)``, the factor by which a layer scales
  the root mean square of a random input (1 for LeCun, sqrt(2) for Kaiming,
  1/sqrt(3) for PyTorch's default).

:class:`Trend` summarises a profile along depth.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nbviz.analysis.checks.model import ModelLayout, param_stats

#: Module types whose weight is a lookup table rather than a map of the input.
LOOKUP_TYPES = frozenset({"Embedding", "EmbeddingBag"})
#: Consecutive layers closer than this factor count as level (neither growing nor shrinking).
LEVEL = 1.2


def main_layers(lay: ModelLayout) -> dict[str, list[str]]:
    """``{model: [module, ...]}``: each model's main layers in forward order."""
    owners: dict[str, list[str]] = {}
    seen: set[str] = set()
    for p in lay.params_by_depth(matrices_only=True):
        module = p.module
        if module in seen or module not in lay.forward_order or is_lookup(lay, module):
            continue
        seen.add(module)
        owners.setdefault(lay.model_of(module), []).append(module)
    return {m: sorted(mods, key=lay.depth) for m, mods in owners.items()}


#: Module types that rescale their input: the gradient before them is relative to its scale.
NORMALISATION = frozenset(
    {
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "SyncBatchNorm",
        "LayerNorm",
        "GroupNorm",
        "InstanceNorm1d",
        "InstanceNorm2d",
        "InstanceNorm3d",
        "LocalResponseNorm",
        "RMSNorm",
    }
)


def is_lookup(lay: ModelLayout, module: str) -> bool:
    """Whether ``module``'s weight is a lookup table (an embedding, a library's included)."""
    return lay.kind_of(module) in LOOKUP_TYPES


#: The part of a type's name that says it normalises (``LlamaRMSNorm``, ``T5LayerNorm``):
#: libraries write their own normalisation layers rather than derive from torch's. A
#: frozen one (torchvision's ``FrozenBatchNorm2d``) is a fixed affine map: it does not.
_NORM_NAME = re.compile(r"(?<!Frozen)(RMS|Layer|Batch|Group|Instance)Norm")


def normalises(lay: ModelLayout, module: str) -> bool:
    """Whether ``module`` rescales its input: a ``torch.nn`` normalisation layer, one
    derived from it, or a library's own whose name says so (``LlamaRMSNorm``)."""
    return lay.kind_of(module) in NORMALISATION or bool(_NORM_NAME.search(lay.type_of(module)))


def feeds_normalisation(lay: ModelLayout, module: str) -> bool:
    """Whether the module the forward pass reached next after ``module`` normalises.

    The gradient with respect to a normalised output scales with the inverse of
    that output's scale (the network no longer depends on it), so its size by
    depth says nothing about exploding or vanishing. A module that holds
    ``module`` (a block, watched for its output) ends after it without being
    the next one reached: it is passed over.
    """
    order = lay.forward_order
    if module not in order:
        return False
    after = (n for n in order[order.index(module) + 1 :] if not module.startswith(n + "."))
    following = next(after, None)
    return following is not None and normalises(lay, following)


def same_shape(lay: ModelLayout, modules: list[str]) -> list[str]:
    """The largest set of ``modules`` whose outputs have one shape (per sample), in order.

    Gradient norms compare directly only between tensors of one size: pooling
    or a narrower head changes the norm by the change of size alone. With
    shapes unknown, all of them.
    """
    if not lay.shapes:
        return modules
    groups: dict[tuple[int, ...], list[str]] = {}
    for m in modules:
        if m in lay.shapes:
            groups.setdefault(lay.shapes[m], []).append(m)
    if not groups:
        return modules
    return max(groups.values(), key=len)


def _pivot(frame: pd.DataFrame, modules: list[str], value: pd.Series) -> pd.DataFrame:
    if frame.empty:
        return pd.DataFrame(columns=modules, dtype=np.float64)
    table = frame.assign(_v=value).pivot_table(
        index="step", columns="layer", values="_v", aggfunc="last"
    )
    table = table.reindex(columns=modules).astype(np.float64)
    return table.where(np.isfinite(table))


def activation_rms(run: object, modules: list[str]) -> pd.DataFrame:
    """Steps x modules: the root mean square of each module's output (NaN where unknown)."""
    frame = param_stats(run, "activation", modules)
    if frame.empty:
        return _pivot(frame, modules, pd.Series(dtype=np.float64))
    count = frame["count"].to_numpy(dtype=np.float64)
    rms = frame["norm"].to_numpy(dtype=np.float64) / np.sqrt(np.where(count > 0, count, np.nan))
    return _pivot(frame, modules, pd.Series(rms, index=frame.index))


def output_grad_norm(run: object, modules: list[str]) -> pd.DataFrame:
    """Steps x modules: the norm of the loss gradient with respect to each module's output."""
    frame = param_stats(run, "gradient", modules)
    return _pivot(frame, modules, frame["norm"] if not frame.empty else pd.Series(dtype=float))


def weight_gains(run: object, lay: ModelLayout, modules: list[str], step: int) -> dict[str, float]:
    """``{module: rms(W) * sqrt(fan_in)}`` of each module's weight at ``step`` (where
    recorded; the weight capture nearest it, see :func:`weight_capture_near`)."""
    names = [f"{m}.weight" for m in modules]
    frame = param_stats(run, "weight", names)
    at = weight_capture_near(run, step)
    frame = frame[frame["step"] == at] if not frame.empty else frame
    out = {}
    for row in frame.itertuples(index=False):
        p = lay.param(row.layer)
        if p is None or len(p.shape) < 2 or not row.count:
            continue
        fan_in = int(np.prod(p.shape[1:]))
        rms = float(row.norm) / math.sqrt(float(row.count))
        if math.isfinite(rms):
            out[p.module] = rms * math.sqrt(fan_in)
    return out


def weight_capture_near(run: Any, step: int) -> int | None:
    """The weight capture for ``step``: the latest at or before it, else the first after.

    The weights' statistics come with the distributions (every ``hist_every`` steps),
    so a step captured between two has none of its own; a step moves them little.
    """
    steps = np.asarray(run.steps("weight"), dtype=np.int64)
    if not len(steps):
        return None
    return int(steps[max(int(np.searchsorted(steps, step, "right")) - 1, 0)])


@dataclass(frozen=True)
class Trend:
    """How a positive profile along depth changes from its first layer to its last.

    ``total``: last / first; ``per_layer``: the geometric mean factor per step of
    depth; ``consistency``: the fraction of consecutive steps that move the same
    way as the total (a level step, within :data:`LEVEL`, counts for neither);
    ``jump``: the index of the step that moves most (the layer entered there).
    """

    total: float
    per_layer: float
    consistency: float
    jump: int
    jump_share: float

    @property
    def geometric(self) -> bool:
        """Most steps move the same way: the whole stack scales, not one layer."""
        return self.consistency >= 0.6


def trend(values: np.ndarray) -> Trend | None:
    """The :class:`Trend` of a profile (None with fewer than three finite positive values)."""
    v = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(v) & (v > 0)
    v = v[keep]
    if len(v) < 3:
        return None
    logs = np.log(v)
    steps = np.diff(logs)
    total = float(logs[-1] - logs[0])
    direction = np.sign(total)
    moving = np.abs(steps) > math.log(LEVEL)
    agree = (np.sign(steps) == direction) & moving
    consistency = float(agree.sum() / len(steps)) if direction != 0 else 0.0
    jump = int(np.argmax(np.abs(steps)))
    share = float(abs(steps[jump]) / np.abs(steps).sum()) if np.abs(steps).sum() > 0 else 0.0
    return Trend(
        total=float(math.exp(total)),
        per_layer=float(math.exp(total / len(steps))),
        consistency=consistency,
        jump=jump,
        jump_share=share,
    )
