"""The curvature test: the training loss's sharpness against the optimizer's stability limit.

Gradient descent with learning rate ``lr`` on a loss whose Hessian has top
eigenvalue ``s`` (its *sharpness*) is stable along that direction only while
``s < 2 / lr``: past it every step overshoots by more than it corrects. With
heavy-ball momentum ``mu`` (PyTorch's SGD, dampening ``d``) the limit is
``2 (1 + mu) / (lr (1 - d))``, with Nesterov momentum ``2 (1 + mu) / (lr (1 + 2 mu))``.
Adam and AdamW step along the gradient divided by ``sqrt(v_hat) + eps``; what
must stay under their limit is the *preconditioned* sharpness, the top
eigenvalue of ``P^-1/2 H P^-1/2`` with ``P = diag(sqrt(v_hat) + eps)``, and the
limit is ``(2 + 2 beta1) / ((1 - beta1) lr)`` (38 / lr at beta1 = 0.9; Cohen et
al. 2022, "Adaptive gradient methods at the edge of stability"). RMSprop is
preconditioned the same way with limit ``2 (1 + mu) / lr``. Parameter groups with
different learning rates enter the preconditioner as ``lr_group / lr_max`` and
the limit uses ``lr_max``. Other optimizers get a sharpness and no limit.

The top eigenvalue is found by power iteration on Hessian-vector products
(``torch.autograd.grad`` of the gradient, one backward each): a few dozen
iterations on one batch, stopping when the estimate changes by less than
``tol`` relatively. Power iteration finds the eigenvalue of largest magnitude;
when that one is negative it runs again on the Hessian shifted by it, which
makes the largest algebraic eigenvalue dominant.

Cost: one forward and backward with ``create_graph`` plus one extra backward
per iteration, on one batch; nothing runs unless called (``run.curvature``).
The model is left as it was: its parameters, gradients, buffers (BatchNorm's
running statistics) and the random state (dropout) are what they were before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["Curvature", "curvature", "stability", "top_eigenvalue"]


@dataclass(frozen=True)
class Curvature:
    """What the curvature test found on one batch.

    ``sharpness``: the top Hessian eigenvalue (preconditioned where the optimizer
    preconditions); ``limit``: the optimizer's stability limit, None when unknown;
    ``kind``: how the limit was derived; ``converged``: whether the power iteration
    settled within ``tol``.
    """

    sharpness: float
    limit: float | None
    kind: str
    lr: float | None
    momentum: float | None
    beta1: float | None
    preconditioned: bool
    iterations: int
    converged: bool

    @property
    def ratio(self) -> float | None:
        """sharpness / limit: 1 or more means steps along the sharpest direction overshoot."""
        return self.sharpness / self.limit if self.limit else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


HessianProduct = Callable[[list[torch.Tensor]], list[torch.Tensor]]


def _dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    return sum((x.double() * y.double()).sum() for x, y in zip(a, b, strict=True))


def _normalise(v: list[torch.Tensor]) -> list[torch.Tensor]:
    norm = torch.sqrt(_dot(v, v)).clamp_min(1e-30)
    return [x / norm.to(x.dtype) for x in v]


def _power(
    product: HessianProduct,
    start: list[torch.Tensor],
    iterations: int,
    tol: float,
    shift: float = 0.0,
) -> tuple[float, int, bool]:
    """Power iteration on ``product - shift``: (eigenvalue + shift, iterations, converged)."""
    v = _normalise(start)
    value = 0.0
    for i in range(1, iterations + 1):
        hv = product(v)
        if shift:
            hv = [h - shift * x for h, x in zip(hv, v, strict=True)]
        new = float(_dot(v, hv))
        v = _normalise([h.detach() for h in hv])
        if i > 1 and abs(new - value) <= tol * max(abs(new), 1e-12):
            return new + shift, i, True
        value = new
    return value + shift, iterations, False


def top_eigenvalue(
    product: HessianProduct,
    like: Sequence[torch.Tensor],
    *,
    iterations: int = 50,
    tol: float = 1e-4,
    seed: int = 0,
) -> tuple[float, int, bool]:
    """The largest algebraic eigenvalue of the symmetric operator ``product``.

    Returns (eigenvalue, iterations used, converged).
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    start = [torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t) for t in like]
    value, used, ok = _power(product, start, iterations, tol)
    if value < 0:  # the dominant one is negative: shift it to the bottom
        value, more, ok = _power(product, start, iterations, tol, shift=value)
        used += more
    return value, used, ok


def stability(optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    """The stability limit of ``optimizer`` and how its steps are preconditioned.

    Keys: ``kind``, ``lr`` (the largest group's), ``momentum``, ``beta1``, ``limit``
    (None when unknown), ``adaptive`` (steps divided by ``sqrt(v) + eps``).
    """
    out: dict[str, Any] = {"kind": "unknown", "lr": None, "momentum": None, "beta1": None}
    out.update(limit=None, adaptive=False)
    if optimizer is None:
        return out
    groups = optimizer.param_groups
    lr = max(float(g.get("lr", 0.0)) for g in groups)
    out["lr"] = lr
    if lr <= 0:
        return out
    name = type(optimizer).__name__
    g0 = max(groups, key=lambda g: float(g.get("lr", 0.0)))
    if name == "SGD":
        mu = float(g0.get("momentum", 0.0))
        damp = float(g0.get("dampening", 0.0))
        out["momentum"] = mu
        if mu == 0:
            out.update(kind="gradient descent", limit=2.0 / lr)
        elif g0.get("nesterov"):
            out.update(kind="nesterov", limit=(2 + 2 * mu) / (lr * (1 + 2 * mu)))
        else:
            out.update(kind="momentum", limit=(2 + 2 * mu) / (lr * (1 - damp)))
    elif name in ("Adam", "AdamW", "NAdam", "RAdam"):
        beta1 = float(g0.get("betas", (0.9, 0.999))[0])
        out.update(kind="adam", beta1=beta1, adaptive=True)
        out["limit"] = (2 + 2 * beta1) / ((1 - beta1) * lr)
    elif name == "RMSprop":
        mu = float(g0.get("momentum", 0.0))
        out.update(kind="rmsprop", momentum=mu, adaptive=True, limit=(2 + 2 * mu) / lr)
    return out


def _preconditioner(
    optimizer: torch.optim.Optimizer | None, params: list[nn.Parameter], info: dict[str, Any]
) -> list[torch.Tensor] | None:
    """Per parameter, the square root of the step's scale relative to the largest group's lr."""
    if optimizer is None or not info["lr"]:
        return None
    scale: dict[int, torch.Tensor] = {}
    for group in optimizer.param_groups:
        rel = float(group.get("lr", 0.0)) / info["lr"]
        for p in group["params"]:
            d = torch.full_like(p, rel, dtype=torch.float32)
            if info["adaptive"]:
                state = optimizer.state.get(p, {})
                sq = state.get("exp_avg_sq", state.get("square_avg"))
                if sq is not None:
                    sq = sq.float()
                    if "exp_avg_sq" in state and "step" in state:
                        beta2 = float(group.get("betas", (0.9, 0.999))[1])
                        t = float(state["step"])
                        sq = sq / max(1 - beta2**t, 1e-12)
                    d = d / (sq.sqrt() + float(group.get("eps", 1e-8)))
                else:
                    d = d / float(group.get("eps", 1e-8))  # no history yet: the first step
            scale[id(p)] = d.sqrt()
    if all(bool((v == 1).all()) for v in scale.values()):
        return None
    return [scale.get(id(p), torch.zeros_like(p, dtype=torch.float32)) for p in params]


def curvature(
    model: nn.Module,
    loss_fn: Callable[[], torch.Tensor],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    iterations: int = 50,
    tol: float = 1e-4,
    seed: int = 0,
) -> Curvature:
    """Sharpness of ``loss_fn()`` (the training loss on one batch) at the model's weights.

    ``loss_fn`` computes the loss afresh (a forward pass of ``model``). The
    model's parameters and gradients are left as they were.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("curvature: the model has no parameter that requires a gradient")
    info = stability(optimizer)
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    devices = [p.device for p in params if p.device.type == "cuda"][:1]
    try:
        with torch.random.fork_rng(devices=devices), torch.enable_grad():
            return _measure(model, loss_fn, params, optimizer, info, iterations, tol, seed)
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


def _measure(
    model: nn.Module,
    loss_fn: Callable[[], torch.Tensor],
    params: list[nn.Parameter],
    optimizer: torch.optim.Optimizer | None,
    info: dict[str, Any],
    iterations: int,
    tol: float,
    seed: int,
) -> Curvature:
    """The test itself (the caller restores the buffers and the random state)."""
    loss = loss_fn()
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        got = f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else loss
        raise ValueError(
            f"curvature: loss_fn must return the loss as a single-element tensor, got {got!r}"
        )
    if not torch.isfinite(loss):
        raise ValueError(f"curvature: the loss is not finite ({float(loss)})")
    grads = torch.autograd.grad(loss.reshape(()), params, create_graph=True, allow_unused=True)
    used = [(p, g) for p, g in zip(params, grads, strict=True) if g is not None and g.requires_grad]
    if not used:
        return Curvature(0.0, info["limit"], info["kind"], info["lr"], info["momentum"],
                         info["beta1"], False, 0, True)  # fmt: skip
    ps = [p for p, _ in used]
    gs = [g for _, g in used]
    root = _preconditioner(optimizer, ps, info)

    def product(v: list[torch.Tensor]) -> list[torch.Tensor]:
        w = v if root is None else [x * r for x, r in zip(v, root, strict=True)]
        hv = torch.autograd.grad(gs, ps, grad_outputs=w, retain_graph=True, allow_unused=True)
        hv = [torch.zeros_like(p) if h is None else h.detach() for h, p in zip(hv, ps, strict=True)]
        return hv if root is None else [h * r for h, r in zip(hv, root, strict=True)]

    value, used_iters, ok = top_eigenvalue(product, ps, iterations=iterations, tol=tol, seed=seed)
    return Curvature(
        sharpness=float(value),
        limit=info["limit"],
        kind=info["kind"],
        lr=info["lr"],
        momentum=info["momentum"],
        beta1=info["beta1"],
        preconditioned=root is not None,
        iterations=used_iters,
        converged=ok,
    )
