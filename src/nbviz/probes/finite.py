"""What the sentinel can know about finiteness without reading a tensor.

The sentinel reduces every watched output and parameter gradient on every step,
and those reads are most of its cost. These rules let it skip reads whose answer
is already known, without changing what it reports:

* A module that cannot turn finite values into non-finite ones (ReLU, tanh,
  max pooling, reshapes...) and whose input is, unchanged, the output that the
  sentinel has just checked is non-finite exactly when that input was: its slot
  takes the same check. (A saturating activation maps +-Inf to a finite value,
  so after an Inf such a module is named as reached although its own output
  was finite; a NaN, the common case, is exact.)
* The weight gradient of a ``Linear``/``Conv`` layer is ``grad_out^T @ input``
  and its bias gradient ``grad_out`` summed: with a finite input (checked in the
  forward) the weight gradient is non-finite exactly when the bias gradient is.
  So for a normalisation layer's scale (``grad_out * normalised`` summed, the
  normalised input finite whenever the layer's output is) and for
  ``MultiheadAttention``'s packed input projection (a ``Linear`` of the query, key
  and value). The weight slot takes the bias gradient's check while both parameters are
  float32/float64, the forward ran outside autocast (a half-precision matrix
  product can overflow where the sum does not: GradScaler's case) and neither
  parameter has a gradient hook of its own (which could change one gradient
  alone). A weight also used outside its layer (``F.linear(x, layer.weight)``
  elsewhere in ``forward``) gets gradient the bias does not see: tie weights by
  sharing the parameter between modules, which is recognised.
* A module whose output is the very tensor checked just before, unchanged (a
  container returning its last layer's output), takes that check.

"Overflow aside", as for the sentinel's sums themselves: finite values so large
that a sum or product overflows are not told apart from Inf.
"""

from __future__ import annotations

import torch
from torch import nn

#: Modules whose output is finite whenever their input is, at any precision.
KEEPS_FINITE: tuple[type[nn.Module], ...] = (
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.Hardtanh,
    nn.Sigmoid,
    nn.Tanh,
    nn.Hardsigmoid,
    nn.Hardswish,
    nn.SiLU,
    nn.GELU,
    nn.Mish,
    nn.ELU,
    nn.CELU,
    nn.Softsign,
    nn.MaxPool1d,
    nn.MaxPool2d,
    nn.MaxPool3d,
    nn.AdaptiveMaxPool1d,
    nn.AdaptiveMaxPool2d,
    nn.AdaptiveMaxPool3d,
    nn.Flatten,
    nn.Unflatten,
    nn.Identity,
    nn.PixelShuffle,
    nn.PixelUnshuffle,
    nn.ChannelShuffle,
    nn.ReflectionPad1d,
    nn.ReflectionPad2d,
    nn.ReflectionPad3d,
    nn.ReplicationPad1d,
    nn.ReplicationPad2d,
    nn.ReplicationPad3d,
    nn.ZeroPad1d,
    nn.ZeroPad2d,
    nn.ZeroPad3d,
)
#: Modules that scale or average: finite in, finite out in float32/float64 (overflow
#: aside), but a half-precision scale can overflow (dropout's 1/(1-p) near 65504).
KEEPS_FINITE_WIDE: tuple[type[nn.Module], ...] = (
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AvgPool1d,
    nn.AvgPool2d,
    nn.AvgPool3d,
    nn.AdaptiveAvgPool1d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveAvgPool3d,
)
_WEIGHT_BIAS = ("weight", "bias")
#: Layers whose bias gradient tells whether the weight gradient is finite, with the
#: names of that weight and bias: an affine map of the layer's input (``Linear``,
#: ``Conv``, attention's packed projection), or a scale and shift of its normalised
#: input. Exact types: a subclass may compute something else with them.
WEIGHT_FROM_BIAS: dict[type[nn.Module], tuple[str, str]] = {
    **dict.fromkeys(
        (
            nn.Linear,
            nn.modules.linear.NonDynamicallyQuantizableLinear,  # attention's out_proj
            nn.Conv1d,
            nn.Conv2d,
            nn.Conv3d,
            nn.ConvTranspose1d,
            nn.ConvTranspose2d,
            nn.ConvTranspose3d,
            nn.LayerNorm,
            nn.GroupNorm,
            nn.BatchNorm1d,
            nn.BatchNorm2d,
            nn.BatchNorm3d,
            nn.SyncBatchNorm,
            nn.InstanceNorm1d,
            nn.InstanceNorm2d,
            nn.InstanceNorm3d,
        ),
        _WEIGHT_BIAS,
    ),
    nn.MultiheadAttention: ("in_proj_weight", "in_proj_bias"),
}
WIDE = (torch.float32, torch.float64)
#: Floating dtypes narrower than float32 (half, bfloat16, the float8 kinds): summed in
#: float32, since a sum in their own dtype overflows early or is not implemented at all.
NARROW: frozenset[torch.dtype] = frozenset(
    d
    for d in vars(torch).values()
    if isinstance(d, torch.dtype) and d.is_floating_point and d.itemsize < 4
)
#: Sets grad mode without the context manager's objects (what ``torch.no_grad`` calls).
_set_grad_enabled = torch._C._set_grad_enabled


def sum_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a tensor of ``dtype`` is summed in for the sentinel."""
    return torch.float32 if dtype in NARROW else dtype


def checksum(x: torch.Tensor) -> torch.Tensor:
    """One reduction that is non-finite exactly when an element is (overflow aside).

    Runs on every step inside hooks: a tensor that takes part in autograd is summed
    with grad mode off for the op (no graph recorded, nothing kept alive) rather
    than through ``detach()``, an op of its own that costs as much as the sum on
    tensors of this size.
    """
    off = x.requires_grad and torch.is_grad_enabled()
    if off:
        _set_grad_enabled(False)
    try:
        return x.sum(dtype=torch.float32) if x.dtype in NARROW else x.sum()
    finally:
        if off:
            _set_grad_enabled(True)


def has_grad_hooks(p: torch.Tensor) -> bool:
    """Whether gradient hooks were registered on ``p`` (they may change its gradient alone)."""
    return bool(p._backward_hooks) or bool(getattr(p, "_post_accumulate_grad_hooks", None))


def keeps_finite(module: nn.Module) -> str | None:
    """``"any"``, ``"wide"`` (float32/float64 only) or None: see :data:`KEEPS_FINITE`.

    Exact types only: a subclass may override ``forward`` with anything.
    """
    kind = type(module)
    if kind in KEEPS_FINITE:
        return "any"
    if kind in KEEPS_FINITE_WIDE:
        return "wide"
    return None


def weight_from_bias(model: nn.Module, params: list[tuple[str, nn.Parameter]]) -> dict[int, int]:
    """Parameter index of a layer's weight -> index of its bias, where the rule holds.

    Only for a weight and bias held by exactly one module, of an exact type in
    :data:`WEIGHT_FROM_BIAS`: a weight shared with another module gets gradient
    from there too.
    """
    index = {id(p): j for j, (_, p) in enumerate(params)}
    holders: dict[int, int] = {}
    for module in model.modules():
        for p in module._parameters.values():
            if p is not None:
                holders[id(p)] = holders.get(id(p), 0) + 1
    via: dict[int, int] = {}
    for module in model.modules():
        names = WEIGHT_FROM_BIAS.get(type(module))
        if names is None:
            continue
        weight, bias = (module._parameters.get(n) for n in names)
        if weight is None or bias is None:
            continue
        if holders.get(id(weight)) != 1 or holders.get(id(bias)) != 1:
            continue
        if id(weight) in index and id(bias) in index:
            via[index[id(weight)]] = index[id(bias)]
    return via
