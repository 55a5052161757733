"""Read queries on ``unit_tokens``: the tokens on which each unit of a layer was most
active at a language model's evaluation, with the input tokens around each (the layout is
in :mod:`nbviz.recording.unit_tokens`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from nbviz.store.arrays import from_blob
from nbviz.store.columns import int_array
from nbviz.store.errors import StoredValueError
from nbviz.store.query import MissingStepError, ReaderBase, close_matches, describe_steps

__all__ = ["TOP_TOKEN_COLUMNS", "UnitTokenQueries", "UnitTokens"]

TOP_TOKEN_COLUMNS = (
    "step",
    "unit",
    "rank",
    "id",
    "position",
    "value",
    "token_id",
    "token",
    "context_ids",
    "context",
    "focus",
)


class UnitTokens(NamedTuple):
    """One layer's top tokens at one evaluation: ``k`` per unit, most active first."""

    step: int
    ids: np.ndarray  # int64 [units, k]; -1 where the unit has fewer tokens
    positions: np.ndarray  # int32 [units, k]; -1 likewise
    values: np.ndarray  # float32 [units, k]; NaN likewise
    contexts: np.ndarray  # int32 [units, k, width]; -1 outside the sample
    before: int  # the token's place in its context
    nonfinite: np.ndarray  # int64 [units]: positions whose activation was not finite


class UnitTokenQueries(ReaderBase):
    """Each unit's top-activating tokens at a language model's evaluations."""

    def top_token_layers(self, split: str = "val") -> list[str]:
        """Layers with top tokens recorded for ``split``, by name."""
        if not self._holds("unit_tokens"):
            return []
        rows = self._q(
            "SELECT DISTINCT layer FROM unit_tokens WHERE split = ? ORDER BY layer", (split,)
        )
        return [r[0] for r in rows]

    def top_token_steps(self, layer: str, split: str = "val") -> np.ndarray:
        """Sorted evaluation steps with top tokens of ``layer`` for ``split`` (may be empty)."""
        if not self._holds("unit_tokens"):
            return int_array([])
        rows = self._q(
            "SELECT step FROM unit_tokens WHERE split = ? AND layer = ? ORDER BY step",
            (split, layer),
        )
        return int_array(r[0] for r in rows)

    def unit_tokens(self, layer: str, step: int | None = None, split: str = "val") -> UnitTokens:
        """The top tokens of every unit of ``layer`` at the evaluation of ``step`` (None:
        the latest; otherwise the latest at or before ``step``), as arrays."""
        layers = self.top_token_layers(split)
        if layer not in layers:
            raise ValueError(
                f"unit_tokens: no top tokens of layer {layer!r} for split {split!r} "
                f"({close_matches(layer, layers)}); evaluate a language model whose layer is "
                "watched (run.watch) or named by units_layer=: run.evaluate(step, model, loader)"
            )
        steps = self.top_token_steps(layer, split)
        if step is not None:
            steps = steps[steps <= int(step)]
        if not len(steps):
            raise MissingStepError(
                f"unit_tokens: no top tokens of {layer!r} at or before step {step}; "
                f"{describe_steps(self.top_token_steps(layer, split), step)}"
            )
        at = int(steps[-1])
        row = self._row(
            'SELECT units, k, before, width, ids, positions, "values", contexts, nonfinite '
            "FROM unit_tokens WHERE split = ? AND layer = ? AND step = ?",
            (split, layer, at),
        )
        units, k, before, width = _sizes(row[:4], layer, at)
        return UnitTokens(
            step=at,
            ids=from_blob(row[4], "<i8", [units, k]),
            positions=from_blob(row[5], "<i4", [units, k]),
            values=from_blob(row[6], "<f4", [units, k]),
            contexts=from_blob(row[7], "<i4", [units, k, width]),
            before=before,
            nonfinite=from_blob(row[8], "<i8", [units]),
        )

    def top_tokens(
        self, layer: str, unit: int | None = None, step: int | None = None, split: str = "val"
    ) -> pd.DataFrame:
        """The tokens on which each unit of ``layer`` was most active, in their context.

        One row per unit and rank (0: the most active): ``step`` (the evaluation read:
        the latest at or before ``step``, None: the latest), ``unit``, ``rank``, ``id``
        (the sample), ``position`` (the token's), ``value`` (the unit's activation
        there), ``token_id`` and ``token`` (the input token there, as text where the
        evaluation was given a vocabulary, ``tokens=``, else the id), ``context_ids``
        and ``context`` (the input tokens around it, as lists) and ``focus`` (the
        token's index in them). ``unit`` picks one unit (default: every unit).
        Padding is never among them.
        """
        got = self.unit_tokens(layer, step, split)
        units = got.ids.shape[0]
        chosen = np.arange(units)
        if unit is not None:
            if not 0 <= int(unit) < units:
                raise ValueError(
                    f"top_tokens: unit {unit} is outside 0..{units - 1} for layer {layer!r}"
                )
            chosen = np.asarray([int(unit)])
        texts = self.token_texts()  # type: ignore[attr-defined]
        rows = []
        for u in chosen:
            for r in range(got.ids.shape[1]):
                if got.ids[u, r] < 0:
                    continue
                ctx = got.contexts[u, r]
                kept = np.flatnonzero(ctx >= 0)
                ids = [int(i) for i in ctx[kept]]
                focus = int(np.searchsorted(kept, got.before))
                token_id = int(ctx[got.before])
                rows.append(
                    (
                        got.step,
                        int(u),
                        r,
                        int(got.ids[u, r]),
                        int(got.positions[u, r]),
                        float(got.values[u, r]),
                        token_id,
                        texts.get(token_id, str(token_id)) if token_id >= 0 else "",
                        ids,
                        [texts.get(i, str(i)) for i in ids],
                        focus if token_id >= 0 else -1,
                    )
                )
        frame = pd.DataFrame(rows, columns=list(TOP_TOKEN_COLUMNS))
        for column in ("step", "unit", "rank", "id", "position", "token_id", "focus"):
            frame[column] = frame[column].astype(np.int64)
        frame["value"] = frame["value"].astype(np.float64)
        return frame


def _sizes(stored: Any, layer: str, step: int) -> tuple[int, int, int, int]:
    """A ``unit_tokens`` row's ``units, k, before, width``: whole numbers (bools aside),
    ``units, k >= 0``, ``width >= 1`` and ``0 <= before < width``; StoredValueError
    naming the layer, the step and the column otherwise."""
    names = ("units", "k", "before", "width")
    for name, value in zip(names, stored, strict=True):
        if type(value) is not int:
            raise StoredValueError(
                f"top tokens of {layer!r} at step {step}: column {name} holds {value!r} "
                f"(a {type(value).__name__}) where nbviz writes a whole number"
            )
    units, k, before, width = stored
    bounds = {
        "units": units >= 0,
        "k": k >= 0,
        "width": width >= 1,
        "before": 0 <= before < width,
    }
    for name, ok in bounds.items():
        if not ok:
            raise StoredValueError(
                f"top tokens of {layer!r} at step {step}: column {name} holds "
                f"{stored[names.index(name)]!r}, outside what nbviz writes (units and k at "
                f"least 0, width at least 1, 0 <= before < width; here width {width})"
            )
    return units, k, before, width
