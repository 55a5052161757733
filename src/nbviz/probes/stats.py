"""A capture step's statistics: gathered on the device, copied to the host once, combined.

Every value here is additive (counts, sums, sums of squares, per-unit sums,
histogram counts) or an extreme (min/max), so captures of several calls of one
module, several micro-batches, or several ranks combine exactly.

Each tensor's own numbers come from :mod:`nbviz.probes.tensor_stats` and its
histogram sample from :mod:`nbviz.probes.histogram`; a :class:`StepCapture`
keeps them all on the device until the step ends, then sends every result of
the step to the host in one ``torch.cat`` and one copy, where :func:`combine`
adds them up per (layer, signal).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
import torch

from nbviz.probes import tensor_stats as ts
from nbviz.probes.histogram import (
    HIST_SAMPLE,
    BinCache,
    HistInput,
    HistState,
    bin_layout,
    hist_sample,
)
from nbviz.probes.tensor_stats import (
    MAX,
    MIN,
    N_STATS,
    NONZERO,
    SUM,
    Scratch,
    clean_parts,
    raw_parts,
    real_view,
    witness,
)


@dataclass(slots=True)
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
    peaks: bool = False  # each unit's largest magnitude follows the per-unit sum
    #: The BATCH_FIELDS values, read on the host already (then ``scalars`` is empty).
    known: list[float] | None = None


#: A clean tensor's numbers, measured but not yet added: its entry, 0-d results, vectors.
Measured = tuple[Entry, list[torch.Tensor], list[torch.Tensor]]


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
        peaks: bool = False,
        zeros: bool = True,
    ) -> Entry:
        """Statistics of a tensor that may be gone (or changed) when the step ends.

        ``peaks``: with ``unit_dim``, also each unit's largest magnitude. Without
        ``zeros`` the zero fraction is not measured (NaN on the host: "not measured").
        """
        measured = self.measure_clean(slot, x, unit_dim, hist, peaks, zeros)
        self.add_measured(measured)
        return measured[0]

    def measure_clean(
        self,
        slot: Hashable,
        x: torch.Tensor,
        unit_dim: int | None,
        hist: HistState | None,
        peaks: bool = False,
        zeros: bool = True,
    ) -> Measured:
        """``add_clean``'s numbers without adding them yet (see ``add_measured``)."""
        x = real_view(x)
        peaks = peaks and unit_dim is not None
        fields, scalars, vectors, hist_in = clean_parts(
            x, unit_dim, hist, self.scratch, peaks, zeros
        )
        units = x.shape[unit_dim] if unit_dim is not None else 0
        entry = Entry(slot, x.numel(), fields, units, hist, peaks=peaks)
        entry.witness = witness(x, fields, scalars)
        self._histogram(entry, hist_in, vectors, keep=False)
        return entry, scalars, vectors

    def measure_clean_many(
        self, items: list[tuple[Hashable, torch.Tensor, HistState | None]], zeros: bool = True
    ) -> list[Measured]:
        """``measure_clean`` of several ``(slot, tensor, hist)``, without units.

        The small tensors among them (:func:`~nbviz.probes.tensor_stats.batchable`)
        are measured together: the same numbers, in a few ops for all of them.
        """
        small = [i for i, (_, x, _) in enumerate(items) if ts.batchable(x)]
        done = self._batch([items[i] for i in small], zeros) if len(small) >= ts.BATCH_MIN else []
        out: list[Measured | None] = [None] * len(items)
        for i, measured in zip(small if done else [], done, strict=True):
            out[i] = measured
        for i, (slot, x, hist) in enumerate(items):
            if out[i] is None:
                out[i] = self.measure_clean(slot, x, None, hist, zeros=zeros)
        return out  # type: ignore[return-value]

    def add_raw_many(self, items: list[tuple[Hashable, torch.Tensor, HistState | None]]) -> None:
        """``add_raw`` of several ``(slot, tensor, hist)``, the small ones measured together."""
        small = [ts.batchable(x) for _, x, _ in items]
        if sum(small) >= ts.BATCH_MIN:
            done = self._batch([it for it, b in zip(items, small, strict=True) if b])
            if done:
                for measured in done:
                    self._add(*measured)
                items = [it for it, b in zip(items, small, strict=True) if not b]
        for slot, x, hist in items:
            self.add_raw(slot, x, hist)

    def _batch(
        self, items: list[tuple[Hashable, torch.Tensor, HistState | None]], zeros: bool = True
    ) -> list[Measured]:
        """Small finite CPU tensors measured together (none when one of them is not finite)."""
        parts = ts.batch_parts([x for _, x, _ in items])
        if parts is None:
            return []
        rows, flats = parts
        if not zeros:  # counted in the same op as the rest: left out all the same
            for row in rows:
                row[ts.BATCH_FIELDS.index(NONZERO)] = math.nan
        fields = ts.BATCH_FIELDS
        mark = witness(flats[0], fields, [])  # all finite, on the CPU: a constant
        out: list[Measured] = []
        for (slot, _, hist), flat, row in zip(items, flats, rows, strict=True):
            entry = Entry(slot, flat.numel(), (), 0, hist, witness=mark, known=row)
            vectors: list[torch.Tensor] = []
            if hist is not None:  # a view of the batch's own copy: nothing changes it
                self._histogram(entry, HistInput(hist, flat, finite=True), vectors, keep=True)
            out.append((entry, [], vectors))
        return out

    def add_measured(self, measured: Measured) -> None:
        self._add(*measured)

    def add_raw(self, slot: Hashable, x: torch.Tensor, hist: HistState | None = None) -> None:
        """Statistics of a tensor that stays alive until the step's host copy."""
        x = real_view(x)
        fields, scalars, vectors, hist_in = raw_parts(x, hist, self.scratch)
        # on CPU raw_parts has already checked the tensor and cleaned it if needed
        # (the read policy is looked up on its module: one switch there reaches both)
        source = None if ts.cheap_to_read(x) else x.detach()
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
        sample, copied = hist_sample(hist_in.flat)
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
        """``[underflow, bins..., overflow]`` of every queued sample, block after block.

        Laid out by :func:`~nbviz.probes.histogram.bin_layout`: the full samples as the
        rows of one block whose constants are broadcast per row, then the others.
        """
        sizes = [t.numel() for t in self._samples]
        # the constants in the dtype torch.cat gives the samples (float32 and float64
        # together: float64), so that a value on a bin's edge falls in that bin
        like = self._samples[0]
        dtype = functools.reduce(torch.promote_types, {t.dtype for t in self._samples})
        if like.dtype != dtype:
            like = like.new_empty(0, dtype=dtype)
        if self.bin_cache is not None:
            layout = self.bin_cache.layout(self._sample_hists, sizes, like)
        else:
            layout = bin_layout(self._sample_hists, sizes, like)
        ordered = [self._samples[i] for i in layout.order]
        scratch = self.scratch
        if scratch is not None and len({t.dtype for t in ordered}) == 1:
            # the step's samples and their bin numbers in buffers kept across captures:
            # fresh ones of this size cost page faults at every capture on CPU
            dtype = ordered[0].dtype
            samples = torch.cat(ordered, out=scratch.take(sum(sizes), dtype, "samples"))
        else:
            samples = torch.cat(ordered)
        rows = layout.rows * HIST_SAMPLE
        top = self.bins + 1
        if layout.rows:
            start, scale, _ = layout.row_consts
            samples[:rows].view(layout.rows, HIST_SAMPLE).sub_(start).mul_(scale).clamp_(0, top)
        if rows < samples.numel():
            start, scale, _ = layout.rest_consts
            samples[rows:].sub_(start).mul_(scale).clamp_(0, top)
        idx = samples
        total = len(self._samples) * (self.bins + 2)
        weights = None
        if self._weighted:
            # NaN weighs nothing; infinities were clamped into the outer bins
            weights = (idx == idx).to(samples.dtype)
            idx = torch.nan_to_num_(idx, nan=0.0)
        # the conversion to integers rounds toward zero: the floor of these (>= 0) values
        if scratch is not None and total < 2**31:
            # bins below ``total``: exact in int32, which bincount takes as well
            bin_index = scratch.take(idx.numel(), torch.int32, "bins").copy_(idx)
        else:
            bin_index = idx.long()
        if layout.rows:
            bin_index[:rows].view(layout.rows, HIST_SAMPLE).add_(layout.row_consts[2])
        if rows < bin_index.numel():
            bin_index[rows:].add_(layout.rest_consts[2])
        return torch.bincount(bin_index, weights, minlength=total)

    def _add(self, entry: Entry, scalars: list, vectors: list) -> None:
        entry.vector_sizes = tuple([v.numel() for v in vectors])
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
    unit_peak: np.ndarray | None = None  # each unit's largest magnitude, where recorded
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
    # every entry's 0-d results, counts and values read on the host already placed in
    # a few assignments (a capture step has hundreds of entries)
    table = np.zeros((len(entries), N_STATS))
    rows: list[int] = []
    cols: list[int] = []
    known_rows: list[int] = []
    known: list[list[float]] = []
    for i, e in enumerate(entries):
        if e.scalars:
            rows.extend([i] * len(e.scalars))
            cols.extend(e.scalars)
        if e.known is not None:
            known_rows.append(i)
            known.append(e.known)
    table[rows, cols] = scalars
    if known_rows:
        table[known_rows, SUM : NONZERO + 1] = known
    table[:, 0] = [e.count for e in entries]
    v_off = 0
    for i, e in enumerate(entries):
        stats = table[i]
        vecs = []
        for size in e.vector_sizes:
            vecs.append(vectors[v_off : v_off + size])
            v_off += size
        if e.units:
            stats[NONZERO] = vecs[0].sum()
            if SUM not in e.scalars:  # measured apart where a unit's sum is non-finite
                stats[SUM] = vecs[1].sum()
        elif e.known is None and NONZERO not in e.scalars:
            stats[NONZERO] = math.nan  # not counted: the zero fraction is not measured
        if e.source is not None and not (math.isfinite(stats[MIN]) and math.isfinite(stats[MAX])):
            redo.append((i, e))
        parts[i] = (stats, vecs)
    if redo:
        _redo_clean(redo, parts)
    # A slot's first entry lends it its arrays: views of this capture's own (``table``
    # and ``flat``), which nothing reads once its entry is passed, so no copies; a later
    # entry of the slot adds into them.
    results: dict[Hashable, SlotResult] = {}
    for i, e in enumerate(entries):
        stats, vecs = parts[i]
        res = results.get(e.slot)
        if res is None:
            res = results[e.slot] = SlotResult(stats=stats)
        else:
            s = res.stats
            s[[0, 1, 2, 5, 6]] += stats[[0, 1, 2, 5, 6]]
            s[3] = min(s[3], stats[3])
            s[4] = max(s[4], stats[4])
        j = 0
        if e.units:
            nz, us = vecs[0], vecs[1]
            peak = vecs[2] if e.peaks else None
            j = 3 if e.peaks else 2
            if res.unit_nonzero is None and not res.unit_mismatch:
                res.unit_nonzero, res.unit_sum, res.unit_peak = nz, us, peak
                res.unit_count = e.count / e.units
            elif res.unit_nonzero is not None and res.unit_nonzero.shape == nz.shape:
                res.unit_nonzero += nz
                res.unit_sum += us
                res.unit_count += e.count / e.units
                # a call without maxima leaves the slot without them (never half of them)
                has = res.unit_peak is not None and peak is not None
                res.unit_peak = np.maximum(res.unit_peak, peak) if has else None
            else:
                res.unit_mismatch = True
                res.unit_nonzero = res.unit_sum = res.unit_peak = None
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
                res.hist, res.hist_range = counts, (e.hist.lo, e.hist.hi)
                res.hist_state = e.hist
            else:
                res.hist += counts
    return results


def summarize(stats: np.ndarray) -> dict[str, float]:
    """Turn a statistic vector into the stored columns (mean, std, ... over finite values).

    Where every value was non-finite there is nothing to measure: every statistic,
    the norm included, is NaN beside the ``nonfinite`` count.
    """
    count, total, sumsq, mn, mx, nonzero, nonfinite = (float(v) for v in stats)
    finite = count - nonfinite
    if finite > 0:
        mean = total / finite
        var = max(sumsq / finite - mean * mean, 0.0)
        std = var**0.5
        zeros = count - nonzero - nonfinite
        zero_frac = zeros / count
    else:  # nothing finite was seen: no statistic, not a zero norm
        mean = std = mn = mx = zero_frac = float("nan")
        sumsq = float("nan")
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


def summarize_all(stats: np.ndarray) -> list[tuple]:
    """:func:`summarize` of each row of ``(k, N_STATS)`` statistic vectors, in one pass of
    array operations (a capture step has hundreds): per row, ``(count, mean, std, min,
    max, zero_frac, nonfinite, norm)``, the same numbers as ``summarize`` gives."""
    stats = np.asarray(stats, dtype=np.float64).reshape(-1, N_STATS)
    count, total, sumsq, mn, mx, nonzero, nonfinite = stats.T
    finite = count - nonfinite
    seen = finite > 0
    nan = float("nan")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mean = total / finite
        var = np.maximum(sumsq / finite - mean * mean, 0.0)
        std = var**0.5
        zero_frac = (count - nonzero - nonfinite) / count
        sumsq = np.where(seen, sumsq, nan)
        norm = sumsq**0.5
    columns = [
        count.astype(np.int64),
        *(np.where(seen, c, nan) for c in (mean, std, mn, mx, zero_frac)),
        nonfinite.astype(np.int64),
        norm,
    ]
    return list(zip(*(c.tolist() for c in columns), strict=True))
