"""``Run.capture``: one sample's activations through the layers, as ``captures`` rows.

The forward pass and its summary are :mod:`nbviz.probes.capture`'s; here the
arguments are checked and the layers named as the model's probe names them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from nbviz import records as rec

if TYPE_CHECKING:  # torch is imported where a model is run
    from torch import nn

__all__ = ["capture_rows"]


def capture_rows(
    model: nn.Module,
    sample: Any,
    id: Any,
    *,
    split: Any,
    step: Any,
    layers: Any,
    prefix: str,
    latest: int,
) -> tuple[int, list[tuple]]:
    """``(step, rows)`` of one capture; ``step=None`` means ``latest``.

    ``prefix`` is the layer-name prefix of the model's probe (its ``name=``), so
    that a capture names layers as the rest of the run does.
    """
    from nbviz.probes import capture

    split = rec.check_split(split, "capture")
    if isinstance(id, bool) or not isinstance(id, (int, np.integer)):
        raise TypeError(f"capture: id must be an int sample id, got {id!r}")
    step = rec.check_step(latest if step is None else step, "capture")
    acts, _ = capture.capture_sample(model, sample, layers)
    if not acts:
        raise ValueError(
            f"capture: no module of the {type(model).__name__} chosen by layers={layers!r} "
            "returned a tensor for this sample (a model without submodules has no layers "
            "to show); pass layers=... naming modules that do"
        )
    return step, capture.capture_rows(split, int(id), step, acts, prefix)
