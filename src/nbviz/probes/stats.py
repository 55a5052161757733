"""On-device statistics of one tensor, gathered for a whole step and copied to the host once.

Every value here is additive (counts, sums, sums of squares, per-unit sums,
histogram counts) or an extreme (min/max), so captures of several calls of one
module, several micro-batches, or several ranks combine exactly.

Cost model (CPU, measured): a float reduction such as ``sum`` is ~0.1 ns per
element, an element-wise op that writes a tensor ~0.2 ns, a boolean reduction
10x more; so everything below uses float ops only, and histograms bin a fixed
strided subsample (statistics stay exact on the full tensor).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
import torch

#: Statistic vector layout, one per captured tensor.
STAT_FIELDS = ("count", "sum", "sumsq", "min", "max", "nonzero", "nonfinite")
N_STATS = len(STAT_FIELDS)

#: At most this many elements of a tensor are binned for its histogram.
HIST_SAMPLE = 8192

#: Padding of the histogram range fixed at the first capture, as a fraction of the
#: observed span on each side, per signal: weights spread and activations grow
#: while training, gradients change scale most.
HIST_PADDING = {"activation": 0.5, "weight": 0.5, "gradient": 1.0}

_PRIMES = (1, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73)


def _sample_stride(numel: int) -> int:
    """A stride that takes about ``HIST_SAMPLE`` elements and is unlikely to alias with shapes."""
    if numel <= HIST_SAMPLE:
        return 1
    want = -(-numel // HIST_SAMPLE)
    # a prime stride does not divide typical (power-of-two-ish) dimensions, so the
    # sample walks across channels and positions instead of repeating one of them
    candidate = want | 1
    while any(candidate % p == 0 for p in _PRIMES[1:] if p < candidate):
        candidate += 2
    return candidate


def _float(x: torch.Tensor) -> torch.Tensor:
    x = x.detach()
    if x.dtype not in (torch.float32, torch.float64):
        x = x.float()
    return x


@dataclass
class HistState:
    """Per (layer, signal): histogram range fixed at the first capture, kept on the device."""

    bins: int
    padding: float
    lo: torch.Tensor | None = None  # 0-d, on the tensor's device
    hi: torch.Tensor | None = None

    def fix_range(self, sample: torch.Tensor) -> None:
        mn, mx = torch.aminmax(sample)
        span = mx - mn
        span = torch.where(span > 0, span, mx.abs().clamp(min=1e-12))
        lo = torch.where(mn >= 0, torch.zeros_like(mn), mn - self.padding * span)
        hi = mx + self.padding * span
        self.lo, self.hi = lo, hi

    def counts(self, sample: torch.Tensor) -> torch.Tensor:
        """``[underflow, bins..., overflow, lo, hi]`` for a finite sample, as float64."""
        if self.lo is None or self.lo.device != sample.device:
            self.fix_range(sample)
        assert self.lo is not None and self.hi is not None
        scale = self.bins / (self.hi - self.lo)
        idx = ((sample - self.lo) * scale).floor_().clamp_(-1, self.bins).add_(1).long()
        out = torch.zeros(self.bins + 2, dtype=torch.float64, device=sample.device)
        out.index_add_(0, idx, torch.ones_like(idx, dtype=torch.float64))
        return torch.cat([out, torch.stack([self.lo, self.hi]).double()])


def tensor_stats(
    x: torch.Tensor,
    *,
    unit_dim: int | None = None,
    hist: HistState | None = None,
) -> list[torch.Tensor]:
    """Statistics of ``x`` as device tensors: ``[stats(7)]`` + ``[hist(bins+4)]`` + units.

    Non-finite elements are counted and replaced by zero before the moments, so a
    NaN never turns the mean or the histogram into NaN. Units (when ``unit_dim``
    is given): per-unit count of non-zero elements and per-unit sum.
    """
    xf = _float(x)
    n = xf.numel()
    xc = torch.nan_to_num(xf, nan=0.0, posinf=0.0, neginf=0.0)
    flat = xc.reshape(-1)
    # elements that are not finite: x*0 is 0 exactly where x is finite
    nonfinite = torch.nan_to_num_(xf.mul(0.0), nan=1.0, posinf=1.0, neginf=1.0).sum()
    mn, mx = torch.aminmax(flat)
    nz_elems = flat.sign().abs_()
    out: list[torch.Tensor] = []
    if unit_dim is not None:
        dims = [d for d in range(xc.dim()) if d != unit_dim]
        unit_nonzero = nz_elems.view(xc.shape).sum(dim=dims)
        unit_sum = xc.sum(dim=dims)
        nonzero = unit_nonzero.sum()
        total = unit_sum.sum()
    else:
        nonzero = nz_elems.sum()
        total = flat.sum()
    vec = torch.stack(
        [
            torch.full((), float(n), dtype=flat.dtype, device=flat.device),
            total,
            torch.dot(flat, flat),
            mn,
            mx,
            nonzero,
            nonfinite,
        ]
    ).double()
    out.append(vec)
    if hist is not None:
        stride = _sample_stride(n)
        sample = flat[::stride][:HIST_SAMPLE] if stride > 1 else flat
        out.append(hist.counts(sample))
    if unit_dim is not None:
        out.append(unit_nonzero.double())
        out.append(unit_sum.double())
    return out


@dataclass
class Entry:
    """One captured tensor: where its numbers go once they reach the host."""

    slot: Hashable  # the (layer, signal) the numbers belong to
    hist: bool
    units: int  # number of units, 0 when none
    sizes: tuple[int, ...] = field(default=())


class StepCapture:
    """Collects the device tensors of one capture step; one host copy at the end."""

    def __init__(self, bins: int) -> None:
        self.bins = bins
        self.entries: list[Entry] = []
        self.tensors: list[torch.Tensor] = []

    def add(self, slot: Hashable, parts: list[torch.Tensor], hist: bool, units: int) -> None:
        self.entries.append(Entry(slot, hist, units, tuple(p.numel() for p in parts)))
        self.tensors.extend(parts)

    def __len__(self) -> int:
        return len(self.entries)

    def to_host(self, extra: list[torch.Tensor] = ()) -> tuple[list[Entry], np.ndarray, list]:
        """Copy everything (plus ``extra`` tensors) to the host in one transfer."""
        pieces = [t.reshape(-1).double() for t in self.tensors]
        extra_flat = [t.reshape(-1).double() for t in extra]
        if not pieces and not extra_flat:
            return self.entries, np.zeros(0), []
        flat = torch.cat(pieces + extra_flat).cpu().numpy()
        n_main = sum(p.numel() for p in pieces)
        extras, off = [], n_main
        for t in extra_flat:
            extras.append(flat[off : off + t.numel()])
            off += t.numel()
        return self.entries, flat[:n_main], extras


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


def combine(entries: list[Entry], flat: np.ndarray) -> dict[Hashable, SlotResult]:
    """Sum the captured vectors per slot (min/max for the extremes)."""
    results: dict[Hashable, SlotResult] = {}
    off = 0
    for e in entries:
        parts = []
        for size in e.sizes:
            parts.append(flat[off : off + size])
            off += size
        stats = parts[0]
        res = results.get(e.slot)
        if res is None:
            res = results[e.slot] = SlotResult(stats=stats.copy())
        else:
            s = res.stats
            s[[0, 1, 2, 5, 6]] += stats[[0, 1, 2, 5, 6]]
            s[3] = min(s[3], stats[3])
            s[4] = max(s[4], stats[4])
        i = 1
        if e.hist:
            counts, lo, hi = parts[i][:-2], parts[i][-2], parts[i][-1]
            if res.hist is None:
                res.hist, res.hist_range = counts.copy(), (float(lo), float(hi))
            else:
                res.hist += counts
            i += 1
        if e.units:
            nz, us = parts[i], parts[i + 1]
            if res.unit_nonzero is None and not res.unit_mismatch:
                res.unit_nonzero, res.unit_sum = nz.copy(), us.copy()
                res.unit_count = stats[0] / e.units
            elif res.unit_nonzero is not None and res.unit_nonzero.shape == nz.shape:
                res.unit_nonzero += nz
                res.unit_sum += us
                res.unit_count += stats[0] / e.units
            else:
                res.unit_mismatch = True
                res.unit_nonzero = res.unit_sum = None
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
