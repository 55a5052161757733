"""Causes and consequences: which finding follows from which.

One problem shows up as several findings: a learning rate past the stable
size makes the loss blow up, the blow-up kills ReLUs, the dead ReLUs stop the
gradient, and the layers around them stop learning. Each finding says what it
points to on its own (``Finding.cause``); this module says which finding each
one follows from, so that the verdict names the cause once and folds the rest
under it.

The mechanism is a table of :data:`RULES`: for a pair of checks, a test of
whether a finding of the first *can explain* one of the second, from the
evidence both carry, and how strongly:

- time: a cause comes no later than its consequence (a capture-based onset is
  known only to within the capture period, so that much slack is allowed), and
  some effects follow closely (units killed within a short window after a
  spike);
- place: a dead or saturated layer stops the gradient of the layers before it
  and starves the one after it; vanishing gradients stall the layers on the
  input side of where they vanish;
- kind: units dead from the first capture were not killed by the learning
  rate; a parameter that gets no gradient is not the optimizer's fault; a class
  that the labels lack explains that class's errors, not another's.

Each finding keeps the strongest explanation whose adding leaves the links a
forest (ties: the earlier cause). A finding nothing explains is a root; its
``root`` is empty and its own cause is the verdict's. A consequence's ``root``
is the top of its chain and its cause is the root's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nbviz.analysis.checks.finding import Finding
from nbviz.analysis.checks.model import ModelLayout

#: Steps after a spike within which units killed count as killed by it (at least).
NEAR = 20

Rule = Callable[["Context", Finding, Finding], float]

#: Findings about the errors of one class.
CLASS_ERRORS = ("class_error_imbalance", "unlearned_classes")


@dataclass(frozen=True)
class Context:
    """What the rules need beyond the two findings: the model's layout and capture period."""

    layout: ModelLayout | None
    every: int
    first_capture: int | None

    def slack(self) -> int:
        return max(self.every, 1)

    def depth(self, layer: str) -> int:
        return self.layout.depth(layer) if self.layout is not None else 0

    def same_model(self, a: str, b: str) -> bool:
        if self.layout is None:
            return True
        return self.layout.model_of(a) == self.layout.model_of(b)

    def before(self, effect: str, cause: str, *, or_at: bool = False) -> bool:
        """``effect`` is on the input side of ``cause`` in the same model (or at its depth)."""
        if not self.same_model(cause, effect):
            return False
        d, c = self.depth(effect), self.depth(cause)
        return d <= c if or_at else d < c

    def main_neighbours(self, layer: str) -> set[str]:
        """The main layers (modules with weights) just before and just after ``layer``."""
        if self.layout is None:
            return set()
        from nbviz.analysis.checks.depth import main_layers

        out: set[str] = set()
        for modules in main_layers(self.layout).values():
            d = self.depth(layer)
            before = [m for m in modules if self.depth(m) <= d]
            after = [m for m in modules if self.depth(m) > d]
            if before:
                out.add(before[-1])
            if after:
                out.add(after[0])
        return out


# ------------------------------------------------------------------ predicates
def _ev(f: Finding, key: str, default: Any = None) -> Any:
    return f.evidence.get(key, default)


def _not_later(ctx: Context, cause: Finding, effect: Finding, slack: int | None = None) -> bool:
    if cause.step is None or effect.step is None:
        return True
    return cause.step <= effect.step + (ctx.slack() if slack is None else slack)


def _killed_later(f: Finding) -> bool:
    return f.check == "dead_units" and not _ev(f, "at_init", False)


def _saturated_later(f: Finding) -> bool:
    return f.check == "saturated_units" and not _ev(f, "from_first_capture", False)


def _from_start(f: Finding) -> bool:
    """Dead or saturated units that were so from the first capture."""
    return bool(_ev(f, "from_first_capture", _ev(f, "at_init", False)))


def _growth(f: Finding) -> bool:
    """Exploding gradients over time (not by depth)."""
    return f.check == "exploding_gradients" and _ev(f, "kind") == "growth"


def _died_at(f: Finding) -> int | None:
    return _ev(f, "first_dead_step", f.step)


def _no_gradient(f: Finding) -> bool:
    return f.check == "stuck_weights" and _ev(f, "why") in ("no_gradient", "small_gradient")


def _after_start(ctx: Context, f: Finding) -> bool:
    """The finding set in after the first capture (it was not there from the start)."""
    return f.step is not None and (ctx.first_capture is None or f.step > ctx.first_capture)


def _classes(f: Finding) -> set[int]:
    """The classes a data finding is about."""
    if f.check in CLASS_ERRORS:
        return {int(_ev(f, "class", -1))}
    if f.check == "class_imbalance":
        return {int(c) for c in _ev(f, "classes", [])}
    if f.check == "mislabeled_samples":
        out = set()
        for pair in _ev(f, "pairs", []):
            out |= {int(pair["label"]), int(pair["predicted"])}
        return out
    return set()


def _layers(f: Finding) -> list[str]:
    return list(_ev(f, "layers", None) or [f.layer])


# --------------------------------------------------------------------- rules
def _lr_high(ctx: Context, c: Finding, e: Finding) -> float:
    if not _not_later(ctx, c, e):
        return 0.0
    if e.check in ("loss_spikes", "nonfinite"):
        return 0.9
    if _killed_later(e) or _saturated_later(e) or _growth(e):
        return 0.9
    if e.check == "vanishing_gradients":
        return 0.6 if _after_start(ctx, e) else 0.0
    if _no_gradient(e):
        return 0.5
    if e.check in CLASS_ERRORS:
        return 0.3
    return 0.0


def _spike(ctx: Context, c: Finding, e: Finding) -> float:
    window = max(NEAR, ctx.slack())
    start = c.step if c.step is not None else 0
    if e.check == "dead_units" and _killed_later(e):
        died = _died_at(e)
        return 0.8 if died is not None and start - ctx.slack() <= died <= start + window else 0.0
    if _growth(e) or _saturated_later(e) or e.check == "nonfinite":
        ok = e.step is not None and start - ctx.slack() <= e.step <= start + window
        return 0.7 if ok else 0.0
    return 0.0


def _dead(ctx: Context, c: Finding, e: Finding) -> float:
    died = _died_at(c)  # when the first of its units died
    if died is not None and e.step is not None and died > e.step + ctx.slack():
        return 0.0
    if _no_gradient(e):
        return 0.9 if e.layer in ctx.main_neighbours(c.layer) else 0.0
    if e.check == "vanishing_gradients":
        return 0.7 if ctx.before(e.layer, c.layer) else 0.0
    if e.check == "learning_rate_too_low":
        return 0.8 if _ev(c, "fraction", 0) >= 0.5 else 0.0
    if e.check in CLASS_ERRORS:
        return 0.4 if c.severity == "error" else 0.0
    return 0.0


def _saturated(ctx: Context, c: Finding, e: Finding) -> float:
    if not _not_later(ctx, c, e):
        return 0.0
    if e.check == "vanishing_gradients":
        return 0.9 if ctx.before(e.layer, c.layer, or_at=True) else 0.0
    if _no_gradient(e):
        return 0.8 if ctx.before(e.layer, c.layer) else 0.0
    if e.check == "learning_rate_too_low":
        return 0.7
    return 0.0


def _bad_init(ctx: Context, c: Finding, e: Finding) -> float:
    if not _not_later(ctx, c, e):
        return 0.0
    if e.check in ("vanishing_gradients", "learning_rate_too_low"):
        return 0.85
    if e.check == "exploding_gradients":
        return 0.9 if _ev(e, "kind") in ("backprop", "depth") else 0.6
    if e.check in ("saturated_units", "dead_units"):
        return 0.9 if _from_start(e) else 0.5
    if _no_gradient(e):
        return 0.6
    if e.check == "nonfinite":
        return 0.7
    if e.check == "loss_spikes":
        return 0.4
    return 0.0


def _input_scale(ctx: Context, c: Finding, e: Finding) -> float:
    # inputs far above unit scale: the first layer's outputs and gradients are as large
    if not _not_later(ctx, c, e):
        return 0.0
    if e.check == "bad_init":
        return 0.8 if e.layer == c.layer or _ev(e, "kind") == "one layer" else 0.5
    if e.check in ("saturated_units", "dead_units"):
        return 0.8 if _from_start(e) else 0.0
    if e.check == "learning_rate_too_high":
        return 0.7
    if e.check in ("exploding_gradients", "nonfinite", "loss_spikes", "vanishing_gradients"):
        return 0.5
    return 0.0


def _vanishing(ctx: Context, c: Finding, e: Finding) -> float:
    if _no_gradient(e):
        deepest = max((ctx.depth(la) for la in _layers(c)), default=ctx.depth(c.layer))
        ok = ctx.same_model(c.layer, e.layer) and ctx.depth(e.layer) <= deepest
        return 0.9 if ok and _not_later(ctx, c, e) else 0.0
    if e.check == "learning_rate_too_low":
        return 0.8
    return 0.0


def _exploding(ctx: Context, c: Finding, e: Finding) -> float:
    if not _not_later(ctx, c, e):
        return 0.0
    if e.check == "nonfinite":
        return 0.8
    if e.check == "loss_spikes":
        return 0.5
    if _killed_later(e) or _saturated_later(e):
        return 0.4
    return 0.0


def _nonfinite(ctx: Context, c: Finding, e: Finding) -> float:
    # NaN weights wreck everything after them: dead, stuck and exploding follow
    if c.step is None or e.step is None or e.step <= c.step:
        return 0.0
    if e.cause == "data" and e.check != "class_error_imbalance":
        return 0.0
    return 0.9


def _optimizer_stuck(ctx: Context, c: Finding, e: Finding) -> float:
    if _ev(c, "why") != "optimizer":
        return 0.0
    return 0.6 if e.check == "learning_rate_too_low" else 0.0


def _same_classes(strength: float) -> Rule:
    def rule(ctx: Context, c: Finding, e: Finding) -> float:
        return strength if _classes(c) & _classes(e) else 0.0

    return rule


def _mislabeled(ctx: Context, c: Finding, e: Finding) -> float:
    if e.check == "overfitting":
        return 0.7
    if e.check == "loss_spikes":
        return 0.3
    if e.check in CLASS_ERRORS:
        return 0.8 if _classes(c) & _classes(e) else 0.0
    return 0.0


def _residual_growth(ctx: Context, c: Finding, e: Finding) -> float:
    # a stream scaled block after block scales the gradient flowing back through it alike
    stack = _ev(c, "stack", c.layer)  # named at its last block; the stack's name in evidence
    if not _not_later(ctx, c, e) or not e.layer.startswith(stack + "."):
        return 0.0
    if e.check == "exploding_gradients" and _ev(e, "kind") in ("backprop", "depth"):
        return 0.8
    if e.check == "nonfinite":
        return 0.5
    return 0.0


def _massive(ctx: Context, c: Finding, e: Finding) -> float:
    # a peak near float16's range is where an overflow comes from
    if c.cause != "numerics" or e.check != "nonfinite" or c.step is None or e.step is None:
        return 0.0
    # an overflow it causes shows where the feature is carried: at or after its layer
    if not ctx.before(c.layer, e.layer, or_at=True):
        return 0.0
    return 0.7 if e.step >= c.step else 0.0


def _lr_low(ctx: Context, c: Finding, e: Finding) -> float:
    return 0.4 if e.check in CLASS_ERRORS else 0.0


#: cause check -> rule deciding how strongly one of its findings explains another.
RULES: dict[str, Rule] = {
    "learning_rate_too_high": _lr_high,
    "loss_spikes": _spike,
    "dead_units": _dead,
    "saturated_units": _saturated,
    "bad_init": _bad_init,
    "input_scale": _input_scale,
    "vanishing_gradients": _vanishing,
    "exploding_gradients": _exploding,
    "nonfinite": _nonfinite,
    "stuck_weights": _optimizer_stuck,
    "mislabeled_samples": _mislabeled,
    "class_imbalance": _same_classes(0.9),
    "unlearned_classes": _same_classes(0.9),
    "learning_rate_too_low": _lr_low,
    "residual_growth": _residual_growth,
    "massive_activations": _massive,
}


#: Findings that stall the whole model, and how strongly each explains a loss that stays at
#: chance (``not_learning``): as warnings or errors (an ``info`` stalls nothing).
STALLS: dict[str, float] = {
    "dead_units": 0.8,
    "saturated_units": 0.8,
    "vanishing_gradients": 0.8,
    "stuck_weights": 0.7,
    "bad_init": 0.7,
    "input_scale": 0.6,
    "exploding_gradients": 0.6,
    "attention_collapse": 0.5,
    "dead_heads": 0.5,
}


def _stalls(c: Finding, e: Finding) -> float:
    if e.check != "not_learning" or c.severity == "info":
        return 0.0
    return STALLS.get(c.check, 0.0)


@dataclass(frozen=True)
class Links:
    """Per finding (by index): the finding it follows from and the root of its chain."""

    parent: list[int | None]
    root: list[int | None]
    strength: list[float]


def link(findings: Sequence[Finding], ctx: Context) -> Links:
    """Which finding each one follows from (see the module docstring)."""
    n = len(findings)
    edges = []
    for i, cause in enumerate(findings):
        rule = RULES.get(cause.check)
        if rule is None and cause.check not in STALLS:
            continue
        for j, effect in enumerate(findings):
            if i == j:
                continue
            strength = max(rule(ctx, cause, effect) if rule else 0.0, _stalls(cause, effect))
            if strength > 0:
                step = cause.step if cause.step is not None else 1 << 62
                edges.append((-strength, step, i, j))
    edges.sort()
    parent: list[int | None] = [None] * n
    strength_of = [0.0] * n
    for neg, _, i, j in edges:
        if parent[j] is not None:
            continue
        k: int | None = i  # refuse a cycle: j must not be an ancestor of i
        while k is not None and k != j:
            k = parent[k]
        if k == j:
            continue
        parent[j] = i
        strength_of[j] = -neg
    root: list[int | None] = []
    for j in range(n):
        if parent[j] is None:
            root.append(None)
            continue
        k = j
        while parent[k] is not None:
            k = parent[k]
        root.append(k)
    return Links(parent=parent, root=root, strength=strength_of)
