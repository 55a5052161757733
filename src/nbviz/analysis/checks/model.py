"""The watched model's structure as a run recorded it: modules, parameters, depth.

Checks speak of modules (``model.named_modules()`` names), while parameter
gradients, weights and updates are stored under parameter names
(``"fc1.weight"``). This maps one onto the other and orders both by depth, the
order in which the forward pass reached each module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nbviz.param_names import module_of


@dataclass(frozen=True)
class Param:
    name: str
    module: str
    shape: tuple[int, ...]
    requires_grad: bool


@dataclass(frozen=True)
class ModelLayout:
    """Modules in forward order, their types, and the watched parameters."""

    forward_order: list[str]
    types: dict[str, str]
    params: list[Param]
    signals: tuple[str, ...]
    every: int | None
    #: the names of the run's probes (``run.watch(..., name=)``): "" for one unnamed
    models: tuple[str, ...] = ("",)
    #: each module's output shape without the batch dimension, where recorded
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: the nearest ``torch.nn`` layer class of each module whose type derives from one
    bases: dict[str, str] = field(default_factory=dict)

    def depth(self, module: str) -> int:
        """Position of ``module`` in the forward pass (unknown modules after all known ones)."""
        try:
            return self.forward_order.index(module)
        except ValueError:
            return len(self.forward_order)

    def type_of(self, module: str) -> str:
        return self.types.get(module, "?")

    def kind_of(self, module: str) -> str:
        """What ``module`` is to the checks: the ``torch.nn`` layer its type derives from
        (``"Embedding"`` for a library's ``ScaledWordEmbedding``), else its type."""
        return self.bases.get(module) or self.type_of(module)

    def label(self, module: str) -> str:
        """``'name' (Type)`` for a message."""
        return f"'{module}' ({self.type_of(module)})" if module else "the model"

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def model_of(self, name: str) -> str:
        """Which watched model a module or parameter belongs to ("" for an unnamed one)."""
        owners = [m for m in self.models if m and name.startswith(m + ".")]
        return max(owners, key=len, default="")  # "G.ema" before "G"

    def params_by_depth(self, matrices_only: bool = False) -> list[Param]:
        """Parameters ordered input to output (definition order where depth is unknown).

        ``matrices_only`` keeps weights of rank >= 2 (linear and convolution
        kernels): biases and norm scales start at 0 or 1 and so have gradient to
        weight ratios on another scale.
        """
        chosen = [p for p in self.params if not matrices_only or len(p.shape) >= 2]
        known = all(p.module in self.forward_order for p in chosen)
        if not known:
            return chosen
        return sorted(chosen, key=lambda p: (self.depth(p.module), self.params.index(p)))


def layout(run: Any) -> ModelLayout | None:
    """The layout of the model a run watched, or None when no probe wrote it."""
    probe = run.meta("probe")
    if not probe:
        return None
    model = run.meta("model") or {}
    modules = model.get("modules", [])
    order = list(model.get("forward_order") or [m["name"] for m in modules if m.get("watched")])
    types = {m["name"]: m.get("type", "?") for m in modules}
    params = [
        Param(
            name=p["name"],
            module=module_of(p["name"]),
            shape=tuple(p.get("shape", ())),
            requires_grad=bool(p.get("requires_grad", True)),
        )
        for p in probe.get("params", [])
    ]
    return ModelLayout(
        forward_order=order,
        types=types,
        params=params,
        signals=tuple(probe.get("signals", ())),
        every=probe.get("every"),
        models=tuple(p.get("name", "") for p in probe.get("probes", [])) or ("",),
        shapes={
            m["name"]: tuple(int(d) for d in m["shape"][1:])
            for m in modules
            if isinstance(m.get("shape"), list) and len(m["shape"]) >= 1
        },
        bases={m["name"]: m["base"] for m in modules if isinstance(m.get("base"), str)},
    )


#: Captures of a signal read whole; of a longer run the checks read this many of them.
WHOLE_CAPTURES = 2048


def capture_steps(run: Any, signal: str) -> list[int] | None:
    """The captures of ``signal`` the checks read: None for every one (at most
    :data:`WHOLE_CAPTURES`), else the first and last quarter of that many and evenly
    spaced ones between, so that a check reads a bounded number of exact rows of a
    long run (its start, its end, and its course at a coarser spacing).
    """
    steps = np.asarray(run.steps(signal), dtype=np.int64)
    if len(steps) <= WHOLE_CAPTURES:
        return None
    ends = WHOLE_CAPTURES // 4
    middle = steps[ends:-ends]
    pick = np.linspace(0, len(middle) - 1, WHOLE_CAPTURES - 2 * ends).round().astype(np.int64)
    return np.concatenate([steps[:ends], np.unique(middle[pick]), steps[-ends:]]).tolist()


def layer_stats(
    run: Any, signal: str, layer: str, steps: list[int] | None | bool = True
) -> pd.DataFrame:
    """One layer's ``signal`` stats rows at the captures the checks read (:func:`capture_steps`;
    pass ``steps`` to reuse them: None reads every row).
    """
    if steps is True:
        steps = capture_steps(run, signal)
    if steps is None:
        return run.stats(signal, layer=layer)
    return run.stats(signal, layer=layer, steps=steps)


def unit_values(run: Any, layer: str, signal: str) -> tuple[np.ndarray, np.ndarray]:
    """``run.unit_stats(layer, signal)`` at the captures the checks read.

    A probe records per-unit values at every activation capture: those of
    :func:`capture_steps` are read. A run that recorded them on another schedule
    (fewer than half of those captures hold them) is read whole.
    """
    steps = capture_steps(run, "activation")
    if steps is not None:
        got = run.unit_stats(layer, signal, steps=steps)
        if len(got[0]) >= len(steps) // 2:
            return got
    return run.unit_stats(layer, signal)


def param_stats(run: Any, signal: str, names: Sequence[str]) -> pd.DataFrame:
    """The ``signal`` stats rows of the named parameters only (one index scan each), at
    the captures the checks read (:func:`capture_steps`: all of them on a short run).

    Names without rows are left out; an empty frame when none has any.
    """
    recorded = set(run.recorded_layers(signal))
    steps = capture_steps(run, signal)
    frames = [layer_stats(run, signal, name, steps) for name in names if name in recorded]
    frames = [f for f in frames if len(f)]
    if not frames:
        return run.stats(signal, steps=[])
    return pd.concat(frames, ignore_index=True)
