"""Histograms of the probe's tensors: a fixed sample of each, binned on the device.

Histograms bin a fixed subsample (statistics stay exact on the full tensor):
short contiguous runs at fixed pseudo-random places, which read memory in lines
where a plain stride would miss the cache once per element. Their range is fixed at the
first capture of each (layer, signal); once the host knows it, the samples of the
whole step are binned together when the step ends: one ``cat``, a shift, a scale
and a ``clamp`` against constants cached across steps (one per row for the full
samples, laid out as the rows of one block; one per element for the smaller ones:
:func:`bin_layout`), then one ``bincount`` over all histograms at once, each offset
into its own block of bins (per tensor, the same work costs five ops, and
``bincount``'s fixed cost dominates at these sizes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

#: At most this many elements of a tensor are binned for its histogram.
HIST_SAMPLE = 8192

#: Padding of the histogram range fixed at the first capture, as a fraction of the
#: observed span on each side, per signal: weights spread and activations grow
#: while training, gradients change scale most.
HIST_PADDING = {"activation": 0.5, "weight": 0.5, "gradient": 1.0}

#: The histogram sample is this many contiguous runs of ``HIST_RUN`` elements.
HIST_RUN = 64
_HIST_RUNS = HIST_SAMPLE // HIST_RUN


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


def hist_sample(flat: torch.Tensor) -> tuple[torch.Tensor, bool]:
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


@dataclass(slots=True)
class HistInput:
    """What a tensor's histogram needs: its state, the flat tensor, whether it is finite."""

    state: HistState
    flat: torch.Tensor
    finite: bool


class BinCache:
    """A step's binning layout and constants, kept while the layout repeats.

    A step's histogram samples are binned in one pass against ``start``, ``scale``
    and block ``offset`` values (:func:`bin_layout`); those depend only on which
    histograms are in the step, their sample sizes and ranges (fixed once known),
    so consecutive steps reuse them.
    """

    def __init__(self) -> None:
        self._layout_key: tuple | None = None
        self._layout: BinLayout | None = None

    def layout(self, hists: list[HistState], sizes: list[int], like: torch.Tensor) -> BinLayout:
        """:func:`bin_layout`, reused while the step's histograms and sizes repeat."""
        key = (tuple(map(id, hists)), tuple(sizes), like.dtype, like.device)
        if key != self._layout_key or self._layout is None:
            self._layout = bin_layout(hists, sizes, like)
            self._layout_key = key
        return self._layout


def bin_constants(
    hists: list[HistState],
    sizes: list[int],
    like: torch.Tensor,
    which: list[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per element of the samples of ``which`` (indices into ``hists``, in that order;
    default all): ``start`` (one bin below the range), ``1 / width`` (in ``like``'s
    dtype), and the first bin of its histogram's block (block ``i`` for ``hists[i]``;
    an integer tensor). ``sizes[i]`` is the number of elements of sample ``i``."""
    firsts, total = [], 0
    for h in hists:
        firsts.append(total)
        total += h.bins + 2
    which = list(range(len(hists))) if which is None else which
    rows = []
    for i in which:
        h = hists[i]
        assert h.lo is not None and h.hi is not None
        width = (h.hi - h.lo) / h.bins
        rows.append((h.lo - width, 1.0 / width))
    counts = torch.tensor([sizes[i] for i in which], dtype=torch.int64)
    table = torch.tensor(rows, dtype=torch.float64).reshape(-1, 2)
    per = torch.repeat_interleave(table, counts, dim=0)
    per = per.to(dtype=like.dtype, device=like.device)
    index_dtype = torch.int32 if total < 2**31 else torch.int64
    offset = torch.repeat_interleave(
        torch.tensor([firsts[i] for i in which], dtype=index_dtype), counts
    )
    return per[:, 0].contiguous(), per[:, 1].contiguous(), offset.to(like.device)


@dataclass
class BinLayout:
    """How a step's samples are laid out for binning (:func:`bin_layout`).

    The samples of ``HIST_SAMPLE`` elements (every tensor larger than that) come
    first, one row each of a ``(rows, HIST_SAMPLE)`` block whose constants are one
    value per row, broadcast (no per-element arrays to read); the other samples
    follow with per-element constants, as :func:`bin_constants` gives them. Each
    sample keeps its own histogram's block of bins, so the order changes nothing
    in the counts.
    """

    order: list[int]  # the samples' indices, in the order they are laid out
    rows: int  # how many full samples lead, one row each
    row_consts: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (rows, 1) start, scale, first
    rest_consts: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # per element of the rest


def bin_layout(hists: list[HistState], sizes: list[int], like: torch.Tensor) -> BinLayout:
    """The layout and constants of a step's samples: full samples as rows, then the rest.

    ``start`` is one bin below the range, ``scale`` ``1 / width`` (in ``like``'s
    dtype), ``first`` the first bin of the histogram's block (block ``i`` for the
    ``i``-th histogram, whatever its place in the layout).
    """
    full = [i for i, n in enumerate(sizes) if n == HIST_SAMPLE]
    rest = [i for i, n in enumerate(sizes) if n != HIST_SAMPLE]
    start, scale, offset = bin_constants(hists, [1] * len(hists), like, full)  # one per row
    row_consts = (start[:, None], scale[:, None], offset[:, None])
    rest_consts = bin_constants(hists, sizes, like, rest)
    return BinLayout(full + rest, len(full), row_consts, rest_consts)
