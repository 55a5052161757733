"""Read queries on ``layer_stats`` and ``unit_stats``: layer statistics, whole and per unit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from nbviz.store.columns import frame, int_array
from nbviz.store.errors import StoredValueError
from nbviz.store.query import (
    MissingStepError,
    ReaderBase,
    and_equal,
    close_matches,
    describe_steps,
)
from nbviz.store.schema import TABLES

__all__ = ["STAT_COLUMNS", "LayerStatsQueries"]

STAT_COLUMNS = TABLES["layer_stats"]
_STAT_KINDS = "issifffffiff"  # see nbviz.store.columns.frame
# the stored rows name their series by id (schema 3): its layer and signal joined back
_STAT_SELECT = ", ".join(
    {"layer": "s.layer", "signal": "s.signal"}.get(c, f't."{c}"') for c in STAT_COLUMNS
)
_STAT_FROM = "layer_stats t JOIN series s ON s.id = t.sid"


class LayerStatsQueries(ReaderBase):
    """Per-layer statistics of each signal over the steps, and per-unit values."""

    def steps(self, signal: str) -> np.ndarray:
        """Sorted unique steps that have layer_stats rows for ``signal`` (int64)."""
        self._check_signal(signal)
        return self.recorded_steps(f"stats:{signal}")

    def recorded_layers(self, signal: str | None = None, table: str = "layer_stats") -> list[str]:
        """Names with rows in ``table`` (layer_stats, histograms, unit_stats), sorted."""
        if table not in ("layer_stats", "histograms", "unit_stats"):
            raise ValueError(
                "recorded_layers: table must be layer_stats, histograms or unit_stats, "
                f"got {table!r}"
            )
        return sorted({la for la, s in self._pairs(table) if signal is None or s == signal})

    def stats(
        self,
        signal: str,
        layer: str | None = None,
        steps: int | Sequence[int] | None = None,
        *,
        step_range: tuple[int, int] | None = None,
    ) -> pd.DataFrame:
        """layer_stats rows for one signal, sorted by step then layer.

        Columns: step, layer, signal, count, mean, std, min, max, zero_frac,
        nonfinite, norm, rel. ``layer=None`` means every layer. NaN is "not
        measured": zero_frac between distribution steps (see ``Run.watch``'s
        ``hist_every``), an update's moments.
        """
        self._check_signal(signal)
        where, extra = self._step_filter(steps, step_range)
        where = where.replace(" step ", " t.step ")
        if layer is not None:
            sid = self._sid(layer, signal)
            rows = self._q(
                f"SELECT {_STAT_SELECT} FROM {_STAT_FROM} WHERE t.sid = ?{where} ORDER BY t.step",
                [-1 if sid is None else sid, *extra],
            )
        else:
            rows = self._q(
                f"SELECT {_STAT_SELECT} FROM {_STAT_FROM} WHERE s.signal = ?{where} "
                "ORDER BY t.step, s.layer",
                [signal, *extra],
            )
        if not rows:
            if (
                layer is not None
                and self._one(
                    "SELECT 1 FROM layer_stats WHERE sid = ? LIMIT 1",
                    (self._sid(layer, signal),),
                )
                is None
            ):
                raise self._unknown_layer("layer_stats", layer, signal)
            if isinstance(steps, (int, np.integer)):
                raise MissingStepError(
                    f"no {signal} stats{'' if layer is None else f' for {layer!r}'} at step "
                    f"{steps}; {describe_steps(self.steps(signal), int(steps))}"
                )
        return frame(rows, STAT_COLUMNS, _STAT_KINDS)

    def stats_at(self, step: int, signal: str | None = None) -> pd.DataFrame:
        """Every layer's stats at one step (all signals, or one), sorted by signal, layer."""
        if signal is not None:
            self._check_signal(signal)
        of_signal, params = and_equal(**{"s.signal": signal})
        rows = self._q(
            f"SELECT {_STAT_SELECT} FROM {_STAT_FROM} WHERE t.step = ?{of_signal} "
            "ORDER BY s.signal, s.layer",
            [int(step), *params],
        )
        if not rows:
            recorded = self.steps(signal) if signal else self._all_steps("layer_stats")
            raise MissingStepError(
                f"no layer stats at step {step}; {describe_steps(recorded, int(step))}"
            )
        return frame(rows, STAT_COLUMNS, _STAT_KINDS)

    def unit_stats(
        self,
        layer: str,
        signal: str,
        steps: int | Sequence[int] | None = None,
        *,
        step_range: tuple[int, int] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(steps int64 [n], values float32 [n, n_units])`` for one layer and unit signal."""
        where, extra = self._step_filter(steps, step_range)
        sid = self._sid(layer, signal)
        rows = self._q(
            f'SELECT step, "values" FROM unit_stats WHERE sid = ?{where} ORDER BY step',
            [-1 if sid is None else sid, *extra],
        )
        if not rows:
            recorded = self._layer_steps("unit_stats", layer, signal)
            if len(recorded) == 0:
                pairs = self._pairs("unit_stats")
                raise ValueError(
                    f"no unit_stats for layer {layer!r} and signal {signal!r}; "
                    f"{close_matches(f'{layer}/{signal}', [f'{la}/{s}' for la, s in pairs])}"
                )
            if isinstance(steps, (int, np.integer)):
                raise MissingStepError(
                    f"no unit_stats {signal} for {layer!r} at step {steps}; "
                    f"{describe_steps(recorded, int(steps))}"
                )
        sizes = {len(r[1]) for r in rows}
        if any(size % 4 for size in sizes):
            raise StoredValueError(f"unit_stats of {layer!r}/{signal} hold {sorted(sizes)} bytes")
        if len(sizes) > 1:
            raise ValueError(
                f"unit_stats of {layer!r}/{signal} have different unit counts "
                f"({sorted(s // 4 for s in sizes)})"
            )
        n_units = sizes.pop() // 4 if sizes else 0
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4")
        return int_array(r[0] for r in rows), matrix.reshape(len(rows), n_units)
