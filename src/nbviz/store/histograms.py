"""Read queries on ``histograms``: each layer's value distribution at the recorded steps.

A histogram is n uniform bins over ``[lo, hi]`` (counts little-endian int64),
with the values below, above and non-finite counted apart. Where a histogram was
logged with other bins (a TensorBoard log's exponential buckets), those are kept
in ``histogram_bins`` beside its uniform row: :meth:`HistogramQueries.histogram`
returns them as they were logged; the other reads, which the views draw from,
return the uniform rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from nbviz.store.columns import floats, frame, int_array, nan, nz_ints
from nbviz.store.encoding import bins_arrays, counts_array, counts_rows
from nbviz.store.errors import StoredValueError
from nbviz.store.query import MissingStepError, ReaderBase, and_equal, describe_steps

__all__ = ["HistogramQueries", "HistogramRows"]


class HistogramRows(NamedTuple):
    """One layer's histograms over time; row i of ``counts`` is the histogram at ``steps[i]``."""

    steps: np.ndarray  # int64 [n_steps]
    lo: np.ndarray  # float64 [n_steps]
    hi: np.ndarray  # float64 [n_steps]
    counts: np.ndarray  # int64 [n_steps, n_bins]
    underflow: np.ndarray  # int64 [n_steps]
    overflow: np.ndarray  # int64 [n_steps]
    nonfinite: np.ndarray  # int64 [n_steps]


class HistogramQueries(ReaderBase):
    """One layer's histogram at a step, over a range of steps, or every layer's at a step."""

    def histogram(self, layer: str, signal: str, step: int) -> tuple[np.ndarray, np.ndarray]:
        """``(edges, counts)`` of one layer's histogram: n + 1 float64 edges, n int64 counts.

        The bins are the ones logged: a histogram imported with unequal bins (a
        TensorBoard log's) comes back with its own edges and counts, exactly (the
        counts float64 where they are not whole numbers), though the views draw
        it re-binned onto uniform bins. Stored bins that do not decode (lengths,
        a NaN edge, edges that decrease) raise a RunFileError naming the file and
        the row: the StoredValueError raised here, as from every decoder, becomes
        one in the wrapper every public read has (``store.query._naming_the_file``).
        """
        self._check_signal(signal)
        sid = self._sid(layer, signal)
        if sid is not None and self._holds("histogram_bins"):
            own = self._row(
                "SELECT edges, counts FROM histogram_bins WHERE step = ? AND sid = ?",
                (int(step), sid),
            )
            if own is not None:
                try:
                    return bins_arrays(*own)
                except StoredValueError as exc:
                    raise StoredValueError(
                        f"the logged bins of {layer!r}/{signal} at step {int(step)} "
                        f"(histogram_bins): {exc}"
                    ) from None
        row = self._row(
            "SELECT lo, hi, counts, bins FROM histograms WHERE step = ? AND sid = ?",
            (int(step), -1 if sid is None else sid),
        )
        if row is None:
            raise self._missing_histogram(layer, signal, int(step))
        lo, hi, blob, bins = row
        counts = counts_array(blob, bins)
        return np.linspace(nan(lo), nan(hi), len(counts) + 1), counts

    def histogram_steps(self, layer: str, signal: str) -> np.ndarray:
        """Sorted steps with a histogram of ``layer``/``signal`` (int64; empty if none)."""
        self._check_signal(signal)
        return self._layer_steps("histograms", layer, signal)

    def _missing_histogram(self, layer: str, signal: str, step: int) -> Exception:
        recorded = self._layer_steps("histograms", layer, signal)
        if len(recorded) == 0:
            return self._unknown_layer("histograms", layer, signal)
        return MissingStepError(
            f"no {signal} histogram for {layer!r} at step {step}; {describe_steps(recorded, step)}"
        )

    def histogram_rows(
        self,
        layer: str,
        signal: str,
        steps: int | Sequence[int] | None = None,
        *,
        step_range: tuple[int, int] | None = None,
    ) -> HistogramRows:
        """One layer's histograms over time as a :class:`HistogramRows` (sorted by step)."""
        self._check_signal(signal)
        where, extra = self._step_filter(steps, step_range)
        sid = self._sid(layer, signal)
        rows = self._q(
            "SELECT step, lo, hi, counts, bins, underflow, overflow, nonfinite FROM histograms "
            f"WHERE sid = ?{where} ORDER BY step",
            [-1 if sid is None else sid, *extra],
        )
        if not rows:
            recorded = self._layer_steps("histograms", layer, signal)
            if len(recorded) == 0:
                raise self._unknown_layer("histograms", layer, signal)
            if isinstance(steps, (int, np.integer)):
                raise self._missing_histogram(layer, signal, int(steps))
        st, lo, hi, blobs, bins, under, over, nonfin = (
            list(zip(*rows)) if rows else [(), (), (), (), (), (), (), ()]
        )
        arrays = counts_rows(blobs, bins)
        sizes = {len(a) for a in arrays}
        if len(sizes) > 1:
            raise ValueError(
                f"histograms of {layer!r}/{signal} have different bin counts "
                f"({sorted(sizes)}); select steps with one bin count"
            )
        n_bins = sizes.pop() if sizes else 0
        counts = (np.stack(arrays) if arrays else np.zeros((0, n_bins), dtype=np.int64)).reshape(
            len(rows), n_bins
        )
        counts.flags.writeable = False
        return HistogramRows(
            int_array(st),
            floats(lo),
            floats(hi),
            counts,
            nz_ints(under),
            nz_ints(over),
            nz_ints(nonfin),
        )

    def histograms_at(self, step: int, signal: str | None = None) -> pd.DataFrame:
        """Every layer's histogram at one step, sorted by signal, layer.

        Columns: layer, signal, lo, hi, underflow, overflow, nonfinite, and
        ``counts`` holding one read-only int64 array per row.
        """
        if signal is not None:
            self._check_signal(signal)
        of_signal, params = and_equal(**{"s.signal": signal})
        rows = self._q(
            "SELECT s.layer, s.signal, t.lo, t.hi, t.underflow, t.overflow, t.nonfinite, "
            "t.counts, t.bins FROM histograms t JOIN series s ON s.id = t.sid "
            f"WHERE t.step = ?{of_signal} ORDER BY s.signal, s.layer",
            [int(step), *params],
        )
        if not rows:
            raise MissingStepError(
                f"no histograms at step {step}; "
                f"{describe_steps(self._all_steps('histograms'), int(step))}"
            )
        out = frame(
            [r[:7] for r in rows],
            ("layer", "signal", "lo", "hi", "underflow", "overflow", "nonfinite"),
            "ssffiii",
        )
        out["counts"] = counts_rows([r[7] for r in rows], [r[8] for r in rows])
        return out
