"""On-device statistics of one tensor, gathered for a whole step and copied to the host once.

Every value here is additive (counts, sums, sums of squares, per-unit sums,
histogram counts) or an extreme (min/max), so captures of several calls of one
module, several micro-batches, or several ranks combine exactly.

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
costs. There both ways start with ``aminmax`` and read it; a finite tensor (the
common case) then skips the cleaning and the non-finite count (half the element
passes), a non-finite one takes the ``clean`` way at once. On accelerators the
branch-free ways above are used, so nothing waits for the device before the
step's one copy.

Histograms bin a fixed subsample (statistics stay exact on the full tensor):
short contiguous runs at fixed pseudo-random places, which read memory in lines
where a plain stride would miss the cache once per element. Their range is fixed at the
first capture of each (layer, signal); once the host knows it, the samples of the
whole step are binned together when the step ends: one ``cat``, a shift, a scale
and a ``clamp`` against per-element constants cached across steps, then one
``bincount`` over all histograms at once, each offset into its own block of bins
(per tensor, the same work costs five ops, and ``bincount``'s fixed cost
dominates at these sizes).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
import torch

from nbviz.probes import finite

#: Statistic vector layout on the host, one per slot and step.
STAT_FIELDS = ("count", "sum", "sumsq", "min", "max", "nonzero", "nonfinite")
N_STATS = len(STAT_FIELDS)
_SUM, _SUMSQ, _MIN, _MAX, _NONZERO, _NONFINITE = 1, 2, 3, 4, 5, 6

#: At most this many elements of a tensor are binned for its histogram.
HIST_SAMPLE = 8192

#: Float32 sums of 0/1 values are exact below this many terms.
_EXACT_F32 = 2**24

#: Padding of the histogram range fixed at the first capture, as a fraction of the
#: observed span on each side, per signal: weights spread and activations grow
#: while training, gradients change scale most.
HIST_PADDING = {"activation": 0.5, "weight": 0.5, "gradient": 1.0}

#: The histogram sample is this many contiguous runs of ``HIST_RUN`` elements.
HIST_RUN = 64
_HIST_RUNS = HIST_SAMPLE // HIST_RUN


def _cheap_to_read(t: torch.Tensor) -> bool:
    """Whether reading a 0-d result of ``t`` makes nobody wait (true on the CPU)."""
    return t.device.type == "cpu"


def real_view(x: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real and imaginary parts (a trailing dimension of 2).

    Its statistics and histograms are then those of the components: the norm is
    the complex norm, and a NaN in either part is counted.
    """
    return torch.view_as_real(x.resolve_conj()) if x.is_complex() else x


def _float(x: torch.Tensor) -> torch.Tensor:
    x = x.detach()  # a complex tensor comes as its real_view (StepCapture's entry points)
    if x.dtype not in (torch.float32, torch.float64):
        x = x.float()
    return x


@dataclass
class HistState:
    """Per (layer, signal): the histogram range, fixed at the first capture.

    The first capture computes the range on the device (``lo_dev``/``hi_dev``) and
    sends it to the host with the step's numbers; from then on ``lo``/``hi`` are
    host floats and binning is a ``clamp``, a scale and one ``bincount``.
    """

    bins: int
    padding: float
    lo: float | None = None
    hi: float | None = None
    lo_dev: torch.Tensor | None = None  # 0-d, until the host knows the range
    hi_dev: torch.Tensor | None = None
    #: Several ranks feed this histogram: the first capture keeps its samples
    #: (``pending``) until the ranks agree on one range (:meth:`agree`), so that
    #: every rank bins into the same bins and the counts add up.
    defer: bool = False
    pending: list[torch.Tensor] = field(default_factory=list)

    def fix_range(self, sample: torch.Tensor) -> None:
        mn, mx = torch.aminmax(sample)
        span = mx - mn
        span = torch.where(span > 0, span, mx.abs().clamp(min=1e-12))
        lo = torch.where(mn >= 0, torch.zeros_like(mn), mn - self.padding * span)
        hi = mx + self.padding * span
        self.lo_dev, self.hi_dev = lo, hi

    def set_range(self, lo: float, hi: float) -> None:
        """The range, now on the host (first one wins)."""
        if self.lo is None:
            self.lo, self.hi = lo, hi
            self.lo_dev = self.hi_dev = None

    def counts(self, sample: torch.Tensor, finite: bool = False) -> tuple[torch.Tensor, bool]:
        """``[underflow, bins..., overflow]`` of a sample, plus ``[lo, hi]`` if not yet on host.

        Returns the counts and whether the range was appended. NaN is not binned;
        infinities fall in the underflow/overflow bins. ``finite``: the caller
        knows the sample holds no NaN.
        """
        if self.lo is not None:
            assert self.hi is not None
            width = (self.hi - self.lo) / self.bins
            start = self.lo - width
            # bin 0 takes everything below lo, bin bins+1 everything at or above hi
            idx = sample.clamp(start, self.hi).sub_(start).mul_(1.0 / width)
            if finite:
                return torch.bincount(idx.long(), minlength=self.bins + 2), False
            weights = (sample == sample).to(sample.dtype)  # NaN weighs nothing
            idx = torch.nan_to_num_(idx, nan=0.0)
            return torch.bincount(idx.long(), weights, minlength=self.bins + 2), False
        if self.defer:
            # counts follow in agree(); the zeros keep the entry's layout ([lo, hi] included)
            self.pending.append(sample.detach().clone())
            return torch.zeros(self.bins + 4, dtype=sample.dtype, device=sample.device), True
        if self.lo_dev is None or self.lo_dev.device != sample.device:
            self.fix_range(torch.nan_to_num(sample, nan=0.0, posinf=0.0, neginf=0.0))
        assert self.lo_dev is not None and self.hi_dev is not None
        out = self._device_counts(sample)
        return torch.cat([out, torch.stack([self.lo_dev, self.hi_dev]).to(out.dtype)]), True

    def _device_counts(self, sample: torch.Tensor) -> torch.Tensor:
        """``[underflow, bins..., overflow]`` over the range still on the device."""
        assert self.lo_dev is not None and self.hi_dev is not None
        inf = float("inf")
        values = torch.nan_to_num(sample, nan=0.0, posinf=inf, neginf=-inf)
        scale = self.bins / (self.hi_dev - self.lo_dev)
        idx = ((values - self.lo_dev) * scale).floor_().clamp_(-1, self.bins).add_(1).long()
        out = torch.zeros(self.bins + 2, dtype=sample.dtype, device=sample.device)
        out.index_add_(0, idx, (sample == sample).to(sample.dtype))  # NaN weighs nothing
        return out

    def pending_extremes(self) -> tuple[float, float]:
        """Min and max of the first kept sample (what a single process fixes its range from)."""
        first = torch.nan_to_num(self.pending[0], nan=0.0, posinf=0.0, neginf=0.0)
        mn, mx = torch.aminmax(first)
        return float(mn), float(mx)

    def agree(self, mn: float, mx: float) -> np.ndarray:
        """Fix the range from the ranks' common sample extremes and bin the kept samples.

        Returns this rank's ``[underflow, bins..., overflow]`` counts (float64),
        to be summed over the ranks; the range is then known on the host.
        """
        sample = self.pending[0]
        self.lo = self.hi = None
        self.fix_range(torch.tensor([mn, mx], dtype=sample.dtype, device=sample.device))
        total = self._device_counts(self.pending[0])
        for s in self.pending[1:]:
            total += self._device_counts(s)
        assert self.lo_dev is not None and self.hi_dev is not None
        lo, hi = float(self.lo_dev), float(self.hi_dev)
        self.pending.clear()
        self.defer = False
        self.set_range(lo, hi)
        return total.cpu().numpy().astype(np.float64)


#: Tensors at least this large take their element-wise temporaries from :class:`Scratch`.
SCRATCH_MIN = 1 << 16


class Scratch:
    """A reusable CPU buffer for element-wise temporaries, one per dtype.

    Allocating a fresh megabyte-sized temporary at every capture costs page faults
    (the allocator hands large freed blocks back to the system between captures);
    one buffer the size of the largest watched tensor does not.
    """

    def __init__(self) -> None:
        self._buffers: dict[torch.dtype, torch.Tensor] = {}

    def like(self, flat: torch.Tensor) -> torch.Tensor:
        """An uninitialised 1-d tensor with ``flat``'s size and dtype, valid until the next call."""
        n = flat.numel()
        buf = self._buffers.get(flat.dtype)
        if buf is None or buf.numel() < n:
            buf = self._buffers[flat.dtype] = torch.empty(n, dtype=flat.dtype)
        return buf[:n]


def _hist_sample(flat: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """About ``HIST_SAMPLE`` elements of a 1-d tensor (all of it when small), and whether a copy.

    Larger tensors give ``HIST_RUN``-element runs at fixed pseudo-random places
    (the same places at every capture, so histograms stay comparable), which spread
    over rows and columns alike whatever the tensor's shape.
    """
    n = flat.numel()
    if n <= HIST_SAMPLE:
        return flat, False
    return torch.index_select(flat, 0, _sample_index(n, flat.device)), True


_SAMPLE_INDEX: dict[tuple[int, torch.device], torch.Tensor] = {}


def _sample_index(n: int, device: torch.device) -> torch.Tensor:
    key = (n, device)
    index = _SAMPLE_INDEX.get(key)
    if index is None:
        if len(_SAMPLE_INDEX) >= 256:
            _SAMPLE_INDEX.clear()
        # distinct run-sized slots, so runs never overlap; random slots start at
        # every offset within a row that a multiple of HIST_RUN can reach
        rng = np.random.default_rng(n)
        slots = np.sort(rng.choice(n // HIST_RUN, _HIST_RUNS, replace=False))
        flat_index = (slots[:, None] * HIST_RUN + np.arange(HIST_RUN)).reshape(-1)
        index = _SAMPLE_INDEX[key] = torch.from_numpy(flat_index).to(device)
    return index


@dataclass
class HistInput:
    """What a tensor's histogram needs: its state, the flat tensor, whether it is finite."""

    state: HistState
    flat: torch.Tensor
    finite: bool


Parts = tuple[tuple[int, ...], list[torch.Tensor], list[torch.Tensor], "HistInput | None"]


class BinCache:
    """Per-element constants of a step's batched binning, kept while the layout repeats.

    A step's histogram samples are binned in one pass against per-element
    ``start``, ``scale`` and block ``offset`` values; those depend only on which
    histograms are in the step, their sample sizes and ranges (fixed once known),
    so consecutive steps reuse them.
    """

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._consts: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def constants(
        self, hists: list[HistState], sizes: list[int], like: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        key = (tuple(map(id, hists)), tuple(sizes), like.dtype, like.device)
        if key != self._key or self._consts is None:
            self._consts = _bin_constants(hists, sizes, like)
            self._key = key
        return self._consts


def _bin_constants(
    hists: list[HistState], sizes: list[int], like: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per element: ``start`` (one bin below the range), ``1 / width``, the block's first bin."""
    rows, first = [], 0
    for h in hists:
        assert h.lo is not None and h.hi is not None
        width = (h.hi - h.lo) / h.bins
        rows.append((h.lo - width, 1.0 / width, float(first)))
        first += h.bins + 2
    table = torch.tensor(rows, dtype=torch.float64)
    per = torch.repeat_interleave(table, torch.tensor(sizes), dim=0)
    per = per.to(dtype=like.dtype, device=like.device)
    return per[:, 0].contiguous(), per[:, 1].contiguous(), per[:, 2].contiguous()


@dataclass
class Entry:
    """One captured tensor: where its numbers go once they reach the host."""

    slot: Hashable  # the (layer, signal) the numbers belong to
    count: int
    scalars: tuple[int, ...]  # STAT_FIELDS indices of the 0-d results, in order
    units: int = 0  # number of units (per-unit nonzero count and sum follow), 0 when none
    hist: HistState | None = None
    hist_range: bool = False  # the histogram counts are followed by [lo, hi]
    hist_batch: int = -1  # row of the step's batched histogram counts, -1 when not batched
    #: A 0-d tensor that is non-finite exactly when an element was (for the sentinel).
    witness: torch.Tensor | None = None
    source: torch.Tensor | None = None  # raw entries: the tensor, for the rare clean redo
    vector_sizes: tuple[int, ...] = field(default=())


def clean_parts(
    x: torch.Tensor,
    unit_dim: int | None = None,
    hist: HistState | None = None,
    scratch: Scratch | None = None,
) -> Parts:
    """Statistics of ``x`` with non-finite elements counted and left out of the moments.

    Returns ``(fields, scalars, vectors, hist)``: 0-d results for the listed
    STAT_FIELDS, vectors (per-unit nonzero count and sum) and what the histogram
    needs (see :class:`HistInput`), ``None`` without ``hist``. Without units the sum
    and nonzero count are scalars; with units they are the host's sums of the
    per-unit vectors.
    """
    xf = _float(x)
    n = xf.numel()
    flat = xf.reshape(-1)
    if _cheap_to_read(flat):
        mn, mx = torch.aminmax(flat)
        lo, hi = mn.item(), mx.item()
        if math.isfinite(lo) and math.isfinite(hi):
            return _finite_parts(xf, flat, mn, mx, lo >= 0, unit_dim, hist, scratch)
    xc = torch.nan_to_num(flat, nan=0.0, posinf=0.0, neginf=0.0)
    # x*0 is 0 exactly where x is finite, NaN elsewhere
    bad = torch.nan_to_num_(flat.mul(0.0), nan=1.0)
    nonfinite = bad.sum(dtype=torch.float64) if n >= _EXACT_F32 else bad.sum()
    mn, mx = torch.aminmax(xc)
    sumsq = torch.dot(xc, xc)
    sign = xc.sign()
    vectors: list[torch.Tensor] = []
    if unit_dim is not None:
        shape = xf.shape
        dims = [d for d in range(len(shape)) if d != unit_dim]
        per_unit = n // max(shape[unit_dim], 1)
        dtype = torch.float64 if per_unit >= _EXACT_F32 else None
        vectors.append(sign.abs_().view(shape).sum(dim=dims, dtype=dtype))
        vectors.append(xc.view(shape).sum(dim=dims))
        fields: tuple[int, ...] = (_SUMSQ, _MIN, _MAX, _NONFINITE)
        scalars = [sumsq, mn, mx, nonfinite]
    else:
        nonzero = torch.dot(sign, sign) if n < _EXACT_F32 else sign.abs_().sum(dtype=torch.float64)
        fields = (_SUM, _SUMSQ, _MIN, _MAX, _NONZERO, _NONFINITE)
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
) -> Parts:
    """``clean_parts`` of a tensor known to be finite: no cleaning, nothing non-finite to count.

    The hot path of every capture: positional arguments and a fresh ``sign`` for
    small tensors, as keyword parsing and buffer slicing cost more than the op there.
    """
    n = flat.numel()
    if scratch is not None and n >= SCRATCH_MIN:
        sign = torch.sign(flat, out=scratch.like(flat))
    else:
        sign = flat.sign()
    vectors: list[torch.Tensor] = []
    if unit_dim is not None:
        shape = xf.shape
        dims = _other_dims(len(shape), unit_dim)
        if not nonnegative:  # signs of a ReLU output are already 0 or 1
            sign.abs_()
        if n // max(shape[unit_dim], 1) >= _EXACT_F32:
            vectors.append(sign.view(shape).sum(dims, dtype=torch.float64))
        else:
            vectors.append(sign.view(shape).sum(dims))
        vectors.append(xf.sum(dims))
        fields: tuple[int, ...] = (_SUMSQ, _MIN, _MAX)
        scalars = [torch.dot(flat, flat), mn, mx]
    else:
        nonzero = torch.dot(sign, sign) if n < _EXACT_F32 else sign.abs_().sum(dtype=torch.float64)
        fields = (_SUM, _SUMSQ, _MIN, _MAX, _NONZERO)
        scalars = [flat.sum(), torch.dot(flat, flat), mn, mx, nonzero]
    hist_in = HistInput(hist, flat, finite=True) if hist is not None else None
    return fields, scalars, vectors, hist_in


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
    if _cheap_to_read(flat):
        lo, hi = mn.item(), mx.item()
        if math.isfinite(lo) and math.isfinite(hi):
            return _finite_parts(xf, flat, mn, mx, lo >= 0, None, hist, scratch)
        return clean_parts(x, None, hist)
    # sign(NaN) is 0 and sign(inf) is 1, but a non-finite tensor is redone anyway
    sign = flat.sign()
    nonzero = torch.dot(sign, sign) if n < _EXACT_F32 else sign.abs_().sum(dtype=torch.float64)
    scalars = [flat.sum(), torch.dot(flat, flat), mn, mx, nonzero]
    hist_in = HistInput(hist, flat, finite=False) if hist is not None else None
    return (_SUM, _SUMSQ, _MIN, _MAX, _NONZERO), scalars, [], hist_in


_CONSTANTS: dict[tuple[torch.dtype, bool], torch.Tensor] = {}


def _witness(x: torch.Tensor, fields: tuple[int, ...], scalars: list[torch.Tensor]) -> torch.Tensor:
    """From a tensor's statistics, a 0-d tensor non-finite exactly when an element was.

    On the CPU the host has already checked (a non-finite tensor is the only one
    measured the clean way), so a constant does; elsewhere the non-finite count
    becomes NaN where positive, on the device.
    """
    bad = _NONFINITE in fields
    dtype = finite.sum_dtype(x.dtype)  # as the sentinel's own sums
    if _cheap_to_read(x):
        key = (dtype, bad)
        const = _CONSTANTS.get(key)
        if const is None:
            const = _CONSTANTS[key] = torch.tensor(float("nan") if bad else 0.0, dtype=dtype)
        return const
    count = scalars[fields.index(_NONFINITE)]
    return torch.where(count > 0, float("nan"), 0.0).to(dtype)


class StepCapture:
    """Collects the device tensors of one capture step; one host copy at the end."""

    def __init__(
        self, bins: int, scratch: Scratch | None = None, bin_cache: BinCache | None = None
    ) -> None:
        self.bins = bins
        self.scratch = scratch
        self.bin_cache = bin_cache
        self.entries: list[Entry] = []
        self.scalars: list[torch.Tensor] = []
        self.vectors: list[torch.Tensor] = []
        # histogram samples binned together at the end (their ranges are on the host)
        self._samples: list[torch.Tensor] = []
        self._sample_hists: list[HistState] = []
        self._weighted = False  # some batched sample may hold NaN

    def add_clean(
        self,
        slot: Hashable,
        x: torch.Tensor,
        unit_dim: int | None = None,
        hist: HistState | None = None,
    ) -> Entry:
        """Statistics of a tensor that may be gone (or changed) when the step ends."""
        measured = self.measure_clean(slot, x, unit_dim, hist)
        self.add_measured(measured)
        return measured[0]

    def measure_clean(
        self,
        slot: Hashable,
        x: torch.Tensor,
        unit_dim: int | None = None,
        hist: HistState | None = None,
    ) -> tuple[Entry, list[torch.Tensor], list[torch.Tensor]]:
        """``add_clean``'s numbers without adding them yet (see ``add_measured``)."""
        x = real_view(x)
        fields, scalars, vectors, hist_in = clean_parts(x, unit_dim, hist, self.scratch)
        units = x.shape[unit_dim] if unit_dim is not None else 0
        entry = Entry(slot, x.numel(), fields, units, hist)
        entry.witness = _witness(x, fields, scalars)
        self._histogram(entry, hist_in, vectors, keep=False)
        return entry, scalars, vectors

    def add_measured(self, measured: tuple[Entry, list[torch.Tensor], list[torch.Tensor]]) -> None:
        self._add(*measured)

    def add_raw(self, slot: Hashable, x: torch.Tensor, hist: HistState | None = None) -> None:
        """Statistics of a tensor that stays alive until the step's host copy."""
        x = real_view(x)
        fields, scalars, vectors, hist_in = raw_parts(x, hist, self.scratch)
        # on CPU raw_parts has already checked the tensor and cleaned it if needed
        source = None if _cheap_to_read(x) else x.detach()
        entry = Entry(slot, x.numel(), fields, 0, hist, source=source)
        self._histogram(entry, hist_in, vectors, keep=True)
        self._add(entry, scalars, vectors)

    def _histogram(
        self, entry: Entry, hist_in: HistInput | None, vectors: list, keep: bool
    ) -> None:
        """Bin now (range still on the device) or queue the sample for the step's batch.

        ``keep``: the tensor stays unchanged until ``to_host``, so a view will do;
        otherwise a sample that is a view gets copied.
        """
        if hist_in is None:
            return
        state = hist_in.state
        sample, copied = _hist_sample(hist_in.flat)
        if state.lo is None or state.bins != self.bins:
            counts, entry.hist_range = state.counts(sample, finite=hist_in.finite)
            vectors.append(counts)
            return
        if not (keep or copied):
            sample = sample.clone()
        entry.hist_batch = len(self._samples)
        self._samples.append(sample)
        self._sample_hists.append(state)
        self._weighted |= not hist_in.finite

    def _binned(self) -> torch.Tensor:
        """``[underflow, bins..., overflow]`` of every queued sample, block after block."""
        samples = torch.cat(self._samples)
        sizes = [t.numel() for t in self._samples]
        if self.bin_cache is not None:
            start, scale, first = self.bin_cache.constants(self._sample_hists, sizes, samples)
        else:
            start, scale, first = _bin_constants(self._sample_hists, sizes, samples)
        idx = samples.sub_(start).mul_(scale).clamp_(0, self.bins + 1).floor_().add_(first)
        total = len(self._samples) * (self.bins + 2)
        if not self._weighted:
            return torch.bincount(idx.long(), minlength=total)
        # NaN weighs nothing; infinities were clamped into the outer bins
        weights = (idx == idx).to(samples.dtype)
        idx = torch.nan_to_num_(idx, nan=0.0)
        return torch.bincount(idx.long(), weights, minlength=total)

    def _add(self, entry: Entry, scalars: list, vectors: list) -> None:
        entry.vector_sizes = tuple(v.numel() for v in vectors)
        self.entries.append(entry)
        self.scalars.extend(scalars)
        self.vectors.extend(vectors)

    def __len__(self) -> int:
        return len(self.entries)

    def to_host(self, extra: list[torch.Tensor] = ()) -> tuple[np.ndarray, list[np.ndarray]]:
        """Copy every result (plus ``extra`` tensors) to the host in one transfer.

        Returns the step's flat float64 array (scalars, vectors, then the batched
        histogram counts) and the ``extra`` pieces from it.
        """
        pieces: list[torch.Tensor] = []
        if self.scalars:
            pieces.append(torch.stack(self.scalars))  # promotes mixed float dtypes
        pieces.extend(v.reshape(-1) for v in self.vectors)
        if self._samples:
            pieces.append(self._binned())
        pieces.extend(t.reshape(-1) for t in extra)
        if not pieces:
            return np.zeros(0), []
        # a float64 piece first makes torch.cat promote everything to float64 (exactly)
        head = torch.zeros(0, dtype=torch.float64, device=pieces[0].device)
        flat = torch.cat([head, *pieces]).cpu().numpy()
        n_main = len(self.scalars) + sum(v.numel() for v in self.vectors)
        n_main += len(self._samples) * (self.bins + 2)
        extras, off = [], n_main
        for t in extra:
            extras.append(flat[off : off + t.numel()])
            off += t.numel()
        return flat[:n_main], extras


@dataclass
class SlotResult:
    """Host-side totals of one slot for one step (several calls combined)."""

    stats: np.ndarray  # N_STATS
    hist: np.ndarray | None = None  # bins + 2: underflow, bins..., overflow
    hist_range: tuple[float, float] = (0.0, 0.0)
    unit_nonzero: np.ndarray | None = None
    unit_sum: np.ndarray | None = None
    unit_count: float = 0.0
    unit_mismatch: bool = False
    hist_state: HistState | None = None  # where the range lives (ranks agree on it)


def _redo_clean(entries: list[tuple[int, Entry]], parts: dict[int, tuple]) -> None:
    """Recompute raw entries that saw a non-finite value, the clean way (one more copy)."""
    capture = StepCapture(0)
    for _, e in entries:
        assert e.source is not None
        capture.add_clean(e.slot, e.source, None, None)
    flat, _ = capture.to_host()
    n = len(capture.scalars)
    off = 0
    for (i, e), ce in zip(entries, capture.entries, strict=True):
        k = len(ce.scalars)
        stats = np.zeros(N_STATS)
        stats[0] = e.count
        stats[list(ce.scalars)] = flat[off : off + k]
        off += k
        parts[i] = (stats, parts[i][1])
    assert off == n


def combine(entries: list[Entry], flat: np.ndarray) -> dict[Hashable, SlotResult]:
    """Per slot: sums of the captured vectors (min/max for the extremes)."""
    n_scalars = sum(len(e.scalars) for e in entries)
    n_vectors = sum(sum(e.vector_sizes) for e in entries)
    scalars, vectors = flat[:n_scalars], flat[n_scalars : n_scalars + n_vectors]
    binned = flat[n_scalars + n_vectors :]
    parts: dict[int, tuple[np.ndarray, list[np.ndarray]]] = {}
    redo: list[tuple[int, Entry]] = []
    s_off = v_off = 0
    for i, e in enumerate(entries):
        stats = np.zeros(N_STATS)
        k = len(e.scalars)
        stats[list(e.scalars)] = scalars[s_off : s_off + k]
        s_off += k
        vecs = []
        for size in e.vector_sizes:
            vecs.append(vectors[v_off : v_off + size])
            v_off += size
        if e.units:
            stats[_NONZERO] = vecs[0].sum()
            stats[_SUM] = vecs[1].sum()
        stats[0] = e.count
        if e.source is not None and not (math.isfinite(stats[_MIN]) and math.isfinite(stats[_MAX])):
            redo.append((i, e))
        parts[i] = (stats, vecs)
    if redo:
        _redo_clean(redo, parts)
    results: dict[Hashable, SlotResult] = {}
    for i, e in enumerate(entries):
        stats, vecs = parts[i]
        res = results.get(e.slot)
        if res is None:
            res = results[e.slot] = SlotResult(stats=stats.copy())
        else:
            s = res.stats
            s[[0, 1, 2, 5, 6]] += stats[[0, 1, 2, 5, 6]]
            s[3] = min(s[3], stats[3])
            s[4] = max(s[4], stats[4])
        j = 0
        if e.units:
            nz, us = vecs[0], vecs[1]
            j = 2
            if res.unit_nonzero is None and not res.unit_mismatch:
                res.unit_nonzero, res.unit_sum = nz.copy(), us.copy()
                res.unit_count = e.count / e.units
            elif res.unit_nonzero is not None and res.unit_nonzero.shape == nz.shape:
                res.unit_nonzero += nz
                res.unit_sum += us
                res.unit_count += e.count / e.units
            else:
                res.unit_mismatch = True
                res.unit_nonzero = res.unit_sum = None
        if e.hist is not None:
            if e.hist_batch >= 0:
                width = e.hist.bins + 2
                counts = binned[e.hist_batch * width : (e.hist_batch + 1) * width]
            else:
                counts = vecs[j]
            if e.hist_range:
                lo, hi = float(counts[-2]), float(counts[-1])
                counts = counts[:-2]
                e.hist.set_range(lo, hi)
            if res.hist is None:
                assert e.hist.lo is not None and e.hist.hi is not None
                res.hist, res.hist_range = counts.copy(), (e.hist.lo, e.hist.hi)
                res.hist_state = e.hist
            else:
                res.hist += counts
    return results


def summarize(stats: np.ndarray) -> dict[str, float]:
    """Turn a statistic vector into the stored columns (mean, std, ... over finite values)."""
    count, total, sumsq, mn, mx, nonzero, nonfinite = (float(v) for v in stats)
    finite = count - nonfinite
    if finite > 0:
        mean = total / finite
        var = max(sumsq / finite - mean * mean, 0.0)
        std = var**0.5
        zeros = count - nonzero - nonfinite
        zero_frac = zeros / count
    else:
        mean = std = mn = mx = zero_frac = float("nan")
    return {
        "count": int(count),
        "mean": mean,
        "std": std,
        "min": mn,
        "max": mx,
        "zero_frac": zero_frac,
        "nonfinite": int(nonfinite),
        "norm": sumsq**0.5,
    }
