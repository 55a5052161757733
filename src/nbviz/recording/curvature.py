"""``Run.curvature``: the curvature test on one batch, stored as scalars at a step.

The test itself is :func:`nbviz.probes.curvature.curvature`: the top Hessian
eigenvalue of the training loss (the optimizer's preconditioned one for Adam
and RMSprop) by power iteration on Hessian-vector products, and the
optimizer's stability limit. It is stored as the scalars ``sharpness`` and
``stability_limit`` at the step, which the diagnosis reads
(:mod:`nbviz.analysis.checks.learning_rate`) and the loss curves draw, and the
meta ``curvature`` says how the last one was made.

It costs a forward and a few dozen backwards on the batch, so it runs only
when called: on a sparse schedule of the loop's choosing (say every few
hundred steps) or once where the loss misbehaves. The probes watching the
model are paused meanwhile (the test's forward and backward are not a training
step), and the model's buffers and the random state are left as they were.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nbviz import records as rec

if TYPE_CHECKING:  # torch is imported where a model is run
    from torch import nn

    from nbviz.probes.curvature import Curvature

__all__ = ["record_curvature"]


def record_curvature(
    run: Any,
    model: nn.Module,
    batch: Any,
    loss_fn: Callable[..., Any],
    *,
    step: Any,
    optimizer: Any,
    options: dict[str, Any],
) -> Curvature:
    """Run the test on ``batch`` (``(inputs, targets)``) and store it at ``step``."""
    import contextlib
    import time

    from torch import nn

    from nbviz.probes.curvature import curvature

    if not isinstance(model, nn.Module):
        raise TypeError(f"curvature: model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(loss_fn):
        raise TypeError(f"curvature: loss_fn must be callable (outputs, targets), got {loss_fn!r}")
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise ValueError(
            "curvature: batch must be (inputs, targets), the loss being loss_fn(model(inputs), "
            f"targets); got {type(batch).__name__}"
            + (f" of {len(batch)} items" if isinstance(batch, (tuple, list)) else "")
        )
    step = rec.check_step(step, "curvature")
    inputs, targets = batch
    watching = [p for p in run._probes if p.model is model]
    if optimizer is None:
        optimizer = next((p._optimizer for p in watching if p._optimizer is not None), None)
    with contextlib.ExitStack() as stack:
        for probe in watching:
            stack.enter_context(probe.paused())
        result = curvature(
            model, lambda: loss_fn(model(inputs), targets), optimizer=optimizer, **options
        )
    now = time.time()
    rows = [("sharpness", step, float(result.sharpness), now)]
    if result.limit is not None:
        rows.append(("stability_limit", step, float(result.limit), now))
    run._writer.insert("scalars", rows)
    run._writer.set_meta("curvature", {"step": step, **result.to_dict()})
    run._writer.flush()
    return result
