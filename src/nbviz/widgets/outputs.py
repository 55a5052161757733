"""What a model that is not a classifier gave for one sample, as the gallery shows it.

``run.evaluate(..., loss_fn=...)`` keeps the outputs and targets that are small
enough to show (``run.outputs(step)``). A sample's are shown as panels beside
the sample itself:

- an image-shaped output (``(H, W)``, ``(1, H, W)`` or ``(3, H, W)``) as an image,
  on the same grey scale as its target, so a reconstruction is seen beside its
  input (an autoencoder's target is its input, so only the output is added);
- per-pixel class scores ``(C, H, W)`` with a ``(H, W)`` target (a segmentation) as
  two class maps, the target's and the predicted one (argmax), in one palette;
- anything else (a regression's value or values, multi-label logits) as numbers:
  ``target`` and ``output``, the first values and how many there are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.records import png_thumbnail
from nbviz.widgets.per_evaluation import PerEvaluation
from nbviz.widgets.wire import array_trait_payload

__all__ = ["SampleOutputs", "output_panels"]

# class colours of a class map (the first ten of the views' categorical palette)
_PALETTE = np.array(
    [
        [31, 119, 180],
        [255, 127, 14],
        [44, 160, 44],
        [214, 39, 40],
        [148, 103, 189],
        [140, 86, 75],
        [227, 119, 194],
        [127, 127, 127],
        [188, 189, 34],
        [23, 190, 207],
    ],
    dtype=np.uint8,
)
_MIN_SIDE = 4  # an image is at least 4x4 pixels; smaller arrays are numbers


def _image(shape: tuple[int, ...]) -> bool:
    """Whether one sample's array of ``shape`` is an image: (H, W), (1, H, W), (3, H, W)."""
    if len(shape) == 2:
        return min(shape) >= _MIN_SIDE
    return len(shape) == 3 and shape[0] in (1, 3) and min(shape[1:]) >= _MIN_SIDE


def _grey(arr: np.ndarray, lo: float, hi: float) -> bytes:
    """A PNG of ``arr`` with ``lo``..``hi`` as black..white (non-finite black)."""
    f = np.asarray(arr, dtype=np.float64)
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    f = np.where(np.isfinite(f), (f - lo) * scale, 0.0)
    return png_thumbnail(np.clip(np.rint(f), 0, 255).astype(np.uint8))[0]


def _range(arr: np.ndarray) -> tuple[float, float]:
    f = np.asarray(arr, dtype=np.float64)
    finite = f[np.isfinite(f)]
    return (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)


def _class_map(classes: np.ndarray) -> bytes:
    """A PNG of a ``(H, W)`` map of class indices, one palette colour per class."""
    idx = np.asarray(classes, dtype=np.int64) % len(_PALETTE)
    return png_thumbnail(_PALETTE[idx])[0]


def _values(name: str, arr: np.ndarray, n_values: int) -> dict[str, Any]:
    flat = np.asarray(arr, dtype=np.float64).ravel()
    return {
        "name": name,
        "kind": "values",
        "values": array_trait_payload(flat[:n_values]),
        "size": int(flat.size),
    }


def output_panels(
    output: np.ndarray | None,
    target: np.ndarray | None,
    targets_from: str,
    n_values: int = 4,
) -> list[dict[str, Any]]:
    """The panels of one sample: ``{name, kind: "image", png}`` or ``{name, kind: "values",
    values, size}``, target first (none for an autoencoder's, which is the input shown)."""
    panels: list[dict[str, Any]] = []
    show_target = target is not None and targets_from != "inputs"
    if output is not None and target is not None and output.ndim == 3 and output.shape[0] > 1:
        if target.shape == output.shape[1:] and target.dtype.kind in "iub" and _image(target.shape):
            return [
                {"name": "target", "kind": "image", "png": _class_map(target)},
                {"name": "output", "kind": "image", "png": _class_map(output.argmax(axis=0))},
            ]
    if output is not None and _image(output.shape):
        same = target is not None and target.shape == output.shape
        lo, hi = _range(target if same else output)
        if show_target and same:
            panels.append({"name": "target", "kind": "image", "png": _grey(target, lo, hi)})
        elif show_target:
            panels.append(_target_panel(target, n_values))
        panels.append({"name": "output", "kind": "image", "png": _grey(output, lo, hi)})
        return panels
    if show_target:
        panels.append(_target_panel(target, n_values))
    if output is not None:
        panels.append(_values("output", output, n_values))
    return panels


def _target_panel(target: Any, n_values: int) -> dict[str, Any]:
    if _image(target.shape):
        lo, hi = _range(target)
        return {"name": "target", "kind": "image", "png": _grey(target, lo, hi)}
    return _values("target", target, n_values)


class SampleOutputs(PerEvaluation):
    """The outputs kept at a few evaluations, read once each, for the panels of samples."""

    def _read(self, split: str, at: int) -> Any:
        got = self._run.outputs(at, split=split)
        where = {int(i): k for k, i in enumerate(got.ids)} if got is not None else {}
        return got, where

    def panels(self, split: str, at: int | None, id: int, n_values: int = 4) -> list[dict]:
        """Sample ``id``'s panels at the evaluation ``at`` (none where nothing was kept)."""
        if at is None:
            return []
        got, where = self._kept(split, int(at))
        if got is None or id not in where:
            return []
        k = where[id]
        output = got.outputs[k] if got.outputs is not None else None
        target = got.targets[k] if got.targets is not None else None
        return output_panels(output, target, got.targets_from, n_values)
