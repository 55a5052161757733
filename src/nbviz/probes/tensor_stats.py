"""The statistics of one tensor, as 0-d and per-unit results left on the device.

Cost model (CPU, measured): each torch op costs a few microseconds of dispatch
plus ~0.03-0.1 ns per element read (reductions) or ~0.1 ns per element written;
boolean reductions (``count_nonzero``, ``isfinite().sum()``) are 5-30x slower
than float ones, ``vector_norm(ord=0)`` 100x. So every statistic below is a float
op, counts that the host knows (the element count) are not computed, and all the
results of one step go to the host in one ``torch.cat`` and one copy.

Two ways to read a tensor:

* ``clean`` (activations, output and parameter gradients: tensors that are gone
  or may change before the step ends): non-finite elements are replaced by zero
  first and counted, so the moments never turn NaN.
* ``raw`` (weights, read when the step ends and unchanged until the host copy):
  the moments are taken as they are. ``aminmax`` propagates NaN and infinities,
  so a finite min and max prove that no element is non-finite; when one is not
  finite the host recomputes that tensor the ``clean`` way (a rare, second copy).

On the CPU there is no device to wait for: reading a 0-d result costs what an op
costs. There both ways start with ``aminmax`` and read it (an output whose units'
peaks are kept starts with each unit's largest and smallest value instead, which
tell the extremes as well); a finite tensor (the common case) then skips the
cleaning and the non-finite count (half the element passes), a non-finite one
takes the ``clean`` way at once. On accelerators the
branch-free ways above are used, so nothing waits for the device before the
step's one copy.

Small float32 CPU tensors (biases, norm scales: a model has dozens) are measured
together (:func:`batch_parts`): one copy of all of them and one segmented
reduction per statistic, where one at a time each took five ops and a check.
"""

from __future__ import annotations

import math

import torch

from nbviz.probes import finite
from nbviz.probes.histogram import HistInput, HistState

#: Statistic vector layout on the host, one per slot and step.
STAT_FIELDS = ("count", "sum", "sumsq", "min", "max", "nonzero", "nonfinite")
N_STATS = len(STAT_FIELDS)
SUM, SUMSQ, MIN, MAX, NONZERO, NONFINITE = 1, 2, 3, 4, 5, 6

#: Float32 sums of 0/1 values are exact below this many terms.
_EXACT_F32 = 2**24


def cheap_to_read(t: torch.Tensor) -> bool:
    """Whether reading a 0-d result of ``t`` makes nobody wait (true on the CPU)."""
    return t.is_cpu


def real_view(x: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real and imaginary parts (a trailing dimension of 2).

    Its statistics and histograms are then those of the components: the norm is
    the complex norm, and a NaN in either part is counted.
    """
    return torch.view_as_real(x.resolve_conj()) if x.is_complex() else x


def _float(x: torch.Tensor) -> torch.Tensor:
    # a complex tensor comes as its real_view (StepCapture's entry points); a detach
    # is an op of its own, skipped where there is no graph to leave
    if x.requires_grad:
        x = x.detach()
    if x.dtype not in _WIDE:
        x = x.float()
    return x


_WIDE = (torch.float32, torch.float64)


#: Tensors at least this large take their element-wise temporaries from :class:`Scratch`.
SCRATCH_MIN = 1 << 16


class Scratch:
    """A reusable CPU buffer for element-wise temporaries, one per dtype.

    Allocating a fresh megabyte-sized temporary at every capture costs page faults
    (the allocator hands large freed blocks back to the system between captures);
    one buffer the size of the largest watched tensor does not.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[torch.dtype, str], torch.Tensor] = {}
        # the views ``like`` hands out, by dtype and size (a slice is an op of its own,
        # and a capture asks for the same few sizes again and again)
        self._views: dict[tuple[torch.dtype, int], torch.Tensor] = {}

    def like(self, flat: torch.Tensor) -> torch.Tensor:
        """An uninitialised 1-d tensor with ``flat``'s size and dtype, valid until the next call
        (the same view for the same size: pass it only as a 1-d ``out`` of that size)."""
        key = (flat.dtype, flat.numel())
        view = self._views.get(key)
        if view is None:
            n = key[1]
            buf = self._buffers.get((flat.dtype, ""))
            if buf is None or buf.numel() < n:
                buf = self._buffers[(flat.dtype, "")] = torch.empty(n, dtype=flat.dtype)
                self._views.clear()  # views of the buffer replaced
            if len(self._views) >= 64:  # sizes that vary (batches of any length): few kept
                self._views.clear()
            view = self._views[key] = buf[:n]
        return view

    def take(self, n: int, dtype: torch.dtype, use: str) -> torch.Tensor:
        """An uninitialised 1-d tensor of ``n`` elements for ``use`` (a buffer apart from
        ``like``'s), valid until the next ``take`` for the same use."""
        key = (dtype, use)
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < n:
            buf = self._buffers[key] = torch.empty(n, dtype=dtype)
        return buf[:n]


Parts = tuple[tuple[int, ...], list[torch.Tensor], list[torch.Tensor], "HistInput | None"]


def clean_parts(
    x: torch.Tensor,
    unit_dim: int | None = None,
    hist: HistState | None = None,
    scratch: Scratch | None = None,
    peaks: bool = False,
    zeros: bool = True,
) -> Parts:
    """Statistics of ``x`` with non-finite elements counted and left out of the moments.

    Returns ``(fields, scalars, vectors, hist)``: 0-d results for the listed
    STAT_FIELDS, vectors (per-unit nonzero count and sum; the sum is non-finite
    for a unit that saw a non-finite element; with ``peaks``, then each unit's
    largest finite magnitude, see :func:`unit_peaks`) and what the histogram
    needs (see :class:`HistInput`), ``None`` without ``hist``. Without units the sum
    and nonzero count are scalars; with units they are the host's sums of the
    per-unit vectors. Without ``zeros`` (and without units) the nonzero count is
    left out: a pass over the tensor saved where no one reads it.
    """
    xf = _float(x)
    n = xf.numel()
    flat = xf.reshape(-1)
    if cheap_to_read(flat):
        if peaks and unit_dim is not None:
            # each unit's largest and smallest value give its peak and the whole
            # tensor's extremes: two passes, where aminmax, abs and amax take three
            dims = _other_dims(xf.dim(), unit_dim)
            top, bottom = xf.amax(dims), xf.amin(dims)
            mn, mx = torch.aminmax(torch.cat([bottom, top]))  # NaN and infinities reach them
            lo, hi = mn.item(), mx.item()
            if math.isfinite(lo) and math.isfinite(hi):
                # max |x| of a unit is at its largest or its smallest value
                peak = top if lo >= 0 else torch.maximum(top.abs_(), bottom.abs_())
                return _finite_parts(
                    xf, flat, mn, mx, lo >= 0, unit_dim, hist, scratch, peak, zeros
                )
        else:
            mn, mx = torch.aminmax(flat)
            lo, hi = mn.item(), mx.item()
            if math.isfinite(lo) and math.isfinite(hi):
                return _finite_parts(
                    xf, flat, mn, mx, lo >= 0, unit_dim, hist, scratch, peaks, zeros
                )
    xc = torch.nan_to_num(flat, nan=0.0, posinf=0.0, neginf=0.0)
    # x*0 is 0 exactly where x is finite, NaN elsewhere
    bad = torch.nan_to_num_(flat.mul(0.0), nan=1.0)
    nonfinite = bad.sum(dtype=torch.float64) if n >= _EXACT_F32 else bad.sum()
    mn, mx = torch.aminmax(xc)
    sumsq = torch.dot(xc, xc)
    vectors: list[torch.Tensor] = []
    if unit_dim is None and not zeros:
        fields: tuple[int, ...] = (SUM, SUMSQ, MIN, MAX, NONFINITE)
        scalars = [xc.sum(), sumsq, mn, mx, nonfinite]
        hist_in = HistInput(hist, flat, finite=False) if hist is not None else None
        return fields, scalars, vectors, hist_in
    sign = xc.sign()
    if unit_dim is not None:
        shape = xf.shape
        dims = [d for d in range(len(shape)) if d != unit_dim]
        per_unit = n // max(shape[unit_dim], 1)
        dtype = torch.float64 if per_unit >= _EXACT_F32 else None
        vectors.append(sign.abs_().view(shape).sum(dim=dims, dtype=dtype))
        # summed uncleaned: a unit that saw a non-finite value gets a non-finite sum,
        # which the host turns into "non-finite" for that unit (never "dead"); the
        # layer's sum over the finite values is then a scalar of its own
        vectors.append(xf.sum(dim=dims))
        if peaks:
            vectors.append(unit_peaks(xc.view(shape), tuple(dims), None, False))
        fields = (SUM, SUMSQ, MIN, MAX, NONFINITE)
        scalars = [xc.sum(), sumsq, mn, mx, nonfinite]
    else:
        nonzero = torch.dot(sign, sign) if n < _EXACT_F32 else sign.abs_().sum(dtype=torch.float64)
        fields = (SUM, SUMSQ, MIN, MAX, NONZERO, NONFINITE)
        scalars = [xc.sum(), sumsq, mn, mx, nonzero, nonfinite]
    hist_in = HistInput(hist, flat, finite=False) if hist is not None else None
    return fields, scalars, vectors, hist_in


def _finite_parts(
    xf: torch.Tensor,
    flat: torch.Tensor,
    mn: torch.Tensor,
    mx: torch.Tensor,
    nonnegative: bool,
    unit_dim: int | None,
    hist: HistState | None,
    scratch: Scratch | None,
    peaks: bool | torch.Tensor = False,
    zeros: bool = True,
) -> Parts:
    """``clean_parts`` of a tensor known to be finite: no cleaning, nothing non-finite to count.

    The hot path of every capture: positional arguments and a fresh ``sign`` for
    small tensors, as keyword parsing and buffer slicing cost more than the op there.
    ``peaks``: with ``unit_dim``, True to measure each unit's peak, or the peaks measured.
    """
    n = flat.numel()
    big = scratch is not None and n >= SCRATCH_MIN
    vectors: list[torch.Tensor] = []
    if unit_dim is not None:
        shape = xf.shape
        dims = _other_dims(len(shape), unit_dim)
        if nonnegative:  # signs of a ReLU output are already 0 or 1
            nonzero = torch.sign(flat, out=scratch.like(flat)) if big else flat.sign()
        elif big:  # 1.0 where nonzero in one write, where a sign needs an abs after it
            nonzero = torch.ne(flat, 0, out=scratch.like(flat))
        else:
            nonzero = flat.sign().abs_()
        if n // max(shape[unit_dim], 1) >= _EXACT_F32:
            vectors.append(nonzero.view(shape).sum(dims, dtype=torch.float64))
        else:
            vectors.append(nonzero.view(shape).sum(dims))
        vectors.append(xf.sum(dims))
        if isinstance(peaks, torch.Tensor):
            vectors.append(peaks)
        elif peaks:  # after the per-unit count: the scratch buffer is free again
            vectors.append(unit_peaks(xf, dims, scratch, nonnegative))
        fields: tuple[int, ...] = (SUMSQ, MIN, MAX)
        scalars = [torch.dot(flat, flat), mn, mx]
        hist_in = HistInput(hist, flat, finite=True) if hist is not None else None
        return fields, scalars, vectors, hist_in
    if not zeros:
        scalars = [flat.sum(), torch.dot(flat, flat), mn, mx]
        hist_in = HistInput(hist, flat, finite=True) if hist is not None else None
        return (SUM, SUMSQ, MIN, MAX), scalars, vectors, hist_in
    # the signs' dot with itself counts the nonzero elements: on CPU a sign costs less to
    # write than a 0/1 mask (ne) and sum (65K-262K elements: 12 and 33 us against 20
    # and 40; the same from 1M up)
    sign = torch.sign(flat, out=scratch.like(flat)) if big else flat.sign()
    nonzero = torch.dot(sign, sign) if n < _EXACT_F32 else sign.abs_().sum(dtype=torch.float64)
    scalars = [flat.sum(), torch.dot(flat, flat), mn, mx, nonzero]
    hist_in = HistInput(hist, flat, finite=True) if hist is not None else None
    return (SUM, SUMSQ, MIN, MAX, NONZERO), scalars, vectors, hist_in


def unit_peaks(
    x: torch.Tensor, dims: int | tuple[int, ...], scratch: Scratch | None, nonnegative: bool
) -> torch.Tensor:
    """Each unit's largest magnitude ``max |x|`` over ``dims``: one reduction (and an ``abs``).

    Recorded for outputs shaped ``(batch, tokens, features)``, where a few features
    can hold values orders of magnitude above the rest at a few tokens (massive
    activations): a per-unit mean or zero fraction averages them away, a maximum
    does not. Maxima combine across calls and ranks by taking the larger.
    """
    if nonnegative:  # already magnitudes (a ReLU output)
        return x.amax(dims)
    flat = x.reshape(-1)
    if scratch is not None and flat.numel() >= SCRATCH_MIN:
        mag = torch.abs(flat, out=scratch.like(flat))
    else:
        mag = flat.abs()
    return mag.view(x.shape).amax(dims)


_DIMS: dict[tuple[int, int], int | tuple[int, ...]] = {}


def _other_dims(ndim: int, unit_dim: int) -> int | tuple[int, ...]:
    """The dimensions to reduce for per-unit sums (an int when one, which is cheaper to pass)."""
    key = (ndim, unit_dim)
    dims = _DIMS.get(key)
    if dims is None:
        rest = tuple(d for d in range(ndim) if d != unit_dim)
        dims = _DIMS[key] = rest[0] if len(rest) == 1 else rest
    return dims


def raw_parts(
    x: torch.Tensor, hist: HistState | None = None, scratch: Scratch | None = None
) -> Parts:
    """Statistics of ``x`` as it is (see the module docstring): 4 reductions and a sign."""
    xf = _float(x)
    flat = xf.reshape(-1)
    n = flat.numel()
    mn, mx = torch.aminmax(flat)
    if cheap_to_read(flat):
        lo, hi = mn.item(), mx.item()
        if math.isfinite(lo) and math.isfinite(hi):
            return _finite_parts(xf, flat, mn, mx, lo >= 0, None, hist, scratch)
        return clean_parts(x, None, hist)
    # sign(NaN) is 0 and sign(inf) is 1, but a non-finite tensor is redone anyway
    sign = flat.sign()
    nonzero = torch.dot(sign, sign) if n < _EXACT_F32 else sign.abs_().sum(dtype=torch.float64)
    scalars = [flat.sum(), torch.dot(flat, flat), mn, mx, nonzero]
    hist_in = HistInput(hist, flat, finite=False) if hist is not None else None
    return (SUM, SUMSQ, MIN, MAX, NONZERO), scalars, [], hist_in


#: Float32 CPU tensors of at most this many elements (biases, norm scales) are measured
#: together by :func:`batch_parts`: their five reductions each cost a dispatch more
#: than the elements they read.
BATCH_MAX = 4096
#: ... when there are at least this many of them (a batch costs about as much as that
#: many tensors measured one by one).
BATCH_MIN = 8

#: The statistics :func:`batch_parts` gives each tensor, in its block's columns.
BATCH_FIELDS = (SUM, SUMSQ, MIN, MAX, NONZERO)

_LENGTHS: dict[tuple[int, ...], torch.Tensor] = {}


def batchable(x: torch.Tensor) -> bool:
    """Whether :func:`batch_parts` may measure ``x`` (a small, real float32 tensor on the
    CPU, where its finiteness is read at once; see the module docstring)."""
    return (
        0 < x.numel() <= BATCH_MAX
        and x.dtype == torch.float32
        and cheap_to_read(x)
        and x.layout == torch.strided
    )


def batch_parts(xs: list[torch.Tensor]) -> tuple[list[list[float]], list[torch.Tensor]] | None:
    """The :data:`BATCH_FIELDS` of several small tensors (see :func:`batchable`) at once.

    The tensors are copied into one buffer and each statistic is one segmented
    reduction over it, a dozen ops for any number of tensors where each tensor
    alone takes five or more. Returns each tensor's statistics, read on the host
    already (the tensors are on the CPU), and its elements as a view of the
    buffer (a copy of its own: its histogram sample); or None when some element
    is not finite (the caller then measures each tensor the clean way).
    """
    sizes = tuple(x.numel() for x in xs)
    lengths = _LENGTHS.get(sizes)
    if lengths is None:
        if len(_LENGTHS) >= 64:
            _LENGTHS.clear()
        lengths = _LENGTHS[sizes] = torch.tensor(sizes)
    flat = torch.cat([_flat(x) for x in xs])
    # summed in float64 (the segmented sums add one element after another)
    wide = flat.double()
    sums = torch.segment_reduce(wide, "sum", lengths=lengths)
    if not math.isfinite(sums.sum().item()):  # NaN and infinities reach the sums
        return None
    sumsq = torch.segment_reduce(wide * wide, "sum", lengths=lengths)
    mn = torch.segment_reduce(wide, "min", lengths=lengths)
    mx = torch.segment_reduce(wide, "max", lengths=lengths)
    nonzero = torch.segment_reduce(torch.ne(wide, 0).double(), "sum", lengths=lengths)
    return torch.stack([sums, sumsq, mn, mx, nonzero], dim=1).tolist(), list(flat.split(sizes))


def _flat(x: torch.Tensor) -> torch.Tensor:
    """``x`` detached and 1-d, with no op where it is so already (most small tensors are)."""
    if x.requires_grad:
        x = x.detach()
    return x if x.dim() == 1 else x.reshape(-1)


_CONSTANTS: dict[tuple[torch.dtype, bool], torch.Tensor] = {}


def witness(x: torch.Tensor, fields: tuple[int, ...], scalars: list[torch.Tensor]) -> torch.Tensor:
    """From a tensor's statistics, a 0-d tensor non-finite exactly when an element was.

    On the CPU the host has already checked (a non-finite tensor is the only one
    measured the clean way), so a constant does; elsewhere the non-finite count
    becomes NaN where positive, on the device.
    """
    bad = NONFINITE in fields
    dtype = finite.sum_dtype(x.dtype)  # as the sentinel's own sums
    if cheap_to_read(x):
        key = (dtype, bad)
        const = _CONSTANTS.get(key)
        if const is None:
            const = _CONSTANTS[key] = torch.tensor(float("nan") if bad else 0.0, dtype=dtype)
        return const
    count = scalars[fields.index(NONFINITE)]
    return torch.where(count > 0, float("nan"), 0.0).to(dtype)
