"""Per-head statistics of attention outputs, from the training forward of a capture step.

Where the module structure shows heads, each head's output is measured at every
capture step (the activations' period, ``every``), nothing at the other steps:

* ``F.scaled_dot_product_attention``: its output is ``(batch, heads, tokens,
  head_dim)`` (a call on 3-d tensors, whose first dimension may hold batch and
  heads together, is left out);
* ``F.multi_head_attention_forward`` (``nn.MultiheadAttention``, the
  ``self_attn`` of ``nn.TransformerEncoderLayer``/``DecoderLayer``): the tensor
  it concatenates the heads into before its output projection, ``num_heads`` by
  ``head_dim``.

The calls are found as the attention maps find them (:mod:`nbviz.probes.attention`:
a :class:`~torch.overrides.TorchFunctionMode` on while the captured forward
runs, each call named after the innermost module running it); every call runs
once, as the model made it, so outputs and gradients are bitwise unchanged. A
call is measured when its module is watched, or holds or sits inside a watched
module (by default, every attention call of the model).

Per head and capture step: the RMS of its output, its largest ``|value|`` and the
fraction of its values that are ~0 (``|x|`` below ``NEAR_ZERO`` times the RMS of
all heads of the call, or 0; a head whose value projection is zero has 1). A dead
head reads 1 at every capture. They are ``unit_stats`` rows (units = heads) of the
pseudo-layer ``<module>/heads``, signals :data:`SIGNALS`; the meta ``heads`` says,
per such layer, its module, heads, head size and kind.

Cost, bounded: per call one copy of the head tensor with the heads as rows and
three reductions along them (the squares' sum, the largest magnitude, the ~0
count; 0.1 ms for 8 x 4 heads x 64 tokens x 32 on one CPU thread), kept on the
device and copied to the host with the step's other statistics; the mode's
dispatch of each torch call of the captured forward (a few microseconds each,
most of them for the probe's own statistics); hooks naming the modules, on during
that forward only. Measured in CPU time on one thread, a capture step of the
reference MLP, GPT and encoder costs 7-9% more (1.6, 7 and 7 ms), under 0.5% of
training at ``every=50``. Not recorded under ``torch.compile`` (the mode would
break the compiled graph) nor across several ranks. ``probe.set_mask`` does not
reach them: padded query positions are measured too (they attend to the real
keys, so they do not make a head look dead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from nbviz.probes.attention import AttentionCalls, ModuleStack, mha_with_heads

__all__ = ["NEAR_ZERO", "SIGNALS", "HeadStats", "head_layer", "head_reductions", "head_stats"]

#: A head's value counts as ~0 below this fraction of the call's output RMS (or at 0).
NEAR_ZERO = 1e-3
#: The ``unit_stats`` signals of a ``<module>/heads`` pseudo-layer, one value per head.
SIGNALS = ("head_rms", "head_max_abs", "head_zero_frac")
_WIDE = (torch.float32, torch.float64)
_EXACT_F32 = 2**24  # float32 sums of -1/0 are exact below this many terms


def head_layer(module: str) -> str:
    """The pseudo-layer holding the heads of the attention call named ``module``."""
    return f"{module}/heads" if module else "heads"


def head_reductions(x: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``(3, heads)`` on ``x``'s device: per head, the sum of squares, the largest
    ``|value|`` and the count of values ~0 (below :data:`NEAR_ZERO` times the RMS of
    all heads, or exactly 0).

    ``head_dim``: the dimension of ``x`` along which the heads lie. The heads are
    made rows first (one copy): reductions along contiguous rows cost a tenth of
    those across strided dimensions on the CPU. The count is a float sum of signs,
    as boolean reductions cost several times more. NaN/inf propagate into the
    first two (a head that saw one is non-finite, not dead).
    """
    xf = x.detach()
    if xf.dtype not in _WIDE:
        xf = xf.float()
    heads = xf.shape[head_dim]
    rows = xf.movedim(head_dim, 0).reshape(heads, -1)
    sumsq = torch.linalg.vector_norm(rows, 2, 1).square()
    magnitude = rows.abs()  # a tensor of its own: changed in place below
    peak = magnitude.amax(1)
    tiny = torch.finfo(rows.dtype).tiny
    # the scale of the finite heads (one head's NaN leaves the others' counts alone)
    finite = torch.where(torch.isfinite(sumsq), sumsq, 0.0).sum()
    tol = ((finite / max(rows.numel(), 1)).sqrt() * NEAR_ZERO).clamp_min(tiny)
    # |x| < tol: -1 after the sign, 0 elsewhere; the sum's magnitude is the count
    below = magnitude.sub_(tol).clamp_(max=0).sign_()
    wide = torch.float64 if rows.shape[1] >= _EXACT_F32 else None
    near = below.sum(1, dtype=wide).abs_().to(sumsq.dtype)
    return torch.stack([sumsq, peak, near])


@dataclass
class _Layer:
    """One pseudo-layer's totals over the step's calls, on the device."""

    module: str
    kind: str
    heads: int
    head_size: int
    sums: torch.Tensor  # (3, heads): squares' sum, largest |value|, count ~0
    count: int = 0  # values per head


class _HeadsMode(AttentionCalls):
    """Sees a captured forward's attention calls and measures their heads."""

    def __init__(self, stats: HeadStats, stack: ModuleStack) -> None:
        super().__init__(stack.innermost)
        self._stats = stats

    def on_sdpa(self, name: str, given: dict[str, Any], result: Any) -> None:
        # (..., heads, tokens, head_dim); a 3-d call's first dimension may be batch or
        # batch x heads: it does not say, so it is left out
        if isinstance(result, torch.Tensor) and result.dim() >= 4 and result.numel():
            self._stats.add(name, "sdpa", result, -3)

    def on_mha(self, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        if not self._stats.wants(name):
            return super().on_mha(name, args, kwargs)
        result, heads = mha_with_heads(args, kwargs)
        if heads is not None and heads.numel():
            self._stats.add(name, "mha", heads, 1)
        return result


class HeadStats:
    """A probe's per-head statistics: on during captured forwards, rows at the step's end.

    ``begin(root)`` at the start of a captured training forward and ``end()`` after
    it (also when it raised); ``take()`` the step's device tensor for the one host
    copy, ``rows(step, values)`` its ``unit_stats`` rows.
    """

    def __init__(self, model: nn.Module, prefix: str, watched: Sequence[str]) -> None:
        self._names = {id(m): prefix + n for n, m in model.named_modules() if n}
        self._watched = set(watched)
        self._wanted: dict[str, bool] = {}
        self._layers: dict[str, _Layer] = {}  # this step's
        self._taken: list[_Layer] = []
        self.known: dict[str, dict[str, Any]] = {}  # pseudo-layer -> what the meta says
        self.notes: list[str] = []
        self._stack: ModuleStack | None = None
        self._mode: _HeadsMode | None = None

    def wants(self, module: str) -> bool:
        """Whether calls of ``module`` are measured: it, a submodule or an owner is watched."""
        got = self._wanted.get(module)
        if got is None:
            base = module.partition("#")[0]
            got = not base or any(
                w == base or w.startswith(base + ".") or base.startswith(w + ".")
                for w in self._watched
            )
            self._wanted[module] = got
        return got

    def begin(self, root: nn.Module) -> None:
        """Name the modules and see the attention calls until :meth:`end`."""
        if self._mode is not None:
            return
        stack = ModuleStack()
        stack.attach(root, self._names)
        mode = _HeadsMode(self, stack)
        mode.__enter__()
        self._stack, self._mode = stack, mode

    def end(self) -> None:
        """Stop seeing calls and take the naming hooks off. Idempotent."""
        mode, stack = self._mode, self._stack
        self._mode = self._stack = None
        if mode is not None:
            mode.__exit__(None, None, None)
        if stack is not None:
            stack.remove()

    def add(self, module: str, kind: str, x: torch.Tensor, head_dim: int) -> None:
        """One call's heads (``x``, heads along ``head_dim``), added to its pseudo-layer."""
        if not self.wants(module):
            return
        heads, size = int(x.shape[head_dim]), int(x.shape[-1])
        sums = head_reductions(x, head_dim)
        layer = self._layers.get(module)
        if layer is None:
            self._layers[module] = _Layer(module, kind, heads, size, sums, x.numel() // heads)
            return
        if layer.heads != heads:
            note = f"{head_layer(module)}: calls with {layer.heads} and {heads} heads in one step"
            if note not in self.notes:
                self.notes.append(note)
            return
        layer.sums = torch.stack(
            [
                layer.sums[0] + sums[0],
                torch.maximum(layer.sums[1], sums[1]),
                layer.sums[2] + sums[2],
            ]
        )
        layer.count += x.numel() // heads

    def take(self) -> torch.Tensor | None:
        """The step's totals as one flat device tensor (None when no call was seen)."""
        self._taken = list(self._layers.values())
        self._layers = {}
        if not self._taken:
            return None
        return torch.cat([layer.sums.reshape(-1) for layer in self._taken])

    def rows(self, step: int, values: np.ndarray) -> tuple[list[tuple], bool]:
        """``unit_stats`` rows of the totals ``take()`` gave (now on the host), and whether
        a pseudo-layer showed for the first time (the meta ``heads`` then changes)."""
        rows: list[tuple] = []
        grew = False
        off = 0
        for layer in self._taken:
            n = 3 * layer.heads
            sumsq, peak, near = np.asarray(values[off : off + n], dtype=np.float64).reshape(3, -1)
            off += n
            count = max(layer.count, 1)
            with np.errstate(invalid="ignore"):
                rms = np.sqrt(sumsq / count)
            zero_frac = near / count
            zero_frac[~np.isfinite(rms)] = np.nan  # non-finite, not dead
            name = head_layer(layer.module)
            if name not in self.known:
                self.known[name] = {
                    "module": layer.module,
                    "heads": layer.heads,
                    "head_dim": layer.head_size,
                    "kind": layer.kind,
                }
                grew = True
            for signal, v in zip(SIGNALS, (rms, peak, zero_frac), strict=True):
                rows.append((int(step), name, signal, v.astype("<f4").tobytes()))
        self._taken = []
        return rows, grew


def head_stats(
    model: nn.Module, prefix: str, watched: Sequence[str], enabled: bool
) -> HeadStats | None:
    """The probe's per-head statistics (None unless ``enabled``: the probe records
    activations, in one process, on a model that is not compiled)."""
    return HeadStats(model, prefix, watched) if enabled else None
