"""Per-head statistics of attention outputs, from the training forward of a histogram step.

Where the module structure shows heads, each head's output is measured at every
histogram step (``hist_every``: a distribution over heads, as the per-unit maps are
over units), nothing at the other steps:

* ``F.scaled_dot_product_attention``: its output is ``(batch, heads, tokens,
  head_dim)`` (a call on 3-d tensors, whose first dimension may hold batch and
  heads together, is left out);
* ``F.multi_head_attention_forward`` (``nn.MultiheadAttention``, the
  ``self_attn`` of ``nn.TransformerEncoderLayer``/``DecoderLayer``): the tensor
  it concatenates the heads into before its output projection, ``num_heads`` by
  ``head_dim``;
* attention written out by hand (Hugging Face's ``eager``): the product of a
  softmax over ``(batch, heads, queries, keys)`` scores by the values,
  ``(batch, heads, tokens, head_dim)`` (kind ``softmax``).

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
dispatch of each of the model's own torch calls in the captured forward (a few
microseconds each: the probe's hooks measure outside it, :meth:`HeadStats.aside`);
hooks naming the modules, on during that forward only (at ``hist_every=1``, where every
training forward is measured, they stay on until the probe's hooks come off, a forward
cut short, or the module set changes: attaching them cost more than they do idle).
Measured in CPU time on one thread, a histogram step of the reference GPT costs about
3-5% more (2-3 ms), the encoder's about 5-8% (5 ms), under 0.2% of training at
``every=50``.
A model whose captured forward made no attention call (an MLP, a CNN) pays it once:
the mode stays off until its module set changes, or for :data:`RECHECK` captures.
``run.watch(model, heads=False)`` leaves it all out.
Not recorded under ``torch.compile`` (the mode would break the compiled graph),
while a submodule is compiled on its own, nor across several ranks. A forward
cut short by a ``BaseException`` other than ``Exception`` (``KeyboardInterrupt``:
torch's always-called hooks do not run) leaves the mode entered: it sees no call
made outside that forward, and the next forward of the model ends it.
With ``probe.set_mask(mask)``, ``(batch, tokens)`` (else the ``attention_mask`` the
forward was given by keyword, where it is ``(batch, tokens)`` of 0/1 or booleans and the
model is a Hugging Face model of one stack: see :func:`nbviz.probes.padding.one_sequence`), a call
whose batch and query positions are the mask's is measured over the real tokens'
queries only (padded queries still attend to the real keys, so they would not make a
head look dead, but they would weigh in its RMS and peak); a call of another shape (a
decoder's cross-attention, a call on part of the batch) is measured whole.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from nbviz.probes.attention import (
    _MHA,
    _SDPA,
    SEEN_CALLS,
    AttentionCalls,
    mha_with_heads,
)
from nbviz.probes.module_hooks import ModuleStack

__all__ = [
    "NEAR_ZERO",
    "RECHECK",
    "SIGNALS",
    "HeadStats",
    "compiled_children",
    "head_layer",
    "head_reductions",
    "head_stats",
]

#: A head's value counts as ~0 below this fraction of the call's output RMS (or at 0).
NEAR_ZERO = 1e-3
#: The ``unit_stats`` signals of a ``<module>/heads`` pseudo-layer, one value per head.
SIGNALS = ("head_rms", "head_max_abs", "head_zero_frac")
_WIDE = (torch.float32, torch.float64)
_EXACT_F32 = 2**24  # float32 sums of -1/0 are exact below this many terms
#: After a captured forward with no attention call, the mode stays off until the
#: module set changes or this many captured forwards have passed.
RECHECK = 64
_CALL_IMPL = nn.Module._call_impl.__code__


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


def _running(module: nn.Module) -> bool:
    """Whether ``module``'s forward is on the Python stack (its ``__call__`` has not
    returned): what tells a call of the captured forward from one made after that
    forward was cut short by a ``BaseException`` its always-called hooks never saw."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _CALL_IMPL and frame.f_locals.get("self") is module:
            return True
        frame = frame.f_back
    return False


def compiled_children(model: nn.Module) -> list[str]:
    """The submodules of ``model`` compiled on their own (``torch.compile`` on a child:
    an ``OptimizedModule`` holding ``_orig_mod``); the mode must not run over them."""
    return [
        n
        for n, m in model.named_modules()
        if n and type(m).__name__ == "OptimizedModule" and hasattr(m, "_orig_mod")
    ]


class _HeadsMode(AttentionCalls):
    """Sees a captured forward's attention calls and measures their heads.

    Only while that forward runs: a call made once it has ended (a forward cut short
    by ``KeyboardInterrupt`` leaves the mode entered until the next forward) runs
    as made and is not seen. The heads are measured on the weighted sums alone: the
    softmax's results are not held (``KEEPS_WEIGHTS``).
    """

    KEEPS_WEIGHTS = False

    def __init__(self, stats: HeadStats, stack: ModuleStack, root: nn.Module) -> None:
        super().__init__(stack.innermost)
        self._stats = stats
        self._root = root
        self.saw_attention = False

    def _live(self) -> bool:
        return self._stats._mode is self and _running(self._root)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is _SDPA or func is _MHA:
            if not self._live():
                return func(*args, **(kwargs or {}))
            return super().__torch_function__(func, types, args, kwargs)
        if func in SEEN_CALLS:  # hand-written attention: told live where it is found
            return super().__torch_function__(func, types, args, kwargs)
        return func(*args, **(kwargs or {}))

    def on_weighted(self, name: str, weights: torch.Tensor, result: torch.Tensor) -> None:
        if not self._live():
            return
        self.saw_attention = True
        if result.numel():
            self._stats.add(name, "softmax", result, -3)

    def on_sdpa(self, name: str, given: dict[str, Any], result: Any) -> None:
        # (..., heads, tokens, head_dim); a 3-d call's first dimension may be batch or
        # batch x heads: it does not say, so it is left out
        self.saw_attention = True
        if isinstance(result, torch.Tensor) and result.dim() >= 4 and result.numel():
            self._stats.add(name, "sdpa", result, -3)

    def on_mha(self, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        self.saw_attention = True
        if not self._stats.wants(name):
            return super().on_mha(name, args, kwargs)
        result, heads = mha_with_heads(args, kwargs)
        if heads is not None and heads.numel():
            self._stats.add(name, "mha", heads, 1)
        return result


class HeadStats:
    """A probe's per-head statistics: on during measured forwards, rows at the step's end.

    ``begin(root)`` at the start of a histogram step's training forward and ``end()`` after
    it (also when it raised); ``take()`` the step's device tensor for the one host
    copy, ``rows(step, values)`` its ``unit_stats`` rows.

    The mode stays off after a captured forward that made no attention call (an MLP,
    a CNN) until the model's module set changes or :data:`RECHECK` captured forwards
    have passed; and while a submodule is compiled on its own (the mode would break
    its graph).
    """

    def __init__(
        self, model: nn.Module, prefix: str, watched: Sequence[str], keep_names: bool = False
    ) -> None:
        self._prefix = prefix
        #: Leave the naming hooks on between measured forwards (``hist_every=1``: every
        #: training forward is measured, and attaching them costs more than they do idle).
        self.keep_names = keep_names
        self._stack_for: tuple[int, ...] | None = None  # the module set the stack names
        self._names = {id(m): prefix + n for n, m in model.named_modules() if n}
        self._watched = set(watched)
        self._wanted: dict[str, bool] = {}
        self._layers: dict[str, _Layer] = {}  # this step's
        self._taken: list[_Layer] = []
        self.known: dict[str, dict[str, Any]] = {}  # pseudo-layer -> what the meta says
        self.notes: list[str] = []
        self._stack: ModuleStack | None = None
        self._mode: _HeadsMode | None = None
        self._modules: tuple[int, ...] | None = None  # the module set last checked
        self._off = False  # no attention seen (or a compiled child) in that module set
        self._skipped = 0  # captured forwards skipped since
        self._mask: torch.Tensor | None = None  # (batch, tokens) of this forward, or None

    @property
    def on(self) -> bool:
        """Whether the mode is entered (during a captured forward, or left stale)."""
        return self._mode is not None

    def aside(self) -> _Aside:
        """A context in which the probe's own ops, run by its hooks during the captured
        forward, bypass the mode: each op handed to it costs a Python call (a few
        microseconds), and a capture's statistics are most of the forward's ops."""
        return _Aside(self._mode)

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

    def new_step(self) -> None:
        """A training step begins: what an unfinished step left is dropped."""
        self._layers = {}

    def _worth(self, root: nn.Module) -> bool:
        """Whether to enter the mode for this captured forward of ``root``."""
        modules = tuple(map(id, root.modules()))
        if modules != self._modules:
            self._modules, self._skipped = modules, 0
            self._names = {id(m): self._prefix + n for n, m in root.named_modules() if n}
            compiled = compiled_children(root)
            self._off = bool(compiled)
            if compiled:
                self._note(
                    f"per-head statistics off while {', '.join(compiled[:3])} "
                    "torch.compile'd on its own (the mode that sees attention calls would "
                    "break its graph)"
                )
            return not compiled
        if self._off:
            self._skipped += 1
            if self._skipped <= RECHECK or compiled_children(root):
                return False
            self._skipped = 0
        return True

    def begin(self, root: nn.Module, mask: torch.Tensor | None = None) -> None:
        """Name the modules and see the attention calls until :meth:`end`.

        ``mask``: ``(batch, tokens)``, True on the real tokens (the probe's
        ``set_mask``): the query positions a call measures where its shape is the
        mask's. A mode left entered by a forward cut short (``KeyboardInterrupt``:
        torch runs always-called hooks on ``Exception`` only) is ended first.
        """
        if self._mode is not None:
            self.end()
        self._mask = mask
        if not self._worth(root):
            self._release()
            return
        stack = self._stack
        if stack is None or self._stack_for != self._modules:
            self._release()
            stack = ModuleStack()
            stack.attach(root, self._names)
            self._stack_for = self._modules
        mode = _HeadsMode(self, stack, root)
        mode.__enter__()
        self._stack, self._mode = stack, mode

    def end(self, release: bool = False) -> None:
        """Stop seeing calls and take the naming hooks off (with ``keep_names``, only with
        ``release``: the probe's hooks come off). Idempotent."""
        mode = self._mode
        self._mode = None
        if mode is not None:
            _leave(mode)
            if not mode.saw_attention:
                self._off = True  # off until the module set changes, or RECHECK
        if release or not self.keep_names or self._off:
            self._release()
        elif self._stack is not None:
            del self._stack.names[1:]  # a forward cut short leaves no names behind

    def _release(self) -> None:
        """Take the naming hooks off."""
        stack, self._stack, self._stack_for = self._stack, None, None
        if stack is not None:
            stack.remove()

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def add(self, module: str, kind: str, x: torch.Tensor, head_dim: int) -> None:
        """One call's heads (``x``, heads along ``head_dim``), added to its pseudo-layer."""
        if not self.wants(module):
            return
        heads, size = int(x.shape[head_dim]), int(x.shape[-1])
        x = self._real_queries(x, head_dim)
        if x is None:
            return
        sums = head_reductions(x, 1)
        layer = self._layers.get(module)
        if layer is None:
            self._layers[module] = _Layer(module, kind, heads, size, sums, x.numel() // heads)
            return
        if layer.heads != heads:
            self._note(
                f"{head_layer(module)}: calls with {layer.heads} and {heads} heads in one step"
            )
            return
        layer.sums = torch.stack(
            [
                layer.sums[0] + sums[0],
                torch.maximum(layer.sums[1], sums[1]),
                layer.sums[2] + sums[2],
            ]
        )
        layer.count += x.numel() // heads

    def _real_queries(self, x: torch.Tensor, head_dim: int) -> torch.Tensor | None:
        """``x`` (``(batch, heads, tokens, head_dim)``, or ``(..., heads, ...)`` along
        ``head_dim``) with the heads along dimension 1: the real tokens' queries only,
        ``(kept, heads, head_dim)``, where the mask's shape is the call's batch and
        tokens (None when it keeps none), else ``x`` whole."""
        mask = self._mask
        if head_dim < 0:
            head_dim += x.dim()
        if mask is None or x.dim() != 4 or head_dim != 1:
            return x.movedim(head_dim, 1) if head_dim != 1 else x
        if (x.shape[0], x.shape[2]) != tuple(mask.shape):
            return x
        kept = x.transpose(1, 2)[mask.to(x.device)]  # (kept, heads, head_dim)
        return kept if kept.numel() else None

    def take(self) -> torch.Tensor | None:
        """The step's totals as one flat device tensor (None when no call was seen)."""
        self._taken = list(self._layers.values())
        self._layers = {}
        if not self._taken:
            return None
        return torch.cat([layer.sums.reshape(-1) for layer in self._taken])

    def rows(self, step: int, values: np.ndarray) -> tuple[list[tuple], bool]:
        """``unit_stats`` rows of the totals ``take()`` gave (now on the host), and whether
        the meta ``heads`` changed (a pseudo-layer showed for the first time, or a note
        was added). A layer whose head count differs from its first capture's is not
        recorded (its rows would not line up with the others): a note says so."""
        rows: list[tuple] = []
        notes = len(self.notes)
        grew = False
        off = 0
        for layer in self._taken:
            n = 3 * layer.heads
            sumsq, peak, near = np.asarray(values[off : off + n], dtype=np.float64).reshape(3, -1)
            off += n
            name = head_layer(layer.module)
            known = self.known.get(name)
            if known is None:
                self.known[name] = {
                    "module": layer.module,
                    "heads": layer.heads,
                    "head_dim": layer.head_size,
                    "kind": layer.kind,
                }
                grew = True
            elif known["heads"] != layer.heads or known["head_dim"] != layer.head_size:
                self._note(
                    f"{name}: {layer.heads} heads of {layer.head_size} from step {int(step)}, "
                    f"{known['heads']} of {known['head_dim']} before: not recorded"
                )
                continue
            count = max(layer.count, 1)
            with np.errstate(invalid="ignore"):
                rms = np.sqrt(sumsq / count)
            zero_frac = near / count
            zero_frac[~np.isfinite(rms)] = np.nan  # non-finite, not dead
            for signal, v in zip(SIGNALS, (rms, peak, zero_frac), strict=True):
                rows.append((int(step), name, signal, v.astype("<f4").tobytes()))
        self._taken = []
        return rows, grew or len(self.notes) > notes


class _Aside:
    """Takes ``mode`` off the top of the torch function mode stack until the block ends
    (a mode entered above it stays, and so does ``mode`` then)."""

    __slots__ = ("_mode", "_taken")

    def __init__(self, mode: TorchFunctionMode | None) -> None:
        self._mode = mode
        self._taken = False

    def __enter__(self) -> None:
        if self._mode is None or not torch._C._len_torch_function_stack():
            return
        top = torch._C._pop_torch_function_stack()
        if top is self._mode:
            self._taken = True
        else:
            torch._C._push_on_torch_function_stack(top)

    def __exit__(self, *exc: object) -> None:
        if self._taken:
            self._taken = False
            torch._C._push_on_torch_function_stack(self._mode)


def _leave(mode: TorchFunctionMode) -> None:
    """Take ``mode`` off the torch function mode stack, wherever it is on it (a mode
    entered since stays, in its place)."""
    above = []
    try:
        while torch._C._len_torch_function_stack():
            top = torch._C._pop_torch_function_stack()
            if top is mode:
                break
            above.append(top)
    finally:
        for other in reversed(above):
            torch._C._push_on_torch_function_stack(other)


def head_stats(
    model: nn.Module, prefix: str, watched: Sequence[str], enabled: bool, hist_every: int = 0
) -> HeadStats | None:
    """The probe's per-head statistics (None unless ``enabled``: the probe records
    activations, in one process, on a model that is not compiled). With ``hist_every=1``
    the naming hooks stay on between the measured forwards (see ``keep_names``)."""
    return HeadStats(model, prefix, watched, keep_names=hist_every == 1) if enabled else None
